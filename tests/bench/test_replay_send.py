"""Smoke test of bench/replay_send.py with a tiny count: genpy in Debian's Python and
cyclonedds, on the generated Stata scan and image. Nothing here asserts on time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

RunBench = Callable[[str, list[str]], dict[str, Any]]  # tests/bench/conftest.py


@pytest.mark.ros1
@pytest.mark.dds
def test_both_ways_of_sending_are_measured_for_each_message(
    run_bench: RunBench, ros1: None, dds: None
) -> None:
    report = run_bench("replay_send.py", ["--repeats", "5"])
    rows = report["rows"]
    assert {(r["backend"], r["message"]) for r in rows} == {
        (b, m) for b in ("ros1", "dds") for m in ("laserscan", "image")
    }
    for r in rows:
        assert r["bytes"] > 4000
        assert all(r[k] > 0 for k in ("as_recorded_us", "rebuilt_us", "deserialize_us"))
    assert len(report["goals"]) == 4
