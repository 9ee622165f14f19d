"""--rounds N of bench/restart.py and bench/scale.py: goals judged over rounds, with each
round's figure and their range, on synthetic rounds (no timing)."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

import restart_rounds  # bench/*.py, importable through tests/bench/conftest.py
import scale
import scale_rounds
from roboscale.errors import UserError


def around(centre: float, n: int, seed: int) -> list[float]:
    """n samples evenly within ±5 % of centre, in an order of their own: median centre."""
    values = centre * (1 + np.linspace(-0.05, 0.05, n))
    return list(np.random.default_rng(seed).permutation(values))


def test_restart_rounds_judge_over_rounds_and_give_each_rounds_figure() -> None:
    runs: dict[str, list[list[float] | None]] = {
        restart_rounds.INPROC: [around(5.0, 200, r) for r in range(4)],
        restart_rounds.STANDBY: [around(p50, 40, r) for r, p50 in enumerate((900, 950, 980))]
        + [None],  # a round that failed is left out
        restart_rounds.OTP: [around(40.0, 200, 10 + r) for r in range(4)],
    }
    ratio, standby = restart_rounds.goals(runs)
    assert ratio["met"] is True and ratio["sample"] == "n = 800 / 800, 4 rounds"
    assert ratio["by_round"] == "0.12/0.12/0.12/0.12 (range 0.12-0.12, 4 of 4 met)"
    assert standby["met"] is True and standby["sample"] == "n = 120, 3 rounds"
    assert standby["by_round"] == "900/950/980 (range 900-980, 3 of 3 met)"
    assert standby["interval"][1] < restart_rounds.PROCESS_GOAL_US


def test_scale_rounds_pair_the_rounds_both_systems_finished() -> None:
    def run(p50: float, seed: int) -> scale.EchoRun:
        return scale.EchoRun({s: around(p50, 50, seed) for s in scale.SIZES}, 0, 0)

    runs: dict[str, list[scale.EchoRun | None]] = {
        scale.BRIDGE: [run(p50, r) for r, p50 in enumerate((90, 110, 100))],
        scale.PY_LINK: [None, None, None],
        scale.ROSPY: [run(100, 10 + r) for r in range(3)],
    }
    lines = scale_rounds.goals(runs)
    sizes = list(scale.RATIO_GOALS)
    assert [g["goal"].split(", ")[1] for g in lines] == [f"{s} B (3 rounds)" for s in sizes]
    at_most_1 = [g for g, s in zip(lines, sizes, strict=True) if scale.RATIO_GOALS[s] == 1]
    # Rounds 0.9x to 1.1x: the interval holds 1, nothing decided.
    assert all(g["met"] == "not judged" for g in at_most_1), lines
    assert all(g["by_round"].endswith("(range 0.90-1.10, 2 of 3 met)") for g in at_most_1)
    # The 4 MiB goal (at most 0.2x) is missed by every round.
    assert lines[-1]["met"] is False and lines[-1]["by_round"].endswith("0 of 3 met)")
    assert all(g["sample"] == "n = 150 / 150, 3 rounds" for g in lines)


def test_scale_rounds_add_a_baseline_checkout_after_this_one_and_the_floors_last(
    tmp_path: Path,
) -> None:
    names = [name for name, _ in scale_rounds.systems(str(tmp_path), tmp_path / "echo-rs")]
    assert names == [
        scale.BRIDGE,
        scale_rounds.baseline_name(str(tmp_path)),
        scale.PY_LINK,
        scale.LOWLAT,
        scale.ROSPY,
        scale.NATIVE_FLOOR,
        scale.RUST,
    ]
    assert [name for name, _ in scale_rounds.systems(None)] == [
        scale.BRIDGE,
        scale.PY_LINK,
        scale.LOWLAT,
        scale.ROSPY,
    ]


def test_a_baseline_checkout_without_the_runtime_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no roboscale/runtime"):
        scale.runtime_pair(1, "python", src=str(tmp_path))


def test_goals_of_sizes_not_measured_are_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scale, "SIZES", [11, 4250])

    def run(seed: int) -> scale.EchoRun:
        return scale.EchoRun({s: around(100, 50, seed) for s in scale.SIZES}, 0, 0)

    runs: dict[str, list[scale.EchoRun | None]] = {
        scale.BRIDGE: [run(1)],
        scale.PY_LINK: [None],
        scale.ROSPY: [run(2)],
    }
    lines = scale_rounds.goals(runs)
    assert [g["goal"].split(", ")[1] for g in lines] == ["11 B (1 rounds)", "4250 B (1 rounds)"]


def test_the_lowlatency_transport_is_judged_at_its_sizes_beside_the_default() -> None:
    def run(p50: float, seed: int) -> scale.EchoRun:
        return scale.EchoRun({s: around(p50, 50, seed) for s in scale.SIZES}, 0, 0)

    def lowlatency(seed: int) -> scale.EchoRun:  # no row above its cap
        return scale.EchoRun({s: around(50, 50, seed) for s in (11, 4250)}, 0, 0)

    runs: dict[str, list[scale.EchoRun | None]] = {
        scale.BRIDGE: [run(200, r) for r in range(3)],
        scale.LOWLAT: [lowlatency(3 + r) for r in range(3)],
        scale.ROSPY: [run(100, 6 + r) for r in range(3)],
    }
    lines = scale_rounds.goals(runs)
    names = [g["goal"].split("rospy p50, ")[1] for g in lines]
    assert names == [
        *(f"{s} B (3 rounds)" for s in scale.RATIO_GOALS),  # the default's, every size
        "11 B, lowlatency transport (3 rounds)",  # 307 KB and 4 MiB: over its cap
        "4250 B, lowlatency transport (3 rounds)",
    ]
    assert [g["met"] for g in lines[-2:]] == [True, True]  # 0.5x rospy in every sample
    assert all(g["met"] is False for g in lines[:2])  # 2x


def test_sizes_are_payload_sizes_in_bytes() -> None:
    assert scale.sizes_option("11,4250") == [11, 4250]
    for bad in ("", "11,x", "0", "-5"):
        with pytest.raises(argparse.ArgumentTypeError, match="payload sizes in bytes"):
            scale.sizes_option(bad)


def test_cpu_and_switches_are_per_round_trip_timed() -> None:
    run = scale.EchoRun({11: [1.0] * 100, 4250: [1.0] * 100}, 600, 1200, 0.02, 0.04)
    assert run.per_round_trip() == {
        "cs_echo_per_rt": 3.0,
        "cs_ping_per_rt": 6.0,
        "cpu_echo_us_per_rt": 100.0,
        "cpu_ping_us_per_rt": 200.0,
    }
