"""Clock offsets between machines, estimated as NTP does, with an error bound.

Round trips are exact on one clock. One-way figures across machines need the
remote clock's offset: an exchange sends at local t0, is stamped by the remote
at t1 (receive) and t2 (reply) and comes back at local t3. With symmetric paths

    offset = ((t1 - t0) + (t2 - t3)) / 2        (remote minus local)
    delay  = (t3 - t0) - (t2 - t1)              (the network's share of the round trip)

and whatever the asymmetry, the true offset lies within offset ± delay / 2. Of
several exchanges the one with the smallest delay has the tightest bound (NTP's
clock filter), so that one is kept. An estimate at the start and one at the end
of a trial bound the drift between them; a one-way figure is corrected by the
offset and carries the combined bound. All times are integer nanoseconds.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

# One exchange: (t0 local send, t1 remote receive, t2 remote send, t3 local receive).
Exchange = tuple[int, int, int, int]


@dataclass(frozen=True)
class OffsetEstimate:
    """The remote clock minus the local one, and the half-width of where it can lie."""

    offset_ns: int
    bound_ns: int
    delay_ns: int
    exchanges: int

    def to_local(self, remote_ns: int) -> int:
        """A remote timestamp on the local clock."""
        return remote_ns - self.offset_ns

    def as_dict(self) -> dict[str, int]:
        return {
            "offset_ns": self.offset_ns,
            "bound_ns": self.bound_ns,
            "delay_ns": self.delay_ns,
            "exchanges": self.exchanges,
        }


def estimate_offset(exchanges: Sequence[Exchange]) -> OffsetEstimate:
    """The offset of the exchange with the smallest network delay, bounded by half of it."""
    valid = [e for e in exchanges if _delay(e) >= 0 and e[3] >= e[0] and e[2] >= e[1]]
    if not valid:
        raise ValueError("no usable clock exchange (each needs t0 <= t3 and t1 <= t2)")
    best = min(valid, key=_delay)
    t0, t1, t2, t3 = best
    delay = _delay(best)
    # Halving a sum of two int64 differences: round to the nearest nanosecond.
    offset = round(((t1 - t0) + (t2 - t3)) / 2)
    return OffsetEstimate(offset, (delay + 1) // 2, delay, len(valid))


def _delay(e: Exchange) -> int:
    t0, t1, t2, t3 = e
    return (t3 - t0) - (t2 - t1)


@dataclass(frozen=True)
class TrialClock:
    """A remote host's offset measured at the start and at the end of one trial."""

    start: OffsetEstimate
    end: OffsetEstimate

    @property
    def offset_ns(self) -> int:
        """The midpoint of both estimates: drift is taken as linear and small."""
        return (self.start.offset_ns + self.end.offset_ns) // 2

    @property
    def bound_ns(self) -> int:
        """Both estimates' bounds plus half of the drift between them."""
        drift = abs(self.end.offset_ns - self.start.offset_ns)
        return max(self.start.bound_ns, self.end.bound_ns) + (drift + 1) // 2

    def valid(self, max_bound_ns: int) -> bool:
        return self.bound_ns <= max_bound_ns

    def as_dict(self) -> dict[str, object]:
        return {
            "start": self.start.as_dict(),
            "end": self.end.as_dict(),
            "offset_ns": self.offset_ns,
            "bound_ns": self.bound_ns,
        }


def measure(
    ask: Callable[[], tuple[int, int]], now: Callable[[], int], count: int = 16
) -> OffsetEstimate:
    """Run `count` exchanges: `ask()` makes one request of the remote and returns its
    (receive, send) stamps; `now()` reads the local clock around it."""
    exchanges: list[Exchange] = []
    for _ in range(count):
        t0 = now()
        t1, t2 = ask()
        t3 = now()
        exchanges.append((t0, t1, t2, t3))
    return estimate_offset(exchanges)
