"""Figures with their uncertainty: support, intervals, ratios, runs that disagree."""

from __future__ import annotations

import numpy as np
import pytest

from roboscale.analysis.interactive import downsample
from roboscale.analysis.uncertainty import (
    interval_text,
    min_samples,
    percentile,
    ratio,
    run_warnings,
)

RNG = np.random.default_rng(7)


def test_a_percentile_needs_one_message_beyond_it() -> None:
    assert [min_samples(q) for q in (50, 90, 99, 99.9)] == [2, 10, 100, 1000]
    few = percentile([np.arange(15.0)], 99.0)
    assert few.value is None and few.note == "n = 15 < 100"
    assert interval_text(few) == "- (n = 15 < 100)"


def test_a_single_run_has_an_order_statistic_interval_and_says_so() -> None:
    values = RNG.exponential(100.0, 5000)
    e = percentile([values], 50.0)
    assert e.single_run and e.note == "single run"
    assert e.low is not None and e.high is not None and e.low < e.value < e.high
    assert e.value == pytest.approx(np.median(values))
    # The interval holds the true median (100 ln 2) and is narrow for 5,000 messages.
    assert e.low < 100 * np.log(2) < e.high and e.high - e.low < 10


def test_several_runs_widen_the_interval_by_their_spread() -> None:
    same = [RNG.normal(100, 5, 2000) for _ in range(4)]
    spread = [RNG.normal(m, 5, 2000) for m in (80, 100, 120, 140)]
    tight, wide = percentile(same, 50.0), percentile(spread, 50.0)
    assert tight.runs == wide.runs == 4 and not wide.note
    assert (wide.high - wide.low) > 5 * (tight.high - tight.low)  # type: ignore[operator]


def test_a_ratio_and_its_interval() -> None:
    slow = [RNG.normal(400, 20, 3000)]
    fast = [RNG.normal(200, 10, 3000)]
    r = ratio(slow, fast)
    assert r.value == pytest.approx(2.0, rel=0.02)
    assert r.low is not None and r.high is not None and r.low < 2.0 < r.high
    assert r.high - r.low < 0.1
    assert ratio([np.ones(1)], fast).value is None


def test_outliers_and_drift_between_runs_are_flagged() -> None:
    assert run_warnings([100, 101, 99]) == []
    assert run_warnings([100, 101, 99, 100, 400])[0].startswith("run 5 is an outlier")
    assert "drift" in run_warnings([100, 110, 120, 130])[-1]
    assert run_warnings([100, 200]) == []  # two runs say nothing about a trend


def test_downsampling_keeps_the_extremes() -> None:
    x = np.arange(1_000_000, dtype=float)
    y = RNG.normal(100, 1, x.size)
    y[123_457], y[765_431] = 10_000.0, -50.0
    xs, ys = downsample(x, y, 2000)
    assert xs.size <= 2000 and np.all(np.diff(xs) >= 0)
    assert ys.max() == 10_000.0 and ys.min() == -50.0
    small_x, _ = downsample(x[:10], y[:10], 2000)
    assert small_x.size == 10
