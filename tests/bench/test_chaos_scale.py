"""bench/chaos_scale.py --quick: the runtime's chaos monkey on 100 real workers, in-process
and process nodes, durably subscribed to one topic through the runtime and its bridge."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import chaos_scale  # bench/chaos_scale.py, importable through tests/bench/conftest.py

RunBench = Callable[[str, list[str]], dict[str, Any]]  # tests/bench/conftest.py


def test_log_counts_finds_the_message_in_flight_at_a_kill(tmp_path: Path) -> None:
    log = tmp_path / "w.log"
    # Instance 10 died after handing over 3 (never written); instance 11 resumed at 4.
    # Instance 12 began with 5 again: a duplicate. The last line is cut: no message.
    # Instance 13 got 7 again after the kill of 12 and skipped it (idempotent).
    log.write_text("10 1\n10 2\n11 4\n11 5\n12 5\n12 6\n12 7\n13 7 again\n13")
    counts = chaos_scale.log_counts(log, published=9)
    assert counts["redelivered"] == 1
    assert counts["lost"] == 3  # 3, 8 and 9
    assert counts["lost_in_flight"] == 1  # 3 only: 8 and 9 were never handed over
    assert counts["duplicated"] == 1
    assert counts["instances"] == 3


@pytest.mark.slow
@pytest.mark.zenoh
def test_quick_chaos_meets_its_goals(run_bench: RunBench, zenoh: None) -> None:
    """Every kill made, every worker running, every worker's messages exactly once: the
    process workers import at least once and act idempotently by sequence."""
    report = run_bench("chaos_scale.py", ["--quick", "--check"])
    chaos = report["results"]["chaos"]
    assert chaos["kills"] == 2000 and chaos["by_method"]["sigkill"] > 0, chaos
    workers = report["raw"]["workers"]
    assert len(workers) == 100 and workers[0]["published"] > 0
    assert all(goal["met"] is True for goal in report["goals"]), report["goals"]  # not "not judged"
