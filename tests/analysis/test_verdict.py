"""The sustained verdict, rule by rule, and on synthetic traces: a steady stream, a
growing queue, a burst that drains, and a standing queue that drained by the end."""

from __future__ import annotations

import math

import numpy as np
import pytest

from roboscale.analysis.verdict import (
    Thresholds,
    Trace,
    Verdict,
    judge,
    period_of,
    share_low,
)
from roboscale.errors import UserError

TH = Thresholds()
RATE_HZ = 1000.0
N = 2000  # two seconds at 1 kHz


def trace(latency_us: np.ndarray, lag_us: np.ndarray | None = None, rt: bool = True) -> Trace:
    sent = np.arange(latency_us.size, dtype=np.float64) * (1e9 / RATE_HZ)
    lag = np.full(latency_us.size, 20.0) if lag_us is None else lag_us
    return Trace(sent, latency_us.astype(np.float64), lag, 1.0 / RATE_HZ, round_trip=rt)


def steady(seed: int = 1) -> np.ndarray:
    """A fast path: 150 µs round trips with gamma jitter and a few 1 ms stalls."""
    rng = np.random.default_rng(seed)
    lat = 150.0 + rng.gamma(2.0, 15.0, N)
    lat[rng.choice(N, 5, replace=False)] = 1_000.0
    return lat


def rule(v: Verdict, name: str) -> bool:
    return next(r for r in v.rules if r.rule == name).ok


def test_a_steady_stream_is_sustained() -> None:
    v = judge(TH, trace(steady()), 1.0, 0.0)
    assert v.sustained, v.reasons()
    assert v.trend is not None and abs(v.trend["slope_us_per_s"]) < 20
    assert v.not_judged() == []


def test_a_growing_queue_fails_growth_with_its_figure() -> None:
    lat = steady() + np.linspace(0, 900.0, N)  # a queue adding 0.9 ms over 2 s
    v = judge(TH, trace(lat), 1.0, 0.0)
    assert not v.sustained and not rule(v, "growth")
    assert rule(v, "too_late")  # every message still within the period
    (figure,) = [r.figure for r in v.failed() if r.rule == "growth"]
    assert figure.startswith("latency trend adds ") and "over 2 s" in figure


def test_a_short_burst_that_drains_is_sustained() -> None:
    lat = steady()
    lat[1000:1010] += np.linspace(3_000.0, 0, 10)  # 10 ms stall, drained in ten messages
    v = judge(TH, trace(lat), 1.0, 0.0)
    assert v.sustained, v.reasons()


def test_a_queue_that_climbed_then_drained_is_not_sustained() -> None:
    """The demo's native-proc 1 kHz image trial: a queue climbing to 140 ms and draining
    by the end. The quarters' medians and the whole-trial trend can both look flat; the
    too-late count does not."""
    lat = steady()
    lat[400:1400] += np.concatenate([np.linspace(0, 140_000, 700), np.linspace(140_000, 0, 300)])
    v = judge(TH, trace(lat), 1.0, 0.0)
    assert not v.sustained
    assert not rule(v, "too_late") and not rule(v, "late")
    assert any("too late (> 2 ms" in r for r in v.reasons())


def test_late_and_too_late_bounds_follow_ros2_performance() -> None:
    # One-way at 100 Hz: late beyond min(0.2 x 10 ms, 5 ms), too late beyond min(10, 50) ms.
    assert TH.bounds_us(0.01, round_trip=False) == (2_000.0, 10_000.0)
    # At 1 Hz the caps hold: 5 ms and 50 ms; a round trip gets twice that.
    assert TH.bounds_us(1.0, round_trip=False) == (5_000.0, 50_000.0)
    assert TH.bounds_us(1.0, round_trip=True) == (10_000.0, 100_000.0)


def test_late_share_is_a_rule_of_its_own() -> None:
    lat = steady()
    lat[::5] = 500.0  # one in five round trips beyond 400 µs (late), none beyond 2 ms
    v = judge(TH, trace(lat), 1.0, 0.0)
    assert [r.rule for r in v.failed()] == ["late"]
    (reason,) = v.reasons()  # the fifth, plus the steady trace's few 1 ms stalls
    assert reason.startswith("20.") and "% of round trips late (> 400 µs; at most 10%" in reason


def test_a_lagging_sender_fails_send_lag() -> None:
    lag = np.full(N, 20.0)
    lag[:100] = 1_500.0  # 5 % of sends more than a period behind
    v = judge(TH, trace(steady(), lag), 1.0, 0.0)
    assert [r.rule for r in v.failed()] == ["send_lag"]
    assert v.reasons()[0].startswith("5.0% of sends late (more than 1 ms behind their deadline")


