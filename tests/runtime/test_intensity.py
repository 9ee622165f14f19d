from __future__ import annotations

import random

import pytest

from roboscale.runtime.intensity import Intensity, RestartWindow, add_restart


def test_default_is_otp_default() -> None:
    """OTP: intensity defaults to 1 and period to 5 seconds."""
    assert Intensity() == Intensity(1, 5.0)


def test_more_than_max_restarts_within_period_gives_up() -> None:
    """OTP: if more than MaxR restarts occur within MaxT seconds, the supervisor gives up."""
    limit = Intensity(max_restarts=3, period_s=10.0)
    history: tuple[float, ...] = ()
    verdicts = []
    for now in (0.0, 1.0, 2.0, 3.0):  # a fake clock
        ok, history = add_restart(history, now, limit)
        verdicts.append(ok)
    assert verdicts == [True, True, True, False]


def test_restarts_older_than_period_are_forgotten() -> None:
    """OTP: only the restarts within the last MaxT seconds count."""
    limit = Intensity(max_restarts=2, period_s=5.0)
    history: tuple[float, ...] = ()
    for now in (0.0, 1.0, 6.0, 7.0, 12.0, 13.0):
        ok, history = add_restart(history, now, limit)
        assert ok, now
    assert history == (12.0, 13.0)


def test_restart_exactly_one_period_later_is_outside_the_window() -> None:
    limit = Intensity(max_restarts=1, period_s=5.0)
    ok, history = add_restart((), 0.0, limit)
    assert ok
    ok, _ = add_restart(history, 5.0, limit)
    assert ok
    ok, _ = add_restart(history, 4.999, limit)
    assert not ok


def test_zero_intensity_allows_no_restart() -> None:
    ok, _ = add_restart((), 0.0, Intensity(0, 1.0))
    assert not ok


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ValueError, match="max_restarts"):
        Intensity(-1, 1.0)
    with pytest.raises(ValueError, match="period_s"):
        Intensity(1, 0.0)


def test_restart_window_agrees_with_the_pure_function() -> None:
    """The supervisor's incremental window gives the verdicts of `add_restart`, step by step."""
    rng = random.Random(7)
    for max_restarts, period in ((0, 1.0), (1, 5.0), (3, 2.0), (10, 0.5)):
        limit = Intensity(max_restarts, period)
        window = RestartWindow(limit)
        history: tuple[float, ...] = ()
        now = 0.0
        for _ in range(500):
            now += rng.choice((0.0, 0.01, 0.1, 0.5, 1.0, 3.0))
            ok, history = add_restart(history, now, limit)
            assert window.add(now) == ok, (max_restarts, period, now)
            assert len(history) <= max_restarts + 1  # bounded, whatever the rate


def test_restart_window_clear_forgets_everything() -> None:
    window = RestartWindow(Intensity(1, 5.0))
    assert window.add(0.0)
    assert not window.add(1.0)
    window.clear()
    assert window.add(2.0)
