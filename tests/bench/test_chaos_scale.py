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
    log.write_text("10 1\n10 2\n11 4\n11 5\n12 5\n12 6\n12 7\n13")
    counts = chaos_scale.log_counts(log, published=9)
    assert counts["lost"] == 3  # 3, 8 and 9
    assert counts["lost_in_flight"] == 1  # 3 only: 8 and 9 were never handed over
    assert counts["duplicated"] == 1
    assert counts["instances"] == 3


@pytest.mark.slow
@pytest.mark.zenoh
def test_quick_chaos_keeps_every_worker_and_every_message(run_bench: RunBench, zenoh: None) -> None:
    """No --check: across processes the runtime's contract (docs/runtime.md) leaves the
    message handed over at the instant of a SIGKILL at most once, and at 200 kills/s a
    kill lands there now and then. Everything else must hold exactly: every kill made,
    every worker running, in-process workers exactly once, process workers losing only
    messages in flight at a kill and duplicating none."""
    report = run_bench("chaos_scale.py", ["--quick"])
    chaos = report["results"]["chaos"]
    goals = {g["goal"].split(":")[0]: g for g in report["goals"]}
    assert chaos["kills"] == 2000 and chaos["by_method"]["sigkill"] > 0, chaos
    assert goals["workers running at the end, tree alive"]["met"], chaos
    workers = report["raw"]["workers"]
    assert len(workers) == 100 and workers[0]["published"] > 0
    for row in workers:
        assert row["duplicated"] == 0, row
        assert row["lost"] == row["lost_in_flight"], row
        if row["kind"] == "in-process":
            assert row["lost"] == 0, row
