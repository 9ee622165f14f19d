"""bench/goals.py: one judge for every benchmark goal, on synthetic figures (no timing)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pytest

import common  # bench/common.py, importable through tests/bench/conftest.py
import goals

AT_MOST_1 = goals.at_most(1)


def around(centre: float, n: int, spread: float = 0.05, seed: int = 0) -> list[float]:
    """n samples within ±spread of centre (relative), evenly spread."""
    rng = np.random.default_rng(seed)
    return list(centre * (1 + rng.uniform(-spread, spread, n)))


def test_a_ratio_whose_whole_interval_meets_the_target_passes() -> None:
    g = goals.latency_ratio("a / b", around(80.0, 500), around(100.0, 500, seed=1), AT_MOST_1)
    assert g["met"] is True and g["why"] == ""
    low, high = g["interval"]
    assert low <= g["measured"] <= high < 1
    assert g["sample"] == "n = 500 / 500, one run"
    assert g["target"] == "<= 1" and g["interval_text"].startswith("[0.")


def test_a_ratio_whose_whole_interval_misses_the_target_fails() -> None:
    g = goals.latency_ratio("a / b", around(130.0, 500), around(100.0, 500, seed=1), AT_MOST_1)
    assert g["met"] is False and 1 < g["interval"][0] <= g["measured"] <= g["interval"][1]


def test_a_ratio_whose_interval_straddles_the_target_is_not_judged() -> None:
    same = around(100.0, 500, 0.5)  # both sides alike: a ratio of 1, either way
    g = goals.latency_ratio("a / b", same, same, AT_MOST_1)
    low, high = g["interval"]
    assert low < 1 < high
    assert g["met"] == "not judged" and g["why"] == "the interval straddles the target"


def test_a_short_run_is_not_judged_however_far_its_figure_is() -> None:
    """bench/dds.py --quick: one round of 60 messages at 1.98x decided nothing (three
    full rounds gave 1.27-1.37x)."""
    g = goals.latency_ratio(
        "dds / ddsperf", around(198.0, 60), around(100.0, 60), goals.at_most(1.5)
    )
    assert g["met"] == "not judged" and g["why"] == "too short: n = 60 < 100 a side in one run"
    assert g["measured"] == pytest.approx(1.98, rel=0.05)  # the figure is still given


def test_several_runs_are_judged_over_runs_with_fewer_samples() -> None:
    ours = [around(80.0, 30, seed=s) for s in range(3)]
    theirs = [around(100.0, 30, seed=10 + s) for s in range(3)]
    g = goals.latency_ratio("a / b", ours, theirs, AT_MOST_1)
    assert g["met"] is True and g["sample"] == "n = 90 / 90, 3 runs"
    # Two runs resampled give intervals too narrow: judged as one run would be.
    g = goals.latency_ratio("a / b", ours[:2], theirs[:2], AT_MOST_1)
    assert (g["met"], g["why"]) == ("not judged", "too short: n = 60 < 100 a side in two runs")
    # Runs that disagree widen the interval until it decides nothing.
    drifting = [around(m, 30, seed=s) for s, m in enumerate((60.0, 100.0, 140.0))]
    g = goals.latency_ratio("a / b", drifting, theirs, AT_MOST_1)
    assert g["met"] == "not judged"


def test_a_percentile_against_an_absolute_target() -> None:
    target = goals.at_most(1000, "<= 1,000")
    assert goals.latency("p50 (µs)", around(500.0, 200), target)["met"] is True
    assert goals.latency("p50 (µs)", around(5000.0, 200), target)["met"] is False
    assert goals.latency("p50 (µs)", around(5000.0, 30), target)["met"] == "not judged"


def test_rounds_of_figures_are_judged_by_the_bootstrap_of_their_ratios() -> None:
    at_most = goals.at_most(1.5)
    n = (1350, 1350)
    assert goals.from_rounds("r", 1.3, [1.27, 1.30, 1.37], at_most, n)["met"] is True
    assert goals.from_rounds("r", 1.9, [1.8, 1.9, 2.0], at_most, n)["met"] is False
    assert goals.from_rounds("r", 1.45, [1.2, 1.45, 1.7], at_most, n)["met"] == "not judged"
    one = goals.from_rounds("r", 1.98, [1.98], at_most, (60, 60))
    assert (one["met"], one["why"]) == ("not judged", "one round: spread unknown")
    assert goals.from_rounds("r", None, [], at_most, (0, 0))["met"] is False


def test_counts_and_single_measurements_say_what_they_stand_on() -> None:
    lost = goals.exact("lost, duplicated", "0, 0", "0, 0", True, "200 kills")
    assert lost["met"] is True and lost["sample"] == "200 kills (exact counts)"
    memory = goals.single("bytes per node", 2644.0, goals.at_most(20_000), "10,000 nodes")
    assert memory["met"] is True and memory["interval"] is None
    assert "one measurement: no interval" in memory["sample"]
    gone = goals.single("bytes per node", None, goals.at_most(20_000), "10,000 nodes")
    assert gone["met"] is False and gone["why"] == "not measured"


def test_a_figure_prints_on_its_side_of_the_target() -> None:
    at_most = goals.at_most(1.5)
    assert goals.shown(1.4951, at_most) == "1.50"  # met, and 1.50 is met too
    assert goals.shown(1.5004, at_most) == "1.5004"
    band = goals.Target("", lambda r: 0.5 <= r <= 2.0)
    assert goals.shown(0.4996, band) == "0.4996" and goals.shown(1.234, band) == "1.23"
    assert goals.shown(1000.4, goals.at_most(1000)) == "1000.4"
    assert goals.shown(0.00504885, goals.at_most(1)) == "0.005"
    assert goals.round_range([1.6, 1.38, 1.5004], at_most) == (
        "1.60/1.38/1.5004 (range 1.38-1.60, 1 of 3 met)"
    )


def test_a_goal_not_judged_neither_passes_nor_fails_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    line = goals.latency_ratio("dds / ddsperf", around(198.0, 60), around(100.0, 60), AT_MOST_1)
    common.finish({}, [line], argparse.Namespace(json=out, check=True))  # no exit 1
    printed = capsys.readouterr().out
    assert "not judged" in printed and "PASS" not in printed and "FAIL" not in printed
    written = json.loads(out.read_text())["goals"][0]
    assert written["met"] == "not judged" and len(written["interval"]) == 2
    failed = goals.not_measured("ratio", AT_MOST_1)
    with pytest.raises(SystemExit):
        common.finish({}, [failed], argparse.Namespace(json=None, check=True))
