"""Smoke test of bench/bridge_hops.py with a tiny count: real runtimes over the bridge."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import bridge_hops  # bench/bridge_hops.py, importable through tests/bench/conftest.py
import scale

RunBench = Callable[[str, list[str]], dict[str, Any]]  # tests/bench/conftest.py


@pytest.mark.slow
@pytest.mark.zenoh
def test_every_step_is_timed_on_both_sides(run_bench: RunBench, zenoh: None) -> None:
    report = run_bench("bridge_hops.py", ["--echoes", "20"])
    sides = report["raw"]["sides"]
    sizes = {str(size) for size in scale.SIZES}  # the echo table's sizes, 1 and 4 MiB too
    assert set(sides) == {"echo", "ping"}
    for got in sides.values():
        assert set(got["median_us"]) == sizes  # one row per payload size
        for steps in got["median_us"].values():
            assert set(steps) == {*bridge_hops.STEPS, "n"}
            assert steps["n"] > 0 and all(steps[s] > 0 for s in bridge_hops.STEPS)
    assert set(report["raw"]["rtt_p50_us"]) == sizes