def test_a_share_is_judged_by_its_lower_bound() -> None:
    """2 late round trips of 15 (13 %) do not show that more than 10 % would be late;
    200 of 1,500 do."""
    assert share_low(2, 15) < 0.10 < share_low(200, 1500) < 200 / 1500
    few = np.full(15, 100.0)
    few[:2] = 50_000.0  # beyond the 10 ms late bound of a 10 Hz round trip
    t = Trace(np.arange(15) * 1e8, few, np.zeros(15), 0.1, round_trip=True)
    assert rule(judge(TH, t, 1.0, 0.0), "late")


def test_rate_and_loss_boundaries_are_inclusive() -> None:
    t = trace(steady())
    assert judge(TH, t, 0.95, 0.01).sustained
    assert [r.rule for r in judge(TH, t, 0.949, 0.0).failed()] == ["rate"]
    assert judge(TH, t, 1.0, 0.0101).reasons() == ["lost 1.01% of messages (at most 1.0%)"]


def test_a_sender_ahead_or_unmeasured_counts_as_on_target() -> None:
    t = trace(steady())
    assert judge(TH, t, 1.3, 0.0).rate_ratio == 1.0
    assert judge(TH, t, math.inf, 0.0).sustained


def test_too_few_messages_are_not_judged_and_do_not_fail() -> None:
    v = judge(TH, trace(np.full(15, 100.0)), 1.0, 0.0)
    assert v.sustained and v.not_judged() == ["growth"]
    none = judge(TH, Trace(np.zeros(3), np.full(3, np.nan), np.zeros(3), None, True), 1.0, 0.0)
    assert set(none.not_judged()) == {"late", "too_late", "growth", "send_lag"}


def test_latency_ceiling_is_off_by_default_and_needs_100_messages() -> None:
    lat = np.full(N, 40_000.0)
    assert "p99" not in [r.rule for r in judge(Thresholds(), trace(lat, rt=False), 1, 0).rules]
    capped = Thresholds(max_p99_us=10_000.0, too_late_cap_ms=1e6, late_cap_ms=1e6, max_late=1)
    v = judge(capped, Trace(np.arange(N) * 1e9, lat, np.zeros(N), 10.0, False), 1.0, 0.0)
    assert [r.rule for r in v.failed()] == ["p99"]
    few = judge(capped, Trace(np.arange(50) * 1e9, lat[:50], np.zeros(50), 10.0, False), 1, 0)
    assert few.sustained and few.not_judged() == ["p99"]


def test_thresholds_are_parameters() -> None:
    lat = steady()
    lat[::5] = 500.0
    assert judge(Thresholds(max_late=0.25), trace(lat), 1.0, 0.0).sustained
    assert "95%" in TH.describe() and "200 µs" in TH.describe()


def test_verdicts_round_trip_and_the_old_format_still_loads() -> None:
    v = judge(TH, trace(steady()), 1.0, 0.0)
    assert Verdict.from_record(v.record()) == v
    assert Verdict.from_dict(v.record().to_dict()) == v  # as summary.json holds it
    old = {"sustained": False, "rate_ok": True, "loss_ok": True, "growth_ok": False,
           "rate_ratio": 1.0, "loss": 0.0, "first_quarter_p50_us": 100.0,
           "last_quarter_p50_us": 401.0}  # fmt: skip
    assert Verdict.from_dict(old).reasons() == ["latency grew 100 -> 401 µs"]


def test_period_from_the_rate_or_the_deadlines() -> None:
    assert period_of(np.zeros(3), 100.0) == 0.01
    assert period_of(np.array([0.0, 2e7, 4e7, 6e7]), None) == pytest.approx(0.02)
    assert period_of(np.array([5.0]), None) is None


def test_stored_thresholds_are_checked() -> None:
    assert Thresholds.from_dict(None, "s.json") == Thresholds()
    assert Thresholds.from_dict({"max_p99_us": 5.0}, "s.json").max_p99_us == 5.0
    assert Thresholds.from_dict({"max_late": 0.3}, "s.json").max_late == 0.3
    with pytest.raises(UserError, match=r"^s.json: field 'thresholds' must map some of"):
        Thresholds.from_dict({"bogus": 1}, "s.json")
    with pytest.raises(UserError, match="got 3"):
        Thresholds.from_dict(3, "s.json")
    with pytest.raises(UserError, match=r"^s.json: thresholds.max_loss: .*got 'x'"):
        Thresholds.from_dict({"max_loss": "x"}, "s.json")
    with pytest.raises(UserError, match=r"^s.json: thresholds.growth_factor: .*got None"):
        Thresholds.from_dict({"growth_factor": None}, "s.json")
