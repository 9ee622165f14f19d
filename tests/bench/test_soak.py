"""bench/soak.py --quick: real runtime, bridge and process nodes; the goals must hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import soak  # bench/soak.py, importable through tests/bench/conftest.py

RunBench = Callable[[str, list[str]], dict[str, Any]]  # tests/bench/conftest.py


def test_tally_counts_gaps_duplicates_and_the_missing_tail() -> None:
    tally = soak.Tally()
    for seq in (1, 2, 4, 4, 3, 5):
        tally.take(seq)
    # 3 was skipped (lost when 4 came), then came late: counted behind, as is the second 4.
    assert tally.counts(published=7) == {"received": 6, "lost": 1 + 2, "duplicated": 2}
    assert soak.Tally.from_dict(tally.as_dict()).as_dict() == tally.as_dict()


def test_rss_growth_is_from_the_first_sample_after_warmup_to_the_last() -> None:
    def sample(t: float, mb: float, pid: int = 7) -> dict[str, Any]:
        return {"t_s": t, "rss": {"p": mb * 1e6}, "pids": {"p": pid}}

    rows = soak.rss_growth([sample(0, 10), sample(5, 100), sample(9, 105)], warmup_s=5)
    assert rows[0]["growth_pct"] == pytest.approx(5.0)
    restarted = soak.rss_growth([sample(5, 100), sample(9, 50, pid=8)], warmup_s=5)
    assert restarted[0]["growth_pct"] is None  # another process: no growth to compare


@pytest.mark.slow
@pytest.mark.zenoh
def test_quick_soak_meets_its_goals(run_bench: RunBench, zenoh: None) -> None:
    report = run_bench("soak.py", ["--quick", "--check"])
    assert report["partial"] is False
    assert len(report["raw"]["series"]) >= 20
    assert {r["subscriber"] for r in report["results"]["subscribers"]} == {
        "local_a", "local_b", "up_reader", "remote_a", "remote_b"
    }  # fmt: skip
    assert all(goal["met"] is True for goal in report["goals"]), report["goals"]  # not "not judged"
