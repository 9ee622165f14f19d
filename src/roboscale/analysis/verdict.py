"""The sustained verdict: did this configuration keep up, or was it falling behind?

A trial is sustained only if every rule holds; the report names each rule that failed
with its figure. The rules, and why their defaults are what they are:

- **rate**: the slowest sender achieved at least `min_rate_ratio` (95 %) of the target.
- **loss**: at most `max_loss` (1 %) of the messages were lost.
- **late** and **too late**, after iRobot's ros2-performance: a message is late beyond
  `late_share` (0.2) of the period, capped at `late_cap_ms` (5 ms), and too late beyond
  the period, capped at `too_late_cap_ms` (50 ms). A message later than the period
  overlaps the next one: the path is holding more than one message, the first sign of a
  queue; the caps say what a robot's control loop tolerates at low rates (at 10 Hz a
  50 ms-old scan is stale whatever the period). These bounds are per delivery: one-way
  and end-to-end figures use them as they are, a round trip (two deliveries) twice them.
  Too-late messages are as good as lost to a control loop, so they get loss's budget
  (`max_too_late`, 1 %); late ones are still usable but stale, so a tenth of them may be
  (`max_late`, 10 %) before the configuration is called unsustained.
- **growth**: no growing queue. The trend of latency against send time over the whole
  trial (`analysis/trend.py`: Theil-Sen on binned medians, with a 90 % interval) may add
  at most `(growth_factor - 1)` times the starting latency plus `growth_floor_us`
  (the floor keeps microsecond jitter on a fast path from reading as growth). The rule
  fails only when the interval's lower end is above that: growth must be shown, not
  merely possible.
- **send lag**: at most `max_too_late` of the sends left more than `max_send_lag_periods`
  (1) periods after their deadline: a sender a whole period behind sends two messages
  back to back, so the rate offered is not the rate asked.
- **p99** (off unless `max_p99_us` is set): a ceiling on the 99th percentile latency,
  judged from 100 received messages up, for an application's own requirement.

The shares (late, too late, lagging sends) are judged by the lower end of their 95 %
one-sided Wilson interval: 2 late messages of 15 is 13 %, but not evidence that more than
a tenth of such a stream would be late. The figure gives the share and that bound.

A rule with too little data to decide (no period, too few messages for a trend) is
"not judged" and does not fail the trial; the report says so.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import numpy as np
import numpy.typing as npt
from pydantic import ValidationError

from roboscale.analysis.trend import Trend, latency_trend
from roboscale.errors import UserError
from roboscale.records.models import RuleRecord, VerdictRecord
from roboscale.spec.schema import VerdictSettings

FloatArray = npt.NDArray[np.float64]
P99_MIN_SAMPLES = 100
Z95_ONE_SIDED = 1.6448536269514722


def share_low(count: int, n: int, z: float = Z95_ONE_SIDED) -> float:
    """The lower end of the Wilson score interval of a share `count / n`."""
    if n == 0:
        return 0.0
    p = count / n
    centre = p + z * z / (2 * n)
    spread = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + z * z / n))


@dataclass(frozen=True)
class Thresholds:
    min_rate_ratio: float = 0.95
    max_loss: float = 0.01
    late_share: float = 0.2
    late_cap_ms: float = 5.0
    too_late_cap_ms: float = 50.0
    max_late: float = 0.10
    max_too_late: float = 0.01
    growth_factor: float = 2.0
    growth_floor_us: float = 200.0
    max_send_lag_periods: float = 1.0
    max_p99_us: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: object, where: str) -> Thresholds:
        """Thresholds stored in a summary; a malformed entry is a clear error, not a crash."""
        if raw is None:
            return cls()
        names = ", ".join(cls.__dataclass_fields__)
        if not isinstance(raw, dict) or not set(raw) <= set(cls.__dataclass_fields__):
            raise UserError(f"{where}: field 'thresholds' must map some of {names}, got {raw!r}")
        try:  # the same fields, types and ranges as a spec's verdict section
            checked = VerdictSettings.model_validate(raw)
        except ValidationError as e:
            first = e.errors()[0]
            loc = ".".join(map(str, first["loc"]))
            raise UserError(
                f"{where}: thresholds.{loc}: {first['msg']}, got {first.get('input')!r}"
            ) from None
        return cls(**checked.model_dump())

    def describe(self) -> str:
        text = (
            f"achieved rate >= {self.min_rate_ratio:.0%} of target; loss <= {self.max_loss:.1%}; "
            f"late (> {self.late_share:g} x period, at most {self.late_cap_ms:g} ms) <= "
            f"{self.max_late:.0%}; too late (> period, at most {self.too_late_cap_ms:g} ms) <= "
            f"{self.max_too_late:.0%} (both bounds doubled for round trips); latency trend over "
            f"the trial adds <= {self.growth_factor - 1:g} x starting latency + "
            f"{self.growth_floor_us:g} µs (90 % interval); sends more than "
            f"{self.max_send_lag_periods:g} period behind <= {self.max_too_late:.0%}"
        )
        if self.max_p99_us is not None:
            text += f"; p99 latency <= {self.max_p99_us:g} µs"
        return text

    def bounds_us(self, period_s: float, round_trip: bool) -> tuple[float, float]:
        """The late and too-late bounds of one message, in µs."""
        period_us = period_s * 1e6
        late = min(self.late_share * period_us, self.late_cap_ms * 1e3)
        too_late = min(period_us, self.too_late_cap_ms * 1e3)
        hops = 2 if round_trip else 1
        return late * hops, too_late * hops


@dataclass(frozen=True)
class Rule:
    """One rule's outcome: whether it held (True when not judged), whether it was judged,
    the figure in words, and the measured value against its limit."""

    rule: str
    ok: bool
    judged: bool
    figure: str
    value: float | None = None
    limit: float | None = None


@dataclass(frozen=True)
class Trace:
    """What the rules look at: every message's send time and latency (NaN when lost),
    every send's lag behind its deadline, the stream's period (None when unknown) and
    whether the latency is a round trip."""

    t_sent_ns: FloatArray
    latency_us: FloatArray
    send_lag_us: FloatArray
    period_s: float | None
    round_trip: bool


@dataclass(frozen=True)
class Verdict:
    sustained: bool
    rate_ratio: float
    loss: float
    rules: tuple[Rule, ...] = ()
    trend: dict[str, float] | None = field(default=None)

    def failed(self) -> list[Rule]:
        return [r for r in self.rules if not r.ok]

    def reasons(self) -> list[str]:
        """Why a trial is not sustained: each failed rule's figure, for reports."""
        return [r.figure for r in self.failed()]

    def not_judged(self) -> list[str]:
        return [r.rule for r in self.rules if not r.judged]

    def record(self) -> VerdictRecord:
        """As a summary entry keeps it."""
        return VerdictRecord(
            sustained=self.sustained,
            rate_ratio=self.rate_ratio,
            loss=self.loss,
            rules=[RuleRecord(**asdict(r)) for r in self.rules],
            trend=self.trend,
        )

    @classmethod
    def from_dict(cls, raw: Mapping[str, object]) -> Verdict:
        """A stored verdict as JSON holds it (checked by its model)."""
        return cls.from_record(VerdictRecord.model_validate(dict(raw)))

    @classmethod
    def from_record(cls, rec: VerdictRecord) -> Verdict:
        """A stored verdict; one of the format before the rules (rate_ok, loss_ok,
        growth_ok, latency_ok and quarter medians) is read into rules of the same names."""
        if rec.rules is not None:
            rules = tuple(Rule(**r.model_dump(include=_RULE_FIELDS)) for r in rec.rules)
            return cls(bool(rec.sustained), rec.rate_ratio, rec.loss, rules, rec.trend)
        old = rec.model_extra or {}

        def number(key: str) -> float:
            value = old.get(key)
            return float(value) if isinstance(value, int | float) else 0.0

        checks = [
            ("rate", "rate_ok", f"rate {rec.rate_ratio:.0%} of target"),
            ("loss", "loss_ok", f"loss {rec.loss:.1%}"),
            ("growth", "growth_ok", "latency grew "
             f"{number('first_quarter_p50_us'):.0f} -> {number('last_quarter_p50_us'):.0f} µs"),
            ("p99", "latency_ok", f"p99 latency {number('p99_us'):.0f} µs over the ceiling"),
        ]  # fmt: skip
        rules = tuple(Rule(name, bool(old.get(ok, True)), True, text) for name, ok, text in checks)
        return cls(bool(rec.sustained), rec.rate_ratio, rec.loss, rules)


