"""The sustained verdict: can this configuration keep up, or is it falling behind?

A trial is sustained when (1) the slowest sender achieved at least
`min_rate_ratio` of the target rate, (2) at most `max_loss` of its messages were
lost, and (3) latency did not grow through the stream: the median RTT of the
last quarter of received messages is at most `growth_factor` times that of the
first quarter plus `growth_floor_us`. The floor keeps microsecond jitter on a
fast path from reading as growth; the factor catches queues that build up.

Optionally (4), the 99th percentile latency of the whole stream stays at most
`max_p99_us` (the round trip of an echo; the headline one-way latency of the
fan-out, ping and chain workloads). Growth alone misses a saturated host that has settled into a
standing queue: the rate holds, latency is flat, and messages wait tens of
milliseconds for their process to be scheduled. Near saturation that state comes
and goes from one run to the next, so "keeps up" is a coin toss; the tail
latency rises steadily with load instead, and a ceiling on it states what the
application needs (a 100 Hz control loop needs 99 % of its data within 10 ms).
It is off unless set, so the design's three-part verdict stays the default.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from pydantic import ValidationError

from roboscale.errors import UserError
from roboscale.spec.schema import VerdictSettings


@dataclass(frozen=True)
class Thresholds:
    min_rate_ratio: float = 0.95
    max_loss: float = 0.01
    growth_factor: float = 2.0
    growth_floor_us: float = 200.0
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
            field = ".".join(map(str, first["loc"]))
            raise UserError(
                f"{where}: thresholds.{field}: {first['msg']}, got {first.get('input')!r}"
            ) from None
        return cls(**checked.model_dump())

    def describe(self) -> str:
        text = (
            f"achieved rate >= {self.min_rate_ratio:.0%} of target, "
            f"loss <= {self.max_loss:.1%}, median RTT of the last quarter <= "
            f"{self.growth_factor:g} x first quarter + {self.growth_floor_us:g} us"
        )
        if self.max_p99_us is not None:
            text += f", 99th percentile latency <= {self.max_p99_us:g} us"
        return text


@dataclass(frozen=True)
class Verdict:
    sustained: bool
    rate_ok: bool
    loss_ok: bool
    growth_ok: bool
    rate_ratio: float
    loss: float
    first_quarter_p50_us: float | None
    last_quarter_p50_us: float | None
    latency_ok: bool = True  # results written before the ceiling existed lack it
    p99_us: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def reasons(self) -> list[str]:
        """Why a trial is not sustained, in words, for reports."""
        out = []
        if not self.rate_ok:
            out.append(f"rate {self.rate_ratio:.0%} of target")
        if not self.loss_ok:
            out.append(f"loss {self.loss:.1%}")
        if not self.growth_ok:
            out.append(
                f"latency grew {self.first_quarter_p50_us or 0:.0f} -> "
                f"{self.last_quarter_p50_us or 0:.0f} us"
            )
        if not self.latency_ok:
            out.append(f"99th percentile latency {self.p99_us or 0:.0f} us over the ceiling")
        return out


def judge(
    th: Thresholds,
    rate_ratio: float,
    loss: float,
    first_quarter_p50_us: float | None,
    last_quarter_p50_us: float | None,
    p99_us: float | None = None,
) -> Verdict:
    """Apply the thresholds; with too few replies to compare quarters, growth is not judged,
    and with no reply at all the latency ceiling is not (the loss check fails it). A sender
    ahead of schedule counts as on target, and so does a rate that could not be measured."""
    rate_ratio = min(rate_ratio, 1.0) if math.isfinite(rate_ratio) else 1.0
    rate_ok = rate_ratio >= th.min_rate_ratio
    loss_ok = loss <= th.max_loss
    if first_quarter_p50_us is None or last_quarter_p50_us is None:
        growth_ok = True
    else:
        limit = th.growth_factor * first_quarter_p50_us + th.growth_floor_us
        growth_ok = last_quarter_p50_us <= limit
    latency_ok = th.max_p99_us is None or p99_us is None or p99_us <= th.max_p99_us
    return Verdict(
        sustained=rate_ok and loss_ok and growth_ok and latency_ok,
        rate_ok=rate_ok,
        loss_ok=loss_ok,
        growth_ok=growth_ok,
        rate_ratio=rate_ratio,
        loss=loss,
        first_quarter_p50_us=first_quarter_p50_us,
        last_quarter_p50_us=last_quarter_p50_us,
        latency_ok=latency_ok,
        p99_us=p99_us,
    )
