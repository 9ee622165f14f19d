"""Smoke test of bench/native_hops.py with a tiny count: real runtimes over the bridge's
native path, stamped in both processes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from tests.conftest import require

import native_hops  # bench/native_hops.py, importable through tests/bench/conftest.py
from roboscale.runtime.zlink import native_module

RunBench = Callable[[str, list[str]], dict[str, Any]]  # tests/bench/conftest.py
NOT_BUILT = "the bridge's native path (_zbridge) was not built: run 'make native'"


@pytest.mark.slow
@pytest.mark.zenoh
def test_every_stage_of_a_round_trip_is_matched_across_the_two_processes(
    run_bench: RunBench, zenoh: None
) -> None:
    require(native_module() is not None, NOT_BUILT)
    report = run_bench("native_hops.py", ["--echoes", "20", "--sizes", "11,4250"])
    per_size = report["raw"]["per_size"]
    assert set(per_size) == {"11", "4250"}
    for got in per_size.values():
        assert got["n"] == 20  # every timed round trip found on both sides
        assert set(got["median_us"]) == set(native_hops.STAGES)
        # stamps of one clock, in the order the message went: none before the last
        inside = [s for s in native_hops.STAGES if not s.startswith("wire")]
        assert all(got["median_us"][s] > 0 for s in inside)
    for side in ("echo", "ping"):
        assert any(n > 0 for n in report["raw"]["switches_per_message"][side].values())
