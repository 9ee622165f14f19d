"""Computing a finding's figures from one run's summary entries, and judging them."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from roboscale.reproduce.model import (
    AtLeast,
    AtMost,
    Between,
    Difference,
    Figure,
    Knee,
    Limit,
    Match,
    Pick,
    Ratio,
    Rule,
    Unsustained,
    Within,
)

Entry = Mapping[str, Any]
Entries = Mapping[str, Sequence[Entry]]  # experiment id -> the trials of one run


class NoFigure(Exception):
    """A figure cannot be computed from this run (no such trial, a failed trial, a
    missing value); the message says which."""


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool):
        return float(value)
    if not isinstance(value, int | float):
        raise NoFigure(f"{what}: no value")
    return float(value)


def _dotted(entry: Entry, path: str) -> Any:
    value: Any = entry
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _hop_p50s(entry: Entry) -> list[float]:
    nodes = entry.get("per_node") or []
    return [_number(_dotted(n, "hop_us.p50"), "a hop's p50") for n in nodes]


def _tail_ratio(dist: Any) -> float:
    p50 = _number(_dotted(dist, "p50"), "p50")
    return _number(_dotted(dist, "p99"), "p99") / p50


def _listener_p50s(entry: Entry) -> list[float]:
    nodes = entry.get("per_node") or []
    return [_number(_dotted(n, "one_way_us.p50"), "a listener's p50") for n in nodes]


# Derived figures of one trial entry, by name.
METRICS: dict[str, Callable[[Entry], float]] = {
    "hop_p50_median": lambda e: statistics.median(_hop_p50s(e)),
    "hop_p50_sum": lambda e: sum(_hop_p50s(e)),
    "hop_p50_spread": lambda e: max(_hop_p50s(e)) / min(_hop_p50s(e)),
    "hop_tail_median": lambda e: statistics.median(
        [_tail_ratio(n.get("hop_us")) for n in e.get("per_node") or []]
    ),
    "tail": lambda e: _tail_ratio(e.get("one_way_us")),
    "listener_p50_spread": lambda e: max(_listener_p50s(e)) / min(_listener_p50s(e)),
    "delivered": lambda e: (
        _number(e.get("received"), "received") / max(1.0, _number(e.get("sent"), "sent"))
    ),
    "sustained": lambda e: float(bool(e.get("sustained"))),
    # workloads/oneway_figures.py: the share of box-plot outliers, the median node's
    "outlier_share_median": lambda e: statistics.median(
        [_number(x, "an outlier share") for x in _dotted(e, "flow.outlier_share") or []]
    ),
}


def _matches(value: Any, want: Match) -> bool:
    return value in want if isinstance(want, list) else bool(value == want)


def matching(entries: Sequence[Entry], where: Mapping[str, Match]) -> list[Entry]:
    return [e for e in entries if all(_matches(e.get(k), v) for k, v in where.items())]


def _trials(entries: Entries, experiment: str, where: Mapping[str, Match]) -> list[Entry]:
    if experiment not in entries:
        raise NoFigure(f"{experiment}: not run")
    found = matching(entries[experiment], where)
    if not found:
        raise NoFigure(f"{experiment}: no trial with {_where(where)}")
    return found


def _where(where: Mapping[str, Match]) -> str:
    return ", ".join(f"{k}={v}" for k, v in where.items())


def _pick(entries: Entries, f: Pick) -> float:
    found = _trials(entries, f.experiment, f.where)
    if len(found) > 1:
        raise NoFigure(f"{f.experiment}: {len(found)} trials with {_where(f.where)}")
    entry = found[0]
    if entry.get("error"):
        raise NoFigure(f"{entry.get('trial')}: failed ({entry['error']})")
    if f.metric in METRICS:
        try:
            return METRICS[f.metric](entry)
        except (ValueError, ZeroDivisionError, statistics.StatisticsError):
            raise NoFigure(f"{entry.get('trial')}: {f.metric}: no value") from None
    return _number(_dotted(entry, f.metric), f"{entry.get('trial')}: {f.metric}")


def _knee(entries: Entries, f: Knee) -> float:
    found = sorted(_trials(entries, f.experiment, f.where), key=lambda e: e.get(f.axis) or 0)
    knee = 0.0
    for entry in found:
        if entry.get("error") or not entry.get("sustained"):
            break
        knee = _number(entry.get(f.axis), f.axis)
    return knee


def _holds(entry: Entry, bounds: Mapping[str, float]) -> bool:
    if entry.get("error"):
        return False
    for metric, bound in bounds.items():
        value = _dotted(entry, metric)
        if not isinstance(value, int | float) or value > bound:
            return False
    return True


def _limit(entries: Entries, f: Limit) -> float:
    found = sorted(_trials(entries, f.experiment, f.where), key=lambda e: e.get(f.axis) or 0)
    limit = 0.0
    for entry in found:
        if not _holds(entry, f.bounds):
            return limit
        limit = _number(entry.get(f.axis), f.axis)
    # Every count swept held: the limit lies above the sweep, unknown.
    raise NoFigure(f"{f.experiment}: held every {f.axis} swept, up to {limit:g}: a lower bound")


def compute(entries: Entries, f: Figure) -> float:
    """The figure of one run; NoFigure when it cannot be computed."""
    if isinstance(f, Pick):
        return _pick(entries, f)
    if isinstance(f, Knee):
        return _knee(entries, f)
    if isinstance(f, Limit):
        return _limit(entries, f)
    if isinstance(f, Unsustained):
        found = _trials(entries, f.experiment, f.where)
        return float(sum(bool(e.get("error")) or not e.get("sustained") for e in found))
    if isinstance(f, Ratio):
        den = compute(entries, f.den)
        if den == 0:
            raise NoFigure("a ratio over zero")
        return compute(entries, f.num) / den
    return compute(entries, f.a) - compute(entries, f.b)


def experiments_of(f: Figure) -> set[str]:
    if isinstance(f, Ratio):
        return experiments_of(f.num) | experiments_of(f.den)
    if isinstance(f, Difference):
        return experiments_of(f.a) | experiments_of(f.b)
    return {f.experiment}


def passes(rule: Rule, value: float) -> bool:
    if isinstance(rule, Within):
        return abs(value / rule.target - 1) <= rule.tolerance
    if isinstance(rule, Between):
        return rule.low <= value <= rule.high
    if isinstance(rule, AtLeast):
        return value >= rule.bound
    assert isinstance(rule, AtMost)
    return value <= rule.bound


def rule_words(rule: Rule, unit: str = "") -> str:
    """The rule as a reader checks it: "within ±25 % of 1x"."""
    u = unit
    if isinstance(rule, Within):
        low, high = rule.target * (1 - rule.tolerance), rule.target * (1 + rule.tolerance)
        return (
            f"within ±{rule.tolerance * 100:.0f} % of {bound(rule.target)}{u} "
            f"({bound(low)}-{bound(high)}{u})"
        )
    if isinstance(rule, Between):
        return f"from {bound(rule.low)}{u} to {bound(rule.high)}{u}"
    if isinstance(rule, AtLeast):
        return f"at least {bound(rule.bound)}{u}"
    return f"at most {bound(rule.bound)}{u}"


def bound(value: float) -> str:
    """A rule's bound as written: 1, 0.75, 1.25, 2,083, 1,000,000."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:.4g}"


def number(value: float) -> str:
    """Three significant digits, thousands separated: 0.496, 1.35, 963, 1,261."""
    if value == 0:
        return "0"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.3g}"