_RULE_FIELDS = {"rule", "ok", "judged", "figure", "value", "limit"}


def judge(th: Thresholds, trace: Trace, rate_ratio: float, loss: float) -> Verdict:
    """Apply every rule. A sender ahead of schedule counts as on target, and so does a
    rate that could not be measured."""
    rate_ratio = min(rate_ratio, 1.0) if math.isfinite(rate_ratio) else 1.0
    trend = latency_trend(trace.t_sent_ns, trace.latency_us)
    rules = (
        Rule("rate", rate_ratio >= th.min_rate_ratio, True,
             f"achieved {rate_ratio:.1%} of the target rate (at least "
             f"{th.min_rate_ratio:.0%})", rate_ratio, th.min_rate_ratio),
        Rule("loss", loss <= th.max_loss, True,
             f"lost {loss:.2%} of messages (at most {th.max_loss:.1%})", loss, th.max_loss),
        *_lateness(th, trace),
        _growth(th, trend),
        _send_lag(th, trace),
        *_p99(th, trace),
    )  # fmt: skip
    return Verdict(
        sustained=all(r.ok for r in rules),
        rate_ratio=rate_ratio,
        loss=loss,
        rules=rules,
        trend=None if trend is None else _trend_dict(trend),
    )


def _trend_dict(t: Trend) -> dict[str, float]:
    return {
        "slope_us_per_s": t.slope_us_per_s,
        "slope_low": t.slope_low,
        "slope_high": t.slope_high,
        "start_us": t.start_us,
        "duration_s": t.duration_s,
        "bins": float(t.bins),
    }


