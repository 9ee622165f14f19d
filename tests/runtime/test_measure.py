"""The benchmark's measurements return real samples (no assertion on how fast they are)."""

from __future__ import annotations

import pytest

from roboscale.errors import UserError
from roboscale.runtime.measure import (
    idle_node_memory,
    inprocess_echo_samples,
    inprocess_restart_samples,
)


@pytest.mark.parametrize("kill", ["exception", "kill"])
def test_restart_samples_one_per_restart(kill: str) -> None:
    samples = inprocess_restart_samples(50, workers=5, kill=kill)
    assert len(samples) == 50 and all(s > 0 for s in samples)


def test_echo_samples_one_per_round_trip() -> None:
    samples = inprocess_echo_samples(30, 1024)
    assert len(samples) == 30 and all(s > 0 for s in samples)


def test_idle_node_memory_reports_per_node_figures() -> None:
    result = idle_node_memory(200)
    assert result["nodes"] == 200
    assert result["heap_bytes_per_node"] > 0 and result["start_us_per_node"] > 0


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(UserError, match="kill"):
        inprocess_restart_samples(1, kill="nuke")
    with pytest.raises(UserError, match="n must be at least 1"):
        inprocess_echo_samples(0, 10)
