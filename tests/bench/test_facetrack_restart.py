"""bench/facetrack_restart.py end to end on real ROS 1 and Erlang: tiny counts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

RunBench = Callable[[str, list[str]], dict[str, Any]]


@pytest.mark.slow
@pytest.mark.ros1
@pytest.mark.erlang
def test_every_kill_is_timed_started_then_ready(
    run_bench: RunBench, ros1: None, erlang: None
) -> None:
    report = run_bench("facetrack_restart.py", ["--kills", "2", "--workers", "2"])
    assert report["not_available"] == {}
    rows = {(r["stack"], r["method"]): r for r in report["results"]}
    assert set(rows) == {(s, m) for s in ("ros1", "erlang") for m in ("sigterm", "sigkill")}
    for row in rows.values():
        assert row["kills"] == 2
        assert 0 < row["started_p50_ms"] <= row["ready_p50_ms"]
    assert [g["measured"] != "-" for g in report["goals"]] == [True, True]
