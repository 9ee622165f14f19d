"""Clock-offset estimates on synthetic exchanges with a known offset and delay."""

from __future__ import annotations

import random

import pytest

from roboscale.env.clock import OffsetEstimate, TrialClock, estimate_offset, measure

MS = 1_000_000


def exchange(t0: int, offset: int, there: int, back: int, service: int = 0) -> tuple[int, ...]:
    """A request sent at local t0 that takes `there` ns out and `back` ns home."""
    t1 = t0 + there + offset
    t2 = t1 + service
    t3 = t2 - offset + back
    return (t0, t1, t2, t3)


def test_symmetric_paths_give_the_exact_offset() -> None:
    est = estimate_offset([exchange(1_000, 5 * MS, 200_000, 200_000, service=30_000)])
    assert est.offset_ns == 5 * MS
    assert est.delay_ns == 400_000
    assert est.bound_ns == 200_000


def test_asymmetry_stays_within_the_bound() -> None:
    est = estimate_offset([exchange(0, -3 * MS, 900_000, 100_000)])
    # True offset -3 ms; the estimate is off by half the asymmetry (400 us), within delay/2.
    assert est.offset_ns == -3 * MS + 400_000
    assert abs(est.offset_ns - (-3 * MS)) <= est.bound_ns


def test_the_exchange_with_the_least_delay_wins() -> None:
    rng = random.Random(7)
    true_offset = 42 * MS
    exchanges = [
        exchange(i * MS, true_offset, rng.randint(50_000, 5 * MS), rng.randint(50_000, 5 * MS))
        for i in range(50)
    ]
    exchanges.append(exchange(60 * MS, true_offset, 30_000, 30_000))
    est = estimate_offset(exchanges)
    assert est.offset_ns == true_offset
    assert est.delay_ns == 60_000
    assert est.exchanges == 51
    for e in exchanges:  # every exchange's own bound holds the truth
        one = estimate_offset([e])
        assert abs(one.offset_ns - true_offset) <= one.bound_ns


def test_impossible_exchanges_are_refused() -> None:
    with pytest.raises(ValueError, match="no usable clock exchange"):
        estimate_offset([(10, 0, 5, 5)])  # comes back before it left
    with pytest.raises(ValueError):
        estimate_offset([])


def test_trial_clock_adds_half_the_drift() -> None:
    start = OffsetEstimate(1_000_000, 50_000, 100_000, 8)
    end = OffsetEstimate(1_400_000, 80_000, 160_000, 8)
    clock = TrialClock(start, end)
    assert clock.offset_ns == 1_200_000
    assert clock.bound_ns == 80_000 + 200_000
    assert clock.valid(300_000)
    assert not clock.valid(100_000)
    assert start.to_local(5_000_000) == 4_000_000


def test_measure_runs_exchanges_against_a_remote_clock() -> None:
    local = [0]
    offset = 7 * MS

    def now() -> int:
        return local[0]

    def ask() -> tuple[int, int]:
        local[0] += 20_000  # out
        t1 = local[0] + offset
        local[0] += 5_000  # service
        t2 = local[0] + offset
        local[0] += 20_000  # back
        return t1, t2

    est = measure(ask, now, count=4)
    assert est.offset_ns == offset
    assert est.exchanges == 4
