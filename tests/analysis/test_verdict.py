"""The sustained verdict, rule by rule."""

from __future__ import annotations

import math

import pytest

from roboscale.analysis.verdict import Thresholds, Verdict, judge
from roboscale.errors import UserError

TH = Thresholds(min_rate_ratio=0.95, max_loss=0.01, growth_factor=2.0, growth_floor_us=200.0)


def test_all_good_is_sustained() -> None:
    v = judge(TH, 1.0, 0.0, 100.0, 150.0)
    assert v.sustained and v.reasons() == []


def test_rate_boundary_is_inclusive() -> None:
    assert judge(TH, 0.95, 0.0, 100.0, 100.0).rate_ok
    assert not judge(TH, 0.949, 0.0, 100.0, 100.0).sustained


def test_loss_boundary_is_inclusive() -> None:
    assert judge(TH, 1.0, 0.01, 100.0, 100.0).sustained
    v = judge(TH, 1.0, 0.0101, 100.0, 100.0)
    assert not v.sustained and v.reasons() == ["loss 1.0%"]


def test_growth_allows_factor_plus_floor() -> None:
    assert judge(TH, 1.0, 0.0, 100.0, 400.0).growth_ok  # 2 * 100 + 200
    v = judge(TH, 1.0, 0.0, 100.0, 401.0)
    assert not v.growth_ok and "latency grew 100 -> 401 us" in v.reasons()


def test_growth_not_judged_without_quarters() -> None:
    assert judge(TH, 1.0, 0.0, None, None).growth_ok


def test_thresholds_are_parameters() -> None:
    loose = Thresholds(min_rate_ratio=0.5, max_loss=0.5, growth_factor=10, growth_floor_us=0)
    assert judge(loose, 0.6, 0.4, 100.0, 900.0).sustained
    assert "95%" in TH.describe() and "200 us" in TH.describe()


def test_latency_ceiling_is_off_by_default() -> None:
    assert judge(TH, 1.0, 0.0, 40_000.0, 44_000.0, 44_000.0).sustained
    assert "ceiling" not in " ".join(judge(TH, 1.0, 0.0, 1.0, 1.0, 9e9).reasons())


def test_latency_ceiling_fails_a_standing_queue() -> None:
    capped = Thresholds(max_p99_us=10_000.0)
    assert judge(capped, 1.0, 0.0, 9_000.0, 9_000.0, 10_000.0).sustained  # inclusive
    v = judge(capped, 1.0, 0.0, 40_000.0, 44_000.0, 44_000.0)
    assert v.growth_ok and not v.latency_ok and not v.sustained
    assert v.reasons() == ["99th percentile latency 44000 us over the ceiling"]
    assert "99th percentile latency <= 10000 us" in capped.describe()


def test_latency_ceiling_not_judged_without_replies() -> None:
    assert judge(Thresholds(max_p99_us=1.0), 1.0, 0.0, None, None, None).latency_ok


def test_verdicts_stored_before_the_ceiling_still_load() -> None:
    old = judge(TH, 1.0, 0.0, 1.0, 1.0).to_dict()
    del old["latency_ok"], old["p99_us"]
    assert Verdict(**old).sustained


def test_stored_thresholds_are_checked() -> None:
    assert Thresholds.from_dict(None, "s.json") == Thresholds()
    assert Thresholds.from_dict({"max_p99_us": 5.0}, "s.json").max_p99_us == 5.0
    with pytest.raises(UserError, match=r"^s.json: field 'thresholds' must map some of"):
        Thresholds.from_dict({"bogus": 1}, "s.json")
    with pytest.raises(UserError, match="got 3"):
        Thresholds.from_dict(3, "s.json")
    with pytest.raises(UserError, match=r"^s.json: thresholds.max_loss: .*got 'x'"):
        Thresholds.from_dict({"max_loss": "x"}, "s.json")
    with pytest.raises(UserError, match=r"^s.json: thresholds.growth_factor: .*got None"):
        Thresholds.from_dict({"growth_factor": None}, "s.json")


def test_a_sender_ahead_or_unmeasured_counts_as_on_target() -> None:
    assert judge(TH, 1.3, 0.0, None, None).rate_ratio == 1.0
    assert judge(TH, math.inf, 0.0, None, None).rate_ok
