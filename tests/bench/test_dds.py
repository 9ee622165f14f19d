"""Smoke test of bench/dds.py with tiny counts (real ddsperf, Cyclone DDS, Zenoh and ROS 1),
and its reading of ddsperf's output. No assertion on timing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import dds  # bench/dds.py, importable through tests/bench/conftest.py

RunBench = Callable[[str, list[str]], dict[str, Any]]  # tests/bench/conftest.py

LINE = "[16019] {t}  vm:2 size 65536 mean 1us min 1us 50% {p50} 90% 1us 99% {p99} max 9ms cnt {n}"
DDSPERF_OUTPUT = "\n".join(
    [
        "[16019] participant vm:16019: new (self)",
        LINE.format(t="1.000", p50="131.8us", p99="715.0us", n=196),
        "[16019] 1.000  rss:9.4MB vcsw:1048 ivcsw:190 ddsperf:1%+1% recvUC:1%+0%",
        LINE.format(t="2.000", p50="124.5us", p99="723.1us", n=198),
        LINE.format(t="3.000", p50="120.0us", p99="1.5ms", n=100),
    ]
)


def test_ddsperf_half_round_trips_are_doubled() -> None:
    point = dds.summarize_ddsperf(DDSPERF_OUTPUT, 65536, 200.0)
    # The first second is dropped; the median of 198 x 124.5 and 100 x 120.0 is 124.5.
    assert point["n"] == 298
    assert point["p50_us"] == pytest.approx(2 * 124.5)
    assert point["p99_us"] == pytest.approx(2 * 1500.0)
    assert len(point["raw_lines"]) == 3


def test_no_latency_line_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="no latency line"):
        dds.summarize_ddsperf("[1] participant vm:1: new (self)\n", 256, 200.0)


def test_rounds_pool_every_round_trip_and_every_ddsperf_second() -> None:
    echo = [
        {"system": "dds", "bytes": 256, "n": 3, "lost": 1, "p50_us": 2.0, "p99_us": 3.0,
         "rtt_us": [1.0, 2.0, 3.0]},
        {"system": "dds", "bytes": 256, "n": 2, "lost": 0, "p50_us": 10.5, "p99_us": 11.0,
         "rtt_us": [10.0, 11.0]},
    ]  # fmt: skip
    row = dds.pooled(echo)
    assert (row["n"], row["lost"], row["p50_us"], row["p99_us"]) == (5, 1, 3.0, 11.0)
    assert row["rounds"] == 2 and row["p50_rounds"] == "2/10"
    first = dds.summarize_ddsperf(DDSPERF_OUTPUT, 65536, 200.0)
    second = dds.summarize_ddsperf(DDSPERF_OUTPUT.replace("124.5us", "300.0us"), 65536, 200.0)
    row = dds.pooled([first, second])
    # 198 x 249 and 100 x 240 (the first round), 198 x 600 and 100 x 240: the median of 596
    assert row["n"] == 596 and row["p50_us"] == pytest.approx(249.0)
    assert len(row["raw_lines"]) == 6 and row["round_p50s_us"] == [249.0, 600.0]


def test_the_goal_is_judged_pooled_and_shown_round_by_round() -> None:
    def row(system: str, size: int, p50: float, rounds: list[float]) -> dict[str, Any]:
        n = 450 * len(rounds)
        return {"system": system, "bytes": size, "p50_us": p50, "round_p50s_us": rounds, "n": n}

    rows = [
        row("ddsperf", 256, 30.0, [30.0]),
        row("dds", 256, 90.0, [90.0]),  # below 64 KB: no goal
        row("ddsperf", 65536, 100.0, [100.0, 80.0, 120.0, 100.0]),
        row("dds", 65536, 140.0, [160.0, 110.0, 140.0, 150.04]),
        row("dds", 262144, 700.0, [700.0]),  # no ddsperf: no measured ratio
    ]
    at_64kb, at_256kb = dds.goals(rows, [256, 65536, 262144])
    # Pooled 1.4, but rounds from 1.17 to 1.60 straddle the target: too little to decide.
    assert at_64kb["measured"] == pytest.approx(1.4) and at_64kb["met"] == "not judged"
    assert at_64kb["interval_text"].startswith("[1.") and 1.0 < at_64kb["interval"][0] < 1.5
    # 1.5004 is not met: it must not print as 1.50
    assert at_64kb["by_round"] == "1.60/1.38/1.17/1.5004 (range 1.17-1.60, 2 of 4 met)"
    assert at_256kb["measured"] is None and at_256kb["met"] is False
    assert at_256kb["by_round"] == "-"


@pytest.mark.dds
@pytest.mark.zenoh
@pytest.mark.ros1
@pytest.mark.usefixtures("dds", "zenoh", "ros1")  # the fixture dds, not this module
def test_quick_run_compares_every_system(run_bench: RunBench) -> None:
    report = run_bench("dds.py", ["--quick"])
    assert report["missing"] == {}
    systems = {(r["system"], r["bytes"]) for r in report["rows"]}
    for size in dds.QUICK_SIZES:
        for system in ("ddsperf", "ddsperf-waitset", "dds", "zenoh", "ros1"):
            assert (system, size) in systems
    assert all(r["p50_us"] > 0 and r["vs_ddsperf"] > 0 for r in report["rows"])
    assert [g["goal"] for g in report["goals"]] == ["dds p50 / ddsperf p50, 64KB"]
    assert report["goals"][0]["by_round"].endswith(" of 1 met)")  # --quick: one round
    assert report["goals"][0]["met"] == "not judged"  # and one round decides nothing
    assert {s["bytes"] for s in report["serializer"]} == {256, 65536, 1 << 20, 4 << 20}
