"""bench/stalls.py: stalls are grouped into runs, laid to whoever held the CPUs, and the
scheduler's timeline is read as perf prints it."""

from __future__ import annotations

import numpy as np

import stalls  # bench/stalls.py, importable through tests/bench/conftest.py


def test_consecutive_stalled_round_trips_make_one_run() -> None:
    rtt_ms = np.array([0.3, 2.5, 4.0, 0.3, 0.3, 9.0, 0.2, 2.1])
    assert stalls.stall_runs(rtt_ms, 2.0) == [(1, 2), (5, 5), (7, 7)]


def test_a_stall_is_laid_to_the_largest_holder_beside_the_agents() -> None:
    stalls.CONTROLLER["pid"] = 42
    assert stalls.culprit({"agent": 3.0, "<idle>": 2.0, "mypy": 2.5, "kdamond.0": 1.0}) == (
        "other processes"
    )
    assert stalls.culprit({"kdamond.0": 1.9, "kworker/0:1-eve": 0.3, "agent": 1.0}) == "kdamond"
    assert stalls.culprit({"ksoftirqd/1": 0.4, "rcu_preempt": 0.3}) == "other kernel threads"
    assert stalls.culprit({"roboscale[42]": 2.0, "perf": 0.5}) == "this run's controller"
    assert stalls.culprit({"roboscale[43]": 2.0}) == "other processes"  # another lab's
    assert stalls.culprit({"agent": 4.0, "<idle>": 3.0, "perf": 0.2}) == "none"


def test_timeline_rows_name_the_process_not_the_thread() -> None:
    agents = {1200}
    assert stalls.owner("python3[1201/1200]", agents) == "agent"
    assert stalls.owner("tx-0[1205/1200]", agents) == "agent"
    assert stalls.owner("python3[77/70]", agents) == "python3[70]"
    assert stalls.owner("kdamond.0[77]", agents) == "kdamond.0"
    m = stalls.LINE.match(" 38276.436035 [0001]  tx-0[1205/1200]   0.120   0.015   0.450 ")
    assert m is not None and (m[2], m[3], m[6]) == ("0001", "tx-0[1205/1200]", "0.450")
