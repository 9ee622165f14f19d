"""Restart intensity: OTP's "at most MaxR restarts within MaxT seconds", as a pure function.

OTP keeps the times of recent restarts; on each new restart it adds `now`,
drops the restarts older than the period (`now - t < period` stays in) and
gives up when more than `intensity` remain. Pure so that it is tested with a
fake clock and never with sleeps.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Intensity:
    """`max_restarts` restarts are allowed within any window of `period_s` seconds."""

    max_restarts: int = 1  # OTP's default intensity
    period_s: float = 5.0  # OTP's default period

    def __post_init__(self) -> None:
        if self.max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {self.max_restarts}")
        if self.period_s <= 0:
            raise ValueError(f"period_s must be > 0, got {self.period_s}")


def add_restart(
    history: tuple[float, ...], now: float, limit: Intensity
) -> tuple[bool, tuple[float, ...]]:
    """Record a restart at `now`; return (allowed, new history).

    `allowed` is False when this restart makes more than `limit.max_restarts`
    restarts within the last `limit.period_s` seconds: the supervisor must then
    give up (terminate its children and itself) instead of restarting.
    """
    recent = (*tuple(t for t in history if now - t < limit.period_s), now)
    return len(recent) <= limit.max_restarts, recent
