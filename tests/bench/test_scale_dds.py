"""bench/scale_dds.py (bench/scale.py --against-dds): its options, the demo's trials it
runs, and its goal lines on synthetic rounds (no timing)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import scale_dds  # bench/scale_dds.py, importable through tests/bench/conftest.py
from roboscale.runtime.zenoh_config import LOWLATENCY_MAX_PAYLOAD

RunBench = Callable[[str, list[str]], dict[str, Any]]  # tests/bench/conftest.py
DEMO_SIZES = [11, 4250, 307_200]  # experiments/demo.yaml: text, laserscan, image


def around(centre: float, n: int, seed: int) -> list[float]:
    """n samples evenly within ±5 % of centre, in an order of their own: median centre."""
    values = centre * (1 + np.linspace(-0.05, 0.05, n))
    return [float(v) for v in np.random.default_rng(seed).permutation(values)]


def test_defaults_are_three_rounds_of_the_demos_sizes() -> None:
    args, counts = scale_dds.parse([])
    assert args.rounds == 3 and args.sizes == DEMO_SIZES
    assert counts == scale_dds.FULL


def test_quick_is_one_round_and_counts_may_be_given() -> None:
    args, counts = scale_dds.parse(["--quick", "--messages-10hz", "7", "--sizes", "11"])
    assert args.rounds == 1 and args.sizes == [11]
    assert counts == {**scale_dds.QUICK, "messages_10hz": 7}
    assert scale_dds.count_option(10.0, counts) == 7
    assert scale_dds.count_option(1000.0, counts) == scale_dds.QUICK["messages_1khz"]


@pytest.mark.parametrize(
    "argv", [["--sizes", "12"], ["--sizes", "11,x"], ["--rounds", "0"], ["--messages-1khz", "-1"]]
)
def test_bad_options_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        scale_dds.parse(argv)
    assert exit_.value.code == 2
    assert "error:" in capsys.readouterr().err


def test_the_trials_are_the_demos_at_10_hz_and_1_khz() -> None:
    trials = scale_dds.demo_trials()
    assert sorted(trials) == [(r, s) for r in (10.0, 1000.0) for s in DEMO_SIZES]
    dds = trials[(10.0, 11)]
    assert (dds.backend, dds.payload, dds.warmup, dds.pairs) == ("dds", "text", 20, 1)
    proc = scale_dds.lab_trial(dds, scale_dds.LOWLAT, 60)
    assert (proc.backend, proc.messages, proc.payload_bytes) == ("native-proc", 60, 11)
    assert "native-proc-lowlatency" in proc.trial and "dds" not in proc.trial
    assert scale_dds.lab_trial(dds, scale_dds.DDS, 60).trial == dds.trial


def test_lowlatency_runs_only_the_sizes_under_its_cap() -> None:
    assert [s for s in DEMO_SIZES if scale_dds.carries(scale_dds.LOWLAT, s)] == [11, 4250]
    assert not scale_dds.carries(scale_dds.LOWLAT, LOWLATENCY_MAX_PAYLOAD)  # + its header
    assert all(scale_dds.carries(scale_dds.PROC, s) for s in DEMO_SIZES)


def measured(p50s: dict[str, list[float | None]], n: int = 60) -> scale_dds.Measured:
    """Every system at (10 Hz, 11 B), a round per p50 given (None: the round failed)."""
    samples: dict[str, scale_dds.Samples] = {s: {} for s in scale_dds.SYSTEMS}
    for system, rounds in p50s.items():
        samples[system][(10.0, 11)] = [
            None if p is None else around(p, n, seed) for seed, p in enumerate(rounds)
        ]
    return scale_dds.Measured(samples, {10.0: n}, {s: {} for s in scale_dds.FLOORS})


def test_goals_pair_the_rounds_both_finished_and_judge_over_them() -> None:
    got = measured(
        {
            scale_dds.DDS: [100, 100, 100, 100],
            scale_dds.PROC: [300, 320, None, 310],  # a failed round is left out
            scale_dds.LOWLAT: [95, 105, 100, 100],  # around dds's: not decided
        }
    )
    proc, lowlat = scale_dds.goal_lines(got)
    assert proc["goal"] == "native-proc p50 / dds p50, 10 Hz, 11 B (3 rounds)"
    assert proc["met"] is False and proc["sample"] == "n = 180 / 180, 3 rounds"
    assert proc["by_round"] == "3.00/3.20/3.10 (range 3.00-3.20, 0 of 3 met)"
    assert lowlat["goal"].startswith("native-proc (lowlatency) p50 / dds p50, 10 Hz")
    assert lowlat["met"] == "not judged"


def test_floors_below_dds_pass_and_the_headline_counts_them() -> None:
    got = measured(
        {
            scale_dds.DDS: [100, 100, 100],
            scale_dds.PROC: [150, 150, 150],
            scale_dds.RUST: [60, 62, 61],
            scale_dds.ZMIN: [None, None, None],
        }
    )
    rust, zmin = scale_dds.floor_lines(got)
    assert rust["goal"] == "zenoh (Rust) p50 / dds p50, 10 Hz, 11 B (3 rounds)"
    assert rust["met"] is True
    assert zmin["met"] is False and zmin["why"] == "not measured"  # no round finished
    headline = scale_dds.headline(scale_dds.goal_lines(got), [rust, zmin])
    assert headline == (
        "native-proc <= dds: 0 met, 1 missed, 0 not judged; "
        "raw Zenoh in Rust <= dds: 1 met, 0 missed, 0 not judged"
    )


def test_one_round_of_a_slow_rate_is_too_short_to_judge() -> None:
    got = measured({scale_dds.DDS: [100], scale_dds.PROC: [300]}, n=60)
    (proc,) = scale_dds.goal_lines(got)
    assert proc["met"] == "not judged" and proc["why"].startswith("too short: n = 60 < 100")
    assert proc["goal"].endswith("(one round)")


def test_rows_pool_the_rounds_and_withhold_percentiles_the_sample_does_not_support() -> None:
    got = measured({scale_dds.DDS: [100, None, 120]}, n=30)
    got.kept_hz[scale_dds.RUST][(10.0, 11)] = [9.9, None]
    got.sent[10.0] = 40  # 30 of 40 came back in each round
    (row,) = scale_dds.rows(got)
    assert (row["n"], row["rounds"], row["sent_per_round"]) == (60, 2, 40)
    assert row["back"] == "60 of 80"
    assert row["round_p50s_us"] == "100/-/120"
    assert row["p90_us"] is not None and row["p99_us"] is None  # n = 60 < 100
    assert row["kept_hz"] is None  # a lab trial paces itself: no kept rate


@pytest.mark.slow
@pytest.mark.zenoh
@pytest.mark.dds
def test_scale_against_dds_runs_every_system_at_both_rates(
    run_bench: RunBench, zenoh: None, dds: None, rust_baseline: Path
) -> None:
    """A tiny real run through bench/scale.py: every system's trial or ping at 10 Hz and
    1 kHz, a goal line per rate for native-proc and lowlatency, a floor line per floor."""
    tiny = ["--messages-10hz", "3", "--messages-1khz", "30", "--sizes", "11"]
    report = run_bench("scale.py", ["--against-dds", "--quick", *tiny])
    assert report["results"]["not_available"] == {}
    rows = report["results"]["echo"]
    assert {(r["system"], r["rate_hz"]) for r in rows} == {
        (s, rate) for s in scale_dds.SYSTEMS for rate in scale_dds.RATES
    }
    assert all(0 < r["n"] <= r["sent_per_round"] * r["rounds"] for r in rows)
    assert len(report["goals"]) == 4 and len(report["results"]["floors"]) == 4
    assert set(report["load_average"]) == {"start", "end", "by_round"}


def test_a_side_that_lost_messages_is_named_beside_its_goal() -> None:
    got = measured({scale_dds.DDS: [100, 100, 100], scale_dds.PROC: [90, 90, 90]})
    got.samples[scale_dds.DDS][(10.0, 11)][1] = around(100, 20, 7)  # 40 of 60 lost
    (proc,) = scale_dds.goal_lines(got)
    assert proc["why"] == "dds: 140 of 180 back"
