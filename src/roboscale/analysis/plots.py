"""The report's figures, drawn from summary entries and per-message records.

Figures are built with `matplotlib.figure.Figure` directly (no pyplot state), so
reports render headless and in threads. Each function returns None when the
data have nothing to show on that figure (one rate, one size...).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

from roboscale.analysis.stats import FloatArray, column, rtt_by_id
from roboscale.analysis.tables import env_label
from roboscale.records.models import FailedEntry, MeasuredEntry, SummaryEntry, TrialParams

RecordsOf = Callable[[str], pa.Table | None]
E = TypeVar("E", bound=TrialParams)
K = TypeVar("K", bound=Hashable)
MAX_PANELS = 6
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b"]


def to_data_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def measured(entries: Sequence[SummaryEntry]) -> list[MeasuredEntry]:
    """The trials that finished (a failed trial has an error and no figures)."""
    return [e for e in entries if not isinstance(e, FailedEntry)]


def ok(entries: Sequence[SummaryEntry]) -> list[MeasuredEntry]:
    """Trials that produced records (a failed trial has an error and no figures). These
    figures draw round trips: the report passes the entries of workloads that have them."""
    return [e for e in measured(entries) if e.received > 0]


def series_key(e: TrialParams) -> tuple[str, str, int, str]:
    return (e.backend, e.payload, e.pairs, env_label(e))


def series_label(key: tuple[str, str, int, str]) -> str:
    backend, payload, pairs, env = key
    return " ".join(p for p in (backend, payload, f"x{pairs}" if pairs > 1 else "", env) if p)


def _group(entries: Sequence[E], key: Callable[[E], K]) -> dict[K, list[E]]:
    out: dict[K, list[E]] = {}
    for e in entries:
        out.setdefault(key(e), []).append(e)
    return out


def _grid(n: int, width: float = 5.2, height: float = 3.6) -> tuple[Figure, list[Any]]:
    cols = min(n, 2)
    rows = (n + cols - 1) // cols
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False).ravel().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def latency_by_id(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> Figure | None:
    """Thesis Figure 3.5: RTT against message id, one line per rate, mean over runs."""
    groups = _group(ok(entries), series_key)
    if not groups:
        return None
    keys = sorted(groups)[:MAX_PANELS]
    fig, axes = _grid(len(keys))
    for ax, key in zip(axes, keys, strict=True):
        by_rate = _group(groups[key], lambda e: float(e.rate_hz))
        for i, rate in enumerate(sorted(by_rate)):
            tables = [t for e in by_rate[rate] if (t := records_of(e.trial)) is not None]
            ids, mean = rtt_by_id(tables)
            label = _rate_text(rate, by_rate[rate])
            ax.plot(ids, mean, lw=0.8, color=COLORS[i % len(COLORS)], label=label)
        ax.set(title=series_label(key), xlabel="message id", ylabel="RTT (µs)", yscale="log")
        ax.legend(fontsize=7, ncol=2)
        ax.grid(alpha=0.3, which="both")
    return fig


def mean_vs_rate(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> Figure | None:
    """Mean RTT against target rate with one standard deviation; hollow = not sustained."""
    groups = _group(ok(entries), series_key)
    if not groups or all(len({e.rate_hz for e in g}) < 2 for g in groups.values()):
        return None
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.subplots()
    for i, key in enumerate(sorted(groups)):
        color = COLORS[i % len(COLORS)]
        by_rate = _group(groups[key], lambda e: float(e.rate_hz))
        rates = sorted(by_rate)
        pooled = [_pooled_rtt(by_rate[r], records_of) for r in rates]
        means = np.array([np.nanmean(p) if p.size else np.nan for p in pooled])
        stds = np.array([np.nanstd(p, ddof=1) if p.size > 1 else 0.0 for p in pooled])
        ax.errorbar(rates, means, yerr=stds, color=color, capsize=3, label=series_label(key))
        held = np.array([all(e.sustained for e in by_rate[r]) for r in rates])
        ax.scatter(np.array(rates)[~held], means[~held], s=60, facecolors="white", color=color)
    ax.set(xscale="log", yscale="log", xlabel="target rate (Hz)", ylabel="RTT mean ± std (µs)")
    ax.set_title("Mean round trip by rate (hollow: not sustained)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8)
    return fig


def _rate_text(rate: float, entries: Sequence[TrialParams]) -> str:
    """A rate as a plot names it: a replayed burst claims none."""
    return "burst" if any(e.burst for e in entries) else f"{rate:g} Hz"


def _pooled_rtt(entries: Sequence[TrialParams], records_of: RecordsOf) -> FloatArray:
    parts = []
    for e in entries:
        table = records_of(e.trial)
        if table is not None:
            rtt = (column(table, "t_received") - column(table, "t_sent")) / 1e3
            parts.append(rtt[~np.isnan(rtt)])
    return np.concatenate(parts) if parts else np.zeros(0)


def box_by_size(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> Figure | None:
    """Lab-report box plots: RTT per payload size, backends side by side, a panel per rate."""
    good = ok(entries)
    rates = sorted({float(e.rate_hz) for e in good})
    if not good:
        return None
    if len(rates) > MAX_PANELS:
        rates = [rates[int(i)] for i in np.linspace(0, len(rates) - 1, MAX_PANELS)]
    backends = sorted({e.backend for e in good})
    fig, axes = _grid(len(rates), width=6.0)
    for ax, rate in zip(axes, rates, strict=True):
        at_rate = [e for e in good if float(e.rate_hz) == rate]
        sizes = sorted({int(e.payload_bytes) for e in at_rate})
        width = 0.8 / len(backends)
        for b, backend in enumerate(backends):
            data, pos = [], []
            for s, size in enumerate(sizes):
                chosen = [e for e in at_rate if e.backend == backend and e.payload_bytes == size]
                if chosen:
                    data.append(_pooled_rtt(chosen, records_of))
                    pos.append(s + (b - (len(backends) - 1) / 2) * width)
            if data:
                _boxes(ax, data, pos, width, COLORS[b % len(COLORS)])
        ax.set_xticks(range(len(sizes)), [_size_label(s) for s in sizes], fontsize=8)
        ax.set(yscale="log", ylabel="RTT (µs)", title=_rate_text(rate, at_rate))
        ax.grid(alpha=0.3, axis="y", which="both")
    handles = [_patch(COLORS[b % len(COLORS)]) for b in range(len(backends))]
    fig.legend(handles, backends, loc="outside upper right", fontsize=8)
    return fig


def _boxes(ax: Any, data: list[FloatArray], pos: list[float], width: float, color: str) -> None:
    box = ax.boxplot(
        data, positions=pos, widths=width * 0.9, patch_artist=True, showfliers=True,
        flierprops={"markersize": 2, "alpha": 0.4}, manage_ticks=False,
    )  # fmt: skip
    for patch in box["boxes"]:
        patch.set(facecolor=color, alpha=0.45, edgecolor=color)
    for median in box["medians"]:
        median.set(color="black")


def _patch(color: str) -> Any:
    from matplotlib.patches import Patch

    return Patch(facecolor=color, alpha=0.45, edgecolor=color)


def _size_label(size: int) -> str:
    for unit, factor in (("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= factor:
            return f"{size / factor:.3g} {unit}"
    return f"{size} B"


def rate_and_loss(entries: Sequence[SummaryEntry]) -> Figure | None:
    """Where a configuration stops keeping up: achieved/target rate and loss by target rate."""
    groups = _group(measured(entries), series_key)
    if not groups or all(len({e.rate_hz for e in g}) < 2 for g in groups.values()):
        return None
    fig = Figure(figsize=(10, 3.8), layout="constrained")
    ax_rate, ax_loss = fig.subplots(1, 2)
    for i, key in enumerate(sorted(groups)):
        color = COLORS[i % len(COLORS)]
        by_rate = _group(groups[key], lambda e: float(e.rate_hz))
        rates = sorted(by_rate)
        ratio = [np.mean([(e.achieved_rate_min_hz or 0) / r for e in by_rate[r]]) for r in rates]
        loss = [np.mean([e.loss for e in by_rate[r]]) * 100 for r in rates]
        ax_rate.plot(rates, ratio, "o-", color=color, label=series_label(key))
        ax_loss.plot(rates, loss, "o-", color=color, label=series_label(key))
    ax_rate.set(xscale="log", xlabel="target rate (Hz)", ylabel="achieved / target (slowest)")
    ax_loss.set(xscale="log", xlabel="target rate (Hz)", ylabel="lost (%)")
    for ax in (ax_rate, ax_loss):
        ax.grid(alpha=0.3, which="both")
    ax_rate.legend(fontsize=8)
    return fig


def latency_vs_nodes(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> Figure | None:
    """Thesis Figure 4.4: mean RTT (log) against nodes (2 x pairs), a line per rate, with std."""
    return _against(
        entries, records_of, lambda e: 2 * int(e.pairs), "nodes (2 x pairs)",
        "Latency against node count (vertical scaling)", "pairs",
    )  # fmt: skip


def latency_vs_hosts(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> Figure | None:
    """Thesis Experiment 9: mean RTT against the number of hosts, a line per rate, with std."""
    return _against(
        entries, records_of, lambda e: int(e.hosts), "hosts",
        "Latency against host count (horizontal scaling)", "hosts",
    )  # fmt: skip


def _against(
    entries: Sequence[SummaryEntry],
    records_of: RecordsOf,
    x_of: Callable[[MeasuredEntry], int],
    xlabel: str,
    title: str,
    axis: str,
) -> Figure | None:
    good = ok(entries)
    if len({x_of(e) for e in good}) < 2:
        return None

    def line(e: MeasuredEntry) -> tuple[str, str, float, str]:
        env = env_label(e.model_copy(update={axis: 1}))
        return (e.backend, e.payload, float(e.rate_hz), env)

    lines = {k: _group(v, x_of) for k, v in _group(good, line).items()}
    if all(len(points) < 2 for points in lines.values()):
        return None  # every line is one point: the axis varies only with something else
    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.subplots()
    lowest: list[float] = []
    for i, key in enumerate(sorted(lines)):
        points = lines[key]
        xs = sorted(points)
        pooled = [_pooled_rtt(points[x], records_of) for x in xs]
        mean = np.array([p.mean() / 1e3 if p.size else np.nan for p in pooled])
        lowest.append(float(np.nanmin(mean)))
        std = np.array([p.std(ddof=1) / 1e3 if p.size > 1 else 0.0 for p in pooled])
        low = np.minimum(std, mean * 0.999)  # error bars stay above zero on a log axis
        backend, payload, rate, env = key
        shown = _rate_text(rate, [e for group in points.values() for e in group])
        label = " ".join(p for p in (backend, payload, shown, env) if p)
        ax.errorbar(xs, mean, yerr=[low, std], marker="o", capsize=3, label=label,
                    color=COLORS[i % len(COLORS)])  # fmt: skip
    ax.set(xlabel=xlabel, ylabel="RTT mean ± std (ms)", title=title)
    if axis == "pairs":
        ax.set_yscale("log")
        ax.set_xscale("log", base=2)
        # A std wider than the mean would reach towards zero on a log axis: the bars
        # run off the bottom instead of squashing the means into the top.
        ax.set_ylim(bottom=0.3 * min(lowest))
    else:
        ax.set_ylim(bottom=0)
    ax.set_xticks(sorted({x for points in lines.values() for x in points}))
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    return fig
