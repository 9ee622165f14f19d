"""Per-trial statistics from the record table: counts, rates, latency percentiles.

Every figure is computed from the rows themselves: a lost message is a row with
no `t_received`, so loss is counted, never inferred from what arrived. A percentile is
stored only where the sample supports it (`uncertainty.min_samples`: p99 from 100
messages, p99.9 from 1,000), with `n` beside it so a reader can say why one is missing;
p50 and p99 carry their 95 % interval within the trial (`uncertainty.percentile`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from roboscale.analysis.uncertainty import min_samples, percentile
from roboscale.analysis.verdict import Thresholds, Trace, Verdict, judge, period_of
from roboscale.records.models import (
    Distribution,
    MeasuredEntry,
    NodeHeader,
    SummaryEntry,
    TrialParams,
)
from roboscale.workloads.base import workload_of

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Two-sided 80 % interval of a mean under the normal approximation (z at 0.90).
# Trials hold hundreds of samples or more, where Student's t differs by < 1 %.
Z80 = 1.2815515655446004
E = TypeVar("E", bound=MeasuredEntry)
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


def column(table: pa.Table, name: str) -> FloatArray:
    """A column as float64 with NaN where the value is null (never arrived)."""
    arr: FloatArray = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
    return arr


def distribution(values_us: FloatArray) -> Distribution:
    """Supported percentiles (None where too few messages), the 95 % intervals of p50 and
    p99, max, mean, std (ddof=1), the 80 % interval of the mean, and `n`."""
    v = values_us[~np.isnan(values_us)]
    if v.size == 0:
        return NOTHING_ARRIVED
    supported = {
        k: float(np.percentile(v, q)) if v.size >= min_samples(q) else None
        for k, q in PERCENTILES.items()
    }
    p50, p99 = percentile([v], 50.0), percentile([v], 99.0)
    mean = float(v.mean())
    std = float(v.std(ddof=1)) if v.size > 1 else 0.0
    half = Z80 * std / math.sqrt(v.size)
    return Distribution(
        p50=supported["p50"],
        p90=supported["p90"],
        p99=supported["p99"],
        p999=supported["p999"],
        max=float(v.max()),
        mean=mean,
        std=std,
        ci80_low=mean - half,
        ci80_high=mean + half,
        p50_low=p50.low,
        p50_high=p50.high,
        p99_low=p99.low,
        p99_high=p99.high,
        n=int(v.size),
    )


NOTHING_ARRIVED = Distribution(
    p50=None, p90=None, p99=None, p999=None, max=None, mean=None, std=None,
    ci80_low=None, ci80_high=None, n=0,
)  # fmt: skip


def achieved_rate_hz(t_sent_ns: FloatArray) -> float | None:
    """Messages per second between the first and the last send; None below two sends."""
    if t_sent_ns.size < 2:
        return None
    span = float(t_sent_ns.max() - t_sent_ns.min())
    return (t_sent_ns.size - 1) / (span / 1e9) if span > 0 else math.inf


def summarize_trial(
    table: pa.Table,
    params: TrialParams | Mapping[str, object],
    th: Thresholds,
    nodes: Sequence[NodeHeader] = (),
) -> SummaryEntry:
    """One summary.json entry: the trial's parameters, its figures and its verdict, as the
    trial's workload summarizes its records and its nodes' headers."""
    trial = params if isinstance(params, TrialParams) else TrialParams.model_validate(params)
    return workload_of(trial).summarize(table, trial, th, nodes)


def summarize_round_trips(table: pa.Table, params: TrialParams, th: Thresholds) -> Measured:
    """A round-trip trial's figures: each sender's rows, `t_received` the reply back."""
    table = table.sort_by([("node", "ascending"), ("seq", "ascending")])
    senders = _sender_masks(table)
    sent_ns, recv_ns = column(table, "t_sent"), column(table, "t_received")
    rtt = (recv_ns - sent_ns) / 1e3
    one_way = (column(table, "t_echoed") - sent_ns) / 1e3
    lag = (sent_ns - column(table, "t_intended")) / 1e3
    rates = [achieved_rate_hz(sent_ns[m]) for m in senders]
    measured = [r for r in rates if r is not None]
    sent = int(table.num_rows)
    received = int(np.count_nonzero(~np.isnan(recv_ns)))
    # A burst is sent back to back: it has no target rate to fall short of, nor a period
    # to be late against (the rules that need one say "not judged").
    burst = params.burst
    ratio = min(measured) / params.rate_hz if measured and not burst else 1.0
    period = None if burst else period_of(column(table, "t_intended"), params.rate_hz)
    trace = Trace(sent_ns, rtt, lag, period, round_trip=True)
    verdict = judge(th, trace, ratio, loss_of(sent, received))
    return Measured(
        params=params,
        thresholds=th,
        sent=sent,
        received=received,
        verdict=verdict,
        achieved_rate_hz=float(np.mean(measured)) if measured else None,
        achieved_rate_min_hz=min(measured) if measured else None,
        rtt_us=distribution(rtt),
        one_way_us=distribution(one_way),
        send_lag_us=distribution(lag),
    )


def loss_of(sent: int, received: int) -> float:
    """The share of messages never received; a trial that sent nothing lost everything."""
    return (sent - received) / sent if sent else 1.0


@dataclass(frozen=True)
class Measured:
    """What every workload's entry holds: the trial's parameters, its counts, figures and
    verdict, and the thresholds the verdict applied. `entry` makes it the workload's
    summary entry, with the workload's own fields."""

    params: TrialParams
    thresholds: Thresholds
    sent: int
    received: int
    verdict: Verdict
    achieved_rate_hz: float | None
    achieved_rate_min_hz: float | None
    rtt_us: Distribution
    one_way_us: Distribution
    send_lag_us: Distribution

    def entry(self, model: type[E], **workload_fields: object) -> E:
        """The summary entry of `model` (the workload's), its own fields given by name."""
        return model.model_validate(
            {
                **self.params.to_dict(),
                "sent": self.sent,
                "received": self.received,
                "lost": self.sent - self.received,
                "loss": self.verdict.loss,
                "achieved_rate_hz": self.achieved_rate_hz,
                "achieved_rate_min_hz": self.achieved_rate_min_hz,
                "rtt_us": self.rtt_us,
                "one_way_us": self.one_way_us,
                "send_lag_us": self.send_lag_us,
                "sustained": self.verdict.sustained,
                "verdict": self.verdict.record(),
                "thresholds": self.thresholds.to_dict(),
                **workload_fields,
            }
        )


def _sender_masks(table: pa.Table) -> list[npt.NDArray[np.bool_]]:
    nodes = np.asarray(table.column("node").to_pylist(), dtype=object)
    return [nodes == n for n in dict.fromkeys(nodes.tolist())]


def rtt_by_id(tables: list[pa.Table]) -> tuple[IntArray, FloatArray]:
    """Mean RTT per message id over runs and senders (the thesis's figures), NaN if all lost."""
    if not tables:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    table = pa.concat_tables(tables)
    seq = table.column("seq").to_numpy().astype(np.int64)
    rtt = (column(table, "t_received") - column(table, "t_sent")) / 1e3
    ids = np.unique(seq)
    index = np.searchsorted(ids, seq)
    got = ~np.isnan(rtt)
    sums = np.bincount(index[got], weights=rtt[got], minlength=ids.size)
    counts = np.bincount(index[got], minlength=ids.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        means: FloatArray = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    return ids, means
