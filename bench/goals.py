"""One judge for every benchmark goal: a goal line gives its figure, the figure's 95 %
interval and the sample behind it, and a verdict the interval decides.

- PASS when the whole interval meets the target, FAIL when the whole interval misses it,
  and "not judged" when it straddles the target or the sample is too short to say:
  fewer than `MIN_ONE_RUN` samples a side from one run or two (a run's messages share
  its minute of the machine: `bench/dds.py --quick`, one round of 60 messages, gave
  1.98x ddsperf where three full rounds gave 1.27-1.37x; two runs resampled give
  intervals too narrow, as `roboscale compare` found), or fewer than `MIN_SAMPLES` a
  side over `MIN_RUNS` runs or rounds or more.
- Latency figures take their interval from `roboscale.analysis.uncertainty`, as the
  report does: the order statistics of one run, or a bootstrap over runs (rounds) and
  then their samples; a ratio's interval from the same draws, divided.
- Rounds of a system that keeps only a figure per round (ddsperf prints medians per
  second): a bootstrap of the rounds' ratios (`from_rounds`); one round says nothing of
  the next.
- Counts (messages lost, duplicated) are exact in their run, and a single measurement
  with no spread measured (memory per node, a page's size) is judged on its figure: both
  say so in their `sample`.
- A figure that could not be measured fails its goal, with the reason.

Each function returns the goal as a JSON-ready dict: goal, measured, interval ([low,
high] or null), sample, target, met (true, false or "not judged"), why.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from roboscale.analysis.uncertainty import Estimate, percentile, ratio

NOT_JUDGED = "not judged"
MIN_ONE_RUN = 100  # samples a side when everything comes from one run (or two)
MIN_RUNS = 3  # runs or rounds from which the spread between runs is part of the interval
MIN_SAMPLES = 20  # samples a side over MIN_RUNS runs or rounds or more
ROUNDS_DRAWS = 2000

Samples = Sequence[float]
Verdict = bool | str


@dataclass(frozen=True)
class Target:
    """What a figure must meet, as text ("<= 1") and as a rule."""

    text: str
    holds: Callable[[float], bool]


def at_most(bound: float, text: str = "") -> Target:
    return Target(text or f"<= {bound:g}", lambda v: v <= bound)


def at_least(bound: float, text: str = "") -> Target:
    return Target(text or f">= {bound:g}", lambda v: v >= bound)


def verdict(low: float, high: float, target: Target) -> Verdict:
    """PASS (True) when both ends meet the target, FAIL (False) when neither does."""
    if target.holds(low) and target.holds(high):
        return True
    if not target.holds(low) and not target.holds(high):
        return False
    return NOT_JUDGED


def shown(value: float, target: Target) -> str:
    """Two decimals (none from 100 up, two significant digits below 0.1), or as many as it
    takes for the figure to stay on its side of the target (1.5004 misses "at most 1.5"
    and must not print as 1.50)."""
    size = abs(value)
    text = f"{value:.0f}" if size >= 100 else f"{value:.2f}" if size >= 0.1 else f"{value:.2g}"
    return text if target.holds(float(text)) == target.holds(value) else f"{value:.6g}"


def line(
    goal: str,
    measured: Any,
    target: Target | str,
    met: Verdict,
    *,
    interval: tuple[float, float] | None = None,
    sample: str = "",
    why: str = "",
) -> dict[str, Any]:
    """A goal line; its interval is also kept as printed, on the right side of the target."""
    rule = target if isinstance(target, Target) else Target(target, lambda v: True)
    return {
        "goal": goal,
        "measured": measured,
        "interval": None if interval is None else [interval[0], interval[1]],
        "interval_text": "-"
        if interval is None
        else f"[{shown(interval[0], rule)}, {shown(interval[1], rule)}]",
        "sample": sample,
        "target": rule.text,
        "met": met,
        "why": why,
    }


def not_measured(goal: str, target: Target | str, why: str = "not measured") -> dict[str, Any]:
    return line(goal, None, target, False, why=why)


def _runs(given: Samples | Sequence[Samples]) -> list[np.ndarray[Any, np.dtype[np.float64]]]:
    """One run (a flat list of samples) or several (a list of lists), as arrays."""
    if given and isinstance(given[0], (list, tuple, np.ndarray)):
        return [np.asarray(r, dtype=float) for r in given]  # type: ignore[arg-type]
    return [np.asarray(given, dtype=float)]


def _judged(goal: str, e: Estimate, target: Target, what: str, per: str) -> dict[str, Any]:
    runs = f"one {per}" if e.runs == 1 else f"{e.runs} {per}s"
    sample = f"{what}, {runs}"
    if e.value is None or e.low is None or e.high is None:
        why = f"too short: {e.note}" if e.note.startswith("n = ") else e.note
        return line(goal, None, target, NOT_JUDGED, sample=sample, why=why)
    least = MIN_SAMPLES if e.runs >= MIN_RUNS else MIN_ONE_RUN
    if e.n < least:
        few = {1: f" in one {per}", 2: f" in two {per}s"}.get(e.runs, "")
        why = f"too short: n = {e.n} < {least} a side{few}"
        return line(goal, e.value, target, NOT_JUDGED, interval=(e.low, e.high), sample=sample,
                    why=why)  # fmt: skip
    met = verdict(e.low, e.high, target)
    why = "the interval straddles the target" if met == NOT_JUDGED else ""
    return line(goal, e.value, target, met, interval=(e.low, e.high), sample=sample, why=why)


def latency_ratio(
    goal: str,
    numerator: Samples | Sequence[Samples],
    denominator: Samples | Sequence[Samples],
    target: Target,
    q: float = 50.0,
    per: str = "run",
) -> dict[str, Any]:
    """numerator's q-th percentile over denominator's, each one run (a list of samples)
    or several (a list of lists, run by run, interleaved with the other's); `per` names
    what a run is in the sample ("round")."""
    top, bottom = _runs(numerator), _runs(denominator)
    e = ratio(top, bottom, q)
    n_top, n_bottom = (sum(r.size for r in x) for x in (top, bottom))
    return _judged(goal, e, target, f"n = {n_top:,} / {n_bottom:,}", per)


def latency(
    goal: str,
    samples: Samples | Sequence[Samples],
    target: Target,
    q: float = 50.0,
    per: str = "run",
) -> dict[str, Any]:
    """A q-th percentile against an absolute target."""
    runs = _runs(samples)
    e = percentile(runs, q)
    return _judged(goal, e, target, f"n = {e.n:,}", per)


def from_rounds(
    goal: str,
    pooled: float | None,
    round_ratios: Sequence[float],
    target: Target,
    n: tuple[int, int],
) -> dict[str, Any]:
    """A ratio measured in rounds by systems that keep only a figure per round: the 95 %
    interval of the rounds' median ratio by bootstrap; `pooled` is the figure shown, `n`
    the samples a side."""
    rounds_text = "one round" if len(round_ratios) == 1 else f"{len(round_ratios)} rounds"
    sample = f"n = {n[0]:,} / {n[1]:,}, {rounds_text}"
    if pooled is None:
        return not_measured(goal, target)
    if len(round_ratios) < 2:
        return line(goal, pooled, target, NOT_JUDGED, sample=sample,
                    why="one round: spread unknown")  # fmt: skip
    rounds = np.asarray(round_ratios, dtype=float)
    rng = np.random.default_rng(0)
    draws = np.median(rng.choice(rounds, size=(ROUNDS_DRAWS, rounds.size)), axis=1)
    low, high = (float(v) for v in np.percentile(draws, [2.5, 97.5]))
    if min(n) < MIN_SAMPLES:
        why = f"too short: n = {min(n)} < {MIN_SAMPLES} a side"
        return line(goal, pooled, target, NOT_JUDGED, interval=(low, high), sample=sample,
                    why=why)  # fmt: skip
    met = verdict(low, high, target)
    why = "the interval straddles the target" if met == NOT_JUDGED else ""
    return line(goal, pooled, target, met, interval=(low, high), sample=sample, why=why)


def exact(goal: str, measured: Any, target: str, met: bool, sample: str) -> dict[str, Any]:
    """Counts over the whole run (lost, duplicated): no sampling error to bound."""
    return line(goal, measured, target, met, sample=f"{sample} (exact counts)")


def single(goal: str, measured: float | None, target: Target, sample: str) -> dict[str, Any]:
    """One measurement whose spread was not measured (memory, a file's size, a mean cost):
    judged on its figure, and the sample says so."""
    if measured is None or not math.isfinite(measured):
        return not_measured(goal, target)
    met = target.holds(measured)
    return line(goal, measured, target, met, sample=f"{sample} (one measurement: no interval)")


def rounds_ratio(
    goal: str, both: Sequence[tuple[Samples, Samples]], target: Target
) -> dict[str, Any]:
    """The p50 of ours over the anchor's, from the rounds both finished (`both`: per round,
    our samples and the anchor's), judged over rounds, with each round's own ratio
    (`by_round`); not measured when no round finished on both sides."""
    if not both:
        return {**not_measured(goal, target), "by_round": "-"}
    ours, anchor = [a for a, _ in both], [b for _, b in both]
    ratios = [float(np.median(a)) / float(np.median(b)) for a, b in both]
    judged = latency_ratio(goal, ours, anchor, target, per="round")
    return {**judged, "by_round": round_range(ratios, target)}


def round_range(ratios: Sequence[float], target: Target) -> str:
    """Each round's ratio, their range and how many met the target."""
    if not ratios:
        return "-"
    met = sum(target.holds(r) for r in ratios)
    each = "/".join(shown(r, target) for r in ratios)
    span = f"{shown(min(ratios), target)}-{shown(max(ratios), target)}"
    return f"{each} (range {span}, {met} of {len(ratios)} met)"
