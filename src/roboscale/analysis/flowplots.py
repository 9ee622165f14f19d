"""Figures of the one-way workloads (lab report, seed 003): box plots and mean with an 80 %
confidence interval per message size, a series per listener count, per ping mode or per
chain hop (plus end to end). Same conventions as plots.py: Figure objects, None when
the run holds no such trial."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from roboscale.analysis.oneway import series
from roboscale.analysis.plots import (
    COLORS,
    MAX_PANELS,
    RecordsOf,
    _boxes,
    _grid,
    _patch,
    _size_label,
)
from roboscale.analysis.stats import FloatArray, distribution
from roboscale.analysis.tables import env_label
from roboscale.records.models import OneWayEntry, SummaryEntry

Panel = tuple[str, str, float, str]  # backend, workload, rate, environment
Pooled = dict[Panel, dict[str, dict[int, FloatArray]]]  # panel -> series -> size -> values


def flow_entries(entries: Sequence[SummaryEntry]) -> list[OneWayEntry]:
    """Finished one-way trials that received something."""
    return [e for e in entries if isinstance(e, OneWayEntry) and e.received]


def _order(label: str) -> tuple[int, str]:
    """Series in a readable order: listener counts and hops by number, end to end last."""
    head = label.split()[1] if label.startswith("hop ") else label.split()[0]
    number = int(head) if head.isdigit() else 10_000
    return (number, label)


def pooled(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> Pooled:
    """Each panel's latencies by series and size, pooled over runs."""
    out: Pooled = {}
    for e in flow_entries(entries):
        table = records_of(e.trial)
        if table is None:
            continue
        panel = (e.backend, e.workload, e.rate_hz, env_label(e))
        size = e.payload_bytes
        for label, values in series(e, table).items():
            by_size = out.setdefault(panel, {}).setdefault(label, {})
            by_size[size] = np.concatenate([by_size.get(size, np.zeros(0)), values])
    return out


def _title(panel: Panel) -> str:
    backend, workload, rate, env = panel
    return " ".join(p for p in (backend, workload, f"{rate:g} Hz", env) if p)


def _sizes(lines: dict[str, dict[int, FloatArray]]) -> list[int]:
    return sorted({s for by_size in lines.values() for s in by_size})


def _panels(
    entries: Sequence[SummaryEntry], records_of: RecordsOf
) -> tuple[Figure, list[tuple[Any, Panel, dict[str, dict[int, FloatArray]]]]] | None:
    """The figure and, per panel (backend, workload, rate, environment), its axes and its
    series by size; None when the run holds no one-way trial."""
    data = pooled(entries, records_of)
    if not data:
        return None
    panels = sorted(data)[:MAX_PANELS]
    fig, axes = _grid(len(panels), width=6.4)
    return fig, [(ax, panel, data[panel]) for ax, panel in zip(axes, panels, strict=True)]


def flow_boxes(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> Figure | None:
    """Box plots per message size, a box per series (listener count, ping mode, hop)."""
    drawn = _panels(entries, records_of)
    if drawn is None:
        return None
    fig, panels = drawn
    for ax, panel, lines in panels:
        labels = sorted(lines, key=_order)
        sizes = _sizes(lines)
        width = 0.8 / len(labels)
        for i, label in enumerate(labels):
            at = [(s, lines[label][size]) for s, size in enumerate(sizes) if size in lines[label]]
            at = [(s, v) for s, v in at if v.size]
            if at:
                pos = [s + (i - (len(labels) - 1) / 2) * width for s, _ in at]
                _boxes(ax, [v for _, v in at], pos, width, COLORS[i % len(COLORS)])
        ax.set_xticks(range(len(sizes)), [_size_label(s) for s in sizes], fontsize=8)
        ax.set(yscale="log", ylabel="latency (µs)", title=_title(panel))
        ax.grid(alpha=0.3, axis="y", which="both")
        handles = [_patch(COLORS[i % len(COLORS)]) for i in range(len(labels))]
        ax.legend(handles, labels, fontsize=7)
    return fig


def mean_ci80(values: FloatArray) -> tuple[float, float]:
    """Mean and the half-width of its 80 % confidence interval (stats.distribution's)."""
    d = distribution(values)
    if d.mean is None or d.ci80_high is None:
        return math.nan, 0.0
    return d.mean, d.ci80_high - d.mean


def flow_means(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> Figure | None:
    """Mean latency with its 80 % confidence interval per size, a line per series."""
    drawn = _panels(entries, records_of)
    if drawn is None:
        return None
    fig, panels = drawn
    for ax, panel, lines in panels:
        sizes = _sizes(lines)
        for i, label in enumerate(sorted(lines, key=_order)):
            xs = [s for s, size in enumerate(sizes) if size in lines[label]]
            stats = [mean_ci80(lines[label][sizes[x]]) for x in xs]
            ax.errorbar(
                xs,
                [m for m, _ in stats],
                yerr=[h for _, h in stats],
                marker="o",
                capsize=3,
                color=COLORS[i % len(COLORS)],
                label=label,
            )
        ax.set_xticks(range(len(sizes)), [_size_label(s) for s in sizes], fontsize=8)
        ax.set(yscale="log", ylabel="mean latency, CI80 (µs)", title=_title(panel))
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7)
    return fig


def flow_boxes_interactive(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> Any:
    """Per panel (backend, workload, rate, environment): a box per series (listener count,
    ping mode, hop, end to end) at each payload size; quartiles, whiskers p1 to p99."""
    from plotly import graph_objects as go

    from roboscale.analysis.interactive import _layout

    data = pooled(entries, records_of)
    if not data:
        return None
    fig = go.Figure()
    for p, panel in enumerate(sorted(data)[:MAX_PANELS]):
        lines = data[panel]
        for i, label in enumerate(sorted(lines, key=_order)):
            sizes = [s for s in _sizes(lines) if s in lines[label] and lines[label][s].size]
            if not sizes:
                continue
            st = np.array([np.percentile(lines[label][s], [1, 25, 50, 75, 99]) for s in sizes])
            fig.add_trace(go.Box(
                x=[f"{_size_label(s)}" for s in sizes], lowerfence=st[:, 0], q1=st[:, 1],
                median=st[:, 2], q3=st[:, 3], upperfence=st[:, 4], boxpoints=False,
                name=f"{_title(panel)}: {label}", legendgroup=_title(panel),
                marker={"color": COLORS[(p * 3 + i) % len(COLORS)]},
            ))  # fmt: skip
    fig.update_layout(boxmode="group")
    fig.update_yaxes(type="log", title="latency (µs, log)")
    fig.update_xaxes(title="payload size")
    return _layout(fig, "One-way latency by payload size (quartiles; whiskers p1 to p99)")
