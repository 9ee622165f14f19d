"""Restart intensity: OTP's "at most MaxR restarts within MaxT seconds", as a pure function.

OTP keeps the times of recent restarts; on each new restart it adds `now`,
drops the restarts older than the period (`now - t < period` stays in) and
gives up when more than `intensity` remain. Pure so that it is tested with a
fake clock and never with sleeps.

`RestartWindow` is the same rule kept incrementally in a deque (amortised O(1)
per restart instead of O(history)): the supervisor uses it on its restart fast
path, and a test checks it agrees with `add_restart` on random clocks.
"""

from __future__ import annotations

from collections import deque
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
    # More than max_restarts + 1 entries never change a verdict: keep the history bounded.
    return len(recent) <= limit.max_restarts, recent[-(limit.max_restarts + 1) :]


class RestartWindow:
    """`add_restart` kept incrementally, for a clock that never goes back."""

    __slots__ = ("limit", "times")

    def __init__(self, limit: Intensity) -> None:
        self.limit = limit
        self.times: deque[float] = deque(maxlen=limit.max_restarts + 1)

    def add(self, now: float) -> bool:
        """Record a restart at `now`; False when it exceeds the limit (give up)."""
        times, period = self.times, self.limit.period_s
        while times and now - times[0] >= period:
            times.popleft()
        full = len(times) == times.maxlen
        times.append(now)
        return not full and len(times) <= self.limit.max_restarts

    def clear(self) -> None:
        self.times.clear()