def _ms(us: float) -> str:
    if abs(us) >= 1e6:
        return f"{us / 1e6:.3g} s"
    if abs(us) >= 1000:
        return f"{us / 1e3:.3g} ms"
    return f"{round(us) or 0:.0f} µs"  # never "-0 µs"


def _lateness(th: Thresholds, trace: Trace) -> list[Rule]:
    got = trace.latency_us[~np.isnan(trace.latency_us)]
    if trace.period_s is None or got.size == 0:
        why = "no period" if trace.period_s is None else "no message arrived"
        return [Rule("late", True, False, f"late: not judged ({why})"),
                Rule("too_late", True, False, f"too late: not judged ({why})")]  # fmt: skip
    late_us, too_late_us = th.bounds_us(trace.period_s, trace.round_trip)
    kind = "round trips" if trace.round_trip else "messages"
    late = _share_rule(
        "late",
        int(np.count_nonzero(got > late_us)),
        got.size,
        th.max_late,
        f"of {kind} late",
        f"> {_ms(late_us)}",
    )
    too_late = _share_rule(
        "too_late",
        int(np.count_nonzero(got > too_late_us)),
        got.size,
        th.max_too_late,
        f"of {kind} too late",
        f"> {_ms(too_late_us)}",
    )
    return [late, too_late]  # fmt: skip


def _share_rule(name: str, count: int, n: int, limit: float, what: str, bound: str) -> Rule:
    """A share rule: fails when the share's lower bound is above the limit."""
    low = share_low(count, n)
    figure = f"{count / n:.1%} {what} ({bound}; at most {limit:.0%}, lower bound {low:.1%})"
    return Rule(name, low <= limit, True, figure, low, limit)


def _growth(th: Thresholds, trend: Trend | None) -> Rule:
    if trend is None:
        return Rule("growth", True, False, "growth: not judged (too few messages for a trend)")
    limit = (th.growth_factor - 1.0) * trend.start_us + th.growth_floor_us
    ok = trend.added_low_us <= limit
    figure = (
        f"latency trend adds {_ms(trend.added_us)} [{_ms(trend.added_low_us)}, "
        f"{_ms(trend.added_high_us)}] over {trend.duration_s:.3g} s (at most {_ms(limit)})"
    )
    return Rule("growth", ok, True, figure, trend.added_low_us, limit)


def _send_lag(th: Thresholds, trace: Trace) -> Rule:
    lag = trace.send_lag_us[~np.isnan(trace.send_lag_us)]
    if trace.period_s is None or lag.size == 0:
        return Rule("send_lag", True, False, "send lag: not judged (no period or no send)")
    bound = th.max_send_lag_periods * trace.period_s * 1e6
    count = int(np.count_nonzero(lag > bound))
    return _share_rule(
        "send_lag",
        count,
        lag.size,
        th.max_too_late,
        "of sends late",
        f"more than {_ms(bound)} behind their deadline",
    )


def _p99(th: Thresholds, trace: Trace) -> list[Rule]:
    if th.max_p99_us is None:
        return []
    got = trace.latency_us[~np.isnan(trace.latency_us)]
    if got.size < P99_MIN_SAMPLES:
        return [Rule("p99", True, False, f"p99: not judged ({got.size} messages, needs 100)")]
    p99 = float(np.percentile(got, 99))
    figure = f"p99 latency {_ms(p99)} (at most {_ms(th.max_p99_us)})"
    return [Rule("p99", p99 <= th.max_p99_us, True, figure, p99, th.max_p99_us)]


def period_of(t_intended_ns: FloatArray, rate_hz: float | None) -> float | None:
    """The stream's period: the target rate's, else the median gap between deadlines."""
    if rate_hz is not None and rate_hz > 0:
        return 1.0 / rate_hz
    deadlines = np.unique(t_intended_ns[~np.isnan(t_intended_ns)])
    if deadlines.size < 2:
        return None
    gap = float(np.median(np.diff(deadlines)))
    return gap / 1e9 if gap > 0 else None
