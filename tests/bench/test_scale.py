"""Smoke tests of bench/scale.py with tiny counts: real runtimes and peers, no timing asserted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import scale  # bench/scale.py, importable through tests/bench/conftest.py

RunBench = Callable[[str, list[str]], dict[str, Any]]  # tests/bench/conftest.py


@pytest.mark.slow
def test_idle_nodes_are_measured_in_a_fresh_process() -> None:
    result = scale.idle_nodes(200)
    assert result["nodes"] == 200
    assert result["rss_bytes_per_node"] > 0 and result["heap_bytes_per_node"] > 0


@pytest.mark.slow
def test_one_hertz_publishers_deliver_every_message() -> None:
    result = scale.publishers(20, 1.5)
    assert result["published"] >= 20  # every node ticked at least once
    assert len(result["latency"]) == result["published"]


@pytest.mark.slow
@pytest.mark.zenoh
@pytest.mark.parametrize(
    "pair",
    [
        scale.zenoh_pair,
        lambda n: scale.zenoh_pair(n, "-loop"),
        scale.runtime_pair,
        lambda n: scale.runtime_pair(n, "python"),
    ],
    ids=["zenoh", "zenoh-loop", "runtime", "runtime-python-link"],
)
def test_zenoh_echo_pairs_return_one_sample_per_ping(
    pair: Callable[[int], scale.EchoRun], zenoh: None
) -> None:
    assert_one_sample_per_ping(pair(5), 5)


@pytest.mark.slow
@pytest.mark.zenoh
def test_the_lowlatency_echo_pair_measures_the_sizes_up_to_its_cap_only(zenoh: None) -> None:
    from tests.conftest import require
    from tests.runtime.conftest import NOT_BUILT

    from roboscale.runtime.zenoh_config import LOWLATENCY_MAX_PAYLOAD
    from roboscale.runtime.zlink import native_module

    require(native_module() is not None, NOT_BUILT)
    samples = scale.lowlatency_pair(5).rtt_us
    assert sorted(samples) == [s for s in scale.SIZES if s <= LOWLATENCY_MAX_PAYLOAD] == [11, 4250]
    assert all(len(v) == 5 and min(v) > 0 for v in samples.values())


@pytest.mark.slow
@pytest.mark.zenoh
def test_rust_zenoh_echo_pair_returns_one_sample_per_ping(rust_baseline: Path) -> None:
    assert_one_sample_per_ping(scale.zenoh_rs_pair(5, rust_baseline), 5)


@pytest.mark.slow
@pytest.mark.zenoh
def test_native_binding_echo_pair_returns_one_sample_per_ping(rust_baseline: Path) -> None:
    assert_one_sample_per_ping(scale.zenoh_native_pair(5), 5)


@pytest.mark.slow
@pytest.mark.ros1
def test_rospy_echo_pair_returns_one_sample_per_ping(ros1: None) -> None:
    assert_one_sample_per_ping(scale.rospy_pair(5), 5)


def assert_one_sample_per_ping(run: scale.EchoRun, pings: int) -> None:
    samples = run.rtt_us
    assert sorted(samples) == scale.SIZES
    assert all(len(v) == pings and min(v) > 0 for v in samples.values())
    # Every round trip wakes each process at least once: the counts are real.
    assert run.per_round_trip()["cs_echo_per_rt"] >= 1


@pytest.mark.slow
@pytest.mark.zenoh
@pytest.mark.ros1
def test_the_whole_benchmark_writes_json(
    run_bench: RunBench, zenoh: None, ros1: None, rust_baseline: Path
) -> None:
    tiny = ["--idle-nodes", "100", "--publishers", "10", "--publish-s", "1", "--echoes", "5"]
    report = run_bench("scale.py", tiny)
    assert report["results"]["not_available"] == {}
    systems = {row["system"] for row in report["results"]["echo"]}
    assert len(systems) == 9
    floors = report["results"]["floor_over_rospy"]
    assert set(floors) == {scale.FLOOR, scale.NATIVE_FLOOR, scale.RUST}
    assert all(set(ratios) == {str(s) for s in scale.SIZES} for ratios in floors.values())


@pytest.mark.slow
@pytest.mark.zenoh
@pytest.mark.ros1
def test_rounds_mode_interleaves_the_close_goals_and_gives_each_rounds_ratio(
    run_bench: RunBench, zenoh: None, ros1: None
) -> None:
    from tests.conftest import require
    from tests.runtime.conftest import NOT_BUILT

    from roboscale.runtime.zlink import native_module

    require(native_module() is not None, NOT_BUILT)
    report = run_bench("scale.py", ["--rounds", "2", "--echoes", "5"])
    assert report["results"]["not_available"] == {}
    assert [g["goal"].split("rospy p50, ")[1] for g in report["goals"]] == [
        *(f"{size} B (2 rounds)" for size in scale.RATIO_GOALS),
        "11 B, lowlatency transport (2 rounds)",
        "4250 B, lowlatency transport (2 rounds)",
    ]
    assert all("of 2 met" in g["by_round"] for g in report["goals"])
    assert all(len(runs) == 2 for runs in report["raw"].values())
