"""Capacity search: the largest sustained node count (or rate) with few trials.

Probe exponentially (start, 2x, 4x, ...) until a trial is not sustained, then
bisect the bracket between the largest sustained and the smallest unsustained
value. Stop when the bracket is tight (relative or absolute tolerance), when the
cap is reached sustained, or when the time budget would be overrun: a probe is
only started if the time spent plus the longest probe so far still fits, since a
trial cannot be interrupted halfway. Pure logic: the caller runs the trials.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

Clock = Callable[[], float]


@dataclass(frozen=True)
class Probe:
    value: float
    sustained: bool
    seconds: float


@dataclass
class SearchResult:
    """The bracket: `sustained` is the largest value that held, `unsustained` the smallest
    that did not (None when no probe was on that side)."""

    sustained: float | None = None
    unsustained: float | None = None
    probes: list[Probe] = field(default_factory=list)
    stop: str = ""  # tight, cap, floor, budget

    def record(self, value: float, ok: bool, seconds: float) -> None:
        self.probes.append(Probe(value, ok, seconds))
        if ok and (self.sustained is None or value > self.sustained):
            self.sustained = value
        if not ok and (self.unsustained is None or value < self.unsustained):
            self.unsustained = value

    def to_dict(self) -> dict[str, object]:
        return {
            "sustained": self.sustained,
            "unsustained": self.unsustained,
            "stop": self.stop,
            "probes": [asdict(p) for p in self.probes],
        }


@dataclass(frozen=True)
class Budget:
    seconds: float = math.inf
    clock: Clock = time.monotonic


class _Runner:
    """Runs probes and keeps the bracket, refusing to start one that would overrun."""

    def __init__(self, trial: Callable[[float], bool], budget: Budget) -> None:
        self.trial = trial
        self.budget = budget
        self.start = budget.clock()
        self.result = SearchResult()
        self.longest = 0.0

    def affordable(self) -> bool:
        spent = self.budget.clock() - self.start
        return spent + self.longest <= self.budget.seconds

    def probe(self, value: float) -> bool | None:
        """The verdict at `value`, or None when the budget stopped the search."""
        if not self.affordable():
            self.result.stop = "budget"
            return None
        began = self.budget.clock()
        ok = bool(self.trial(value))
        took = self.budget.clock() - began
        self.longest = max(self.longest, took)
        self.result.record(value, ok, took)
        return ok


def _tight(low: float, high: float, rel_tol: float, abs_tol: float) -> bool:
    return high - low <= abs_tol or (low > 0 and (high - low) / low <= rel_tol)


def search_max_nodes(
    run_trial: Callable[[int], bool],
    *,
    start: int = 2,
    step: int = 2,
    max_nodes: int = 256,
    rel_tol: float = 0.1,
    abs_tol: int = 2,
    budget: Budget | None = None,
) -> SearchResult:
    """Largest sustained node count; every probe is a multiple of `step` (nodes = 2 * pairs)."""
    if start < step or start % step or max_nodes < start:
        raise ValueError("need step <= start <= max_nodes, with start a multiple of step")
    cap = max_nodes - max_nodes % step
    runner = _Runner(lambda v: run_trial(int(v)), budget or Budget())
    res = runner.result
    n = start
    while True:  # exponential phase
        ok = runner.probe(n)
        if ok is None:
            return res
        if not ok:
            break
        if n >= cap:
            res.stop = "cap"
            return res
        n = min(n * 2, cap)
    while res.unsustained is not None:  # bisection phase
        low = res.sustained or 0
        high = res.unsustained
        mid = (low + high) // 2 // step * step
        if mid <= low or _tight(low, high, rel_tol, max(abs_tol, step)):
            res.stop = "tight" if res.sustained is not None else "floor"
            return res
        if runner.probe(mid) is None:
            return res
    return res


def search_max_rate(
    run_trial_rate: Callable[[float], bool],
    *,
    start_hz: float,
    min_hz: float = 0.1,
    max_hz: float = 1_000_000.0,
    rel_tol: float = 0.1,
    abs_tol_hz: float = 0.0,
    budget: Budget | None = None,
) -> SearchResult:
    """Highest sustained rate: doubling up (or halving down from a failing start), then
    bisecting geometrically, since rates span decades."""
    if not 0 < min_hz <= start_hz <= max_hz:
        raise ValueError("need 0 < min_hz <= start_hz <= max_hz")
    runner = _Runner(run_trial_rate, budget or Budget())
    res = runner.result
    ok = runner.probe(start_hz)
    if ok is None:
        return res
    rate = start_hz
    while (res.unsustained is None) or (res.sustained is None):
        if ok and rate >= max_hz:
            res.stop = "cap"
            return res
        if not ok and rate <= min_hz:
            res.stop = "floor"
            return res
        rate = min(rate * 2, max_hz) if ok else max(rate / 2, min_hz)
        ok = runner.probe(rate)
        if ok is None:
            return res
    while True:
        low, high = res.sustained, res.unsustained
        assert low is not None and high is not None
        if _tight(low, high, rel_tol, abs_tol_hz):
            res.stop = "tight"
            return res
        mid = float(f"{math.sqrt(low * high):.4g}")
        if not low < mid < high:
            res.stop = "tight"
            return res
        if runner.probe(mid) is None:
            return res
