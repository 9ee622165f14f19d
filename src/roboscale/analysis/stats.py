"""Per-trial statistics from the record table: counts, rates, RTT percentiles, CI80.

Every figure is computed from the rows themselves: a lost message is a row with
no `t_received`, so loss is counted, never inferred from what arrived.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from roboscale.analysis.verdict import Thresholds, Verdict, judge
from roboscale.workloads.base import workload_of

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

# Two-sided 80 % interval of a mean under the normal approximation (z at 0.90).
# Trials hold hundreds of samples or more, where Student's t differs by < 1 %.
Z80 = 1.2815515655446004
PERCENTILES = {"p50": 50.0, "p90": 90.0, "p99": 99.0, "p999": 99.9}


def column(table: pa.Table, name: str) -> FloatArray:
    """A column as float64 with NaN where the value is null (never arrived)."""
    arr: FloatArray = table.column(name).to_numpy(zero_copy_only=False).astype(np.float64)
    return arr


def distribution(values_us: FloatArray) -> dict[str, float | None]:
    """Percentiles, max, mean, std (ddof=1) and the 80 % confidence interval of the mean."""
    v = values_us[~np.isnan(values_us)]
    keys = [*PERCENTILES, "max", "mean", "std", "ci80_low", "ci80_high"]
    if v.size == 0:
        return dict.fromkeys(keys, None)
    out: dict[str, float | None] = {k: float(np.percentile(v, q)) for k, q in PERCENTILES.items()}
    mean = float(v.mean())
    std = float(v.std(ddof=1)) if v.size > 1 else 0.0
    half = Z80 * std / math.sqrt(v.size)
    out.update(max=float(v.max()), mean=mean, std=std, ci80_low=mean - half, ci80_high=mean + half)
    return out


def achieved_rate_hz(t_sent_ns: FloatArray) -> float | None:
    """Messages per second between the first and the last send; None below two sends."""
    if t_sent_ns.size < 2:
        return None
    span = float(t_sent_ns.max() - t_sent_ns.min())
    return (t_sent_ns.size - 1) / (span / 1e9) if span > 0 else math.inf


def quarter_medians(rtt_us: FloatArray) -> tuple[float | None, float | None]:
    """Median RTT of the first and the last quarter of received messages, in send order."""
    got = rtt_us[~np.isnan(rtt_us)]
    if got.size < 4:
        return None, None
    q = got.size // 4
    return float(np.median(got[:q])), float(np.median(got[-q:]))


def summarize_trial(
    table: pa.Table,
    params: dict[str, Any],
    th: Thresholds,
    nodes: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """One summary.json entry: the trial's parameters, its figures and its verdict, as the
    trial's workload summarizes its records and its nodes' headers."""
    return workload_of(params).summarize(table, params, th, nodes)


def summarize_round_trips(
    table: pa.Table, params: dict[str, Any], th: Thresholds
) -> dict[str, Any]:
    """A round-trip trial's entry: each sender's rows, `t_received` the reply back."""
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
    # A burst is sent back to back: it has no target rate to fall short of.
    burst = bool(params.get("burst"))
    ratio = min(measured) / float(params["rate_hz"]) if measured and not burst else 1.0
    first, last = _growth(senders, rtt)
    rtt_dist = distribution(rtt)
    verdict = judge(th, ratio, loss_of(sent, received), first, last, rtt_dist["p99"])
    figures = {
        "achieved_rate_hz": float(np.mean(measured)) if measured else None,
        "achieved_rate_min_hz": min(measured) if measured else None,
        "rtt_us": rtt_dist,
        "one_way_us": distribution(one_way),
        "send_lag_us": distribution(lag),
    }
    return trial_entry(params, th, sent, received, verdict, figures)


def loss_of(sent: int, received: int) -> float:
    """The share of messages never received; a trial that sent nothing lost everything."""
    return (sent - received) / sent if sent else 1.0


def trial_entry(
    params: dict[str, Any],
    th: Thresholds,
    sent: int,
    received: int,
    verdict: Verdict,
    figures: dict[str, Any],
) -> dict[str, Any]:
    """A summary.json entry, the same keys for every workload: parameters, counts, the
    workload's figures, the verdict and the thresholds it applied."""
    return {
        **params,
        "sent": sent,
        "received": received,
        "lost": sent - received,
        "loss": verdict.loss,
        **figures,
        "sustained": verdict.sustained,
        "verdict": verdict.to_dict(),
        "thresholds": th.to_dict(),
    }


def _sender_masks(table: pa.Table) -> list[npt.NDArray[np.bool_]]:
    nodes = np.asarray(table.column("node").to_pylist(), dtype=object)
    return [nodes == n for n in dict.fromkeys(nodes.tolist())]


def _growth(
    senders: list[npt.NDArray[np.bool_]], rtt_us: FloatArray
) -> tuple[float | None, float | None]:
    """Each sender's quarter medians, then the median of them over senders."""
    pairs = [quarter_medians(rtt_us[m]) for m in senders]
    firsts = [f for f, _ in pairs if f is not None]
    lasts = [la for _, la in pairs if la is not None]
    if not firsts or not lasts:
        return None, None
    return float(np.median(firsts)), float(np.median(lasts))


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
