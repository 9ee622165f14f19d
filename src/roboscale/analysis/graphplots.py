"""The graph workload's report figures: per-path end-to-end latency and per-topic hop
latency and rate, backends side by side in one colour each (analysis/graph.py has the
records and the summary they draw from).

One row of panels per graph and environment (hosts, link, CPU quota) in the entries;
runs of one configuration are pooled. Latencies come from the record rows (`path|NAME`:
source send -> sink arrival of what was made from it; `topic|TOPIC|PUBLISHER|SUBSCRIBER`:
one hop), rates from the summary entries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from roboscale.analysis.graph import graph_entries, latencies_by_node
from roboscale.analysis.plots import COLORS, MAX_PANELS, RecordsOf
from roboscale.analysis.stats import FloatArray
from roboscale.analysis.tables import env_label
from roboscale.records.models import GraphEntry, SummaryEntry

ROW_INCHES = 0.32  # per box row: a label and a box per backend
# Horizontal boxes: `orientation` from Matplotlib 3.10, `vert` (deprecated there) before.
_MPL = tuple(int(part) for part in matplotlib.__version__.split(".")[:2])
HORIZONTAL: dict[str, str | bool] = (
    {"orientation": "horizontal"} if _MPL >= (3, 10) else {"vert": False}
)


def _groups(entries: Sequence[SummaryEntry]) -> dict[str, list[GraphEntry]]:
    """Entries by graph and environment, in first-seen order, at most MAX_PANELS."""
    out: dict[str, list[GraphEntry]] = {}
    for e in graph_entries(entries):
        key = " ".join(p for p in (Path(e.graph).stem, env_label(e)) if p)
        out.setdefault(key, []).append(e)
    return dict(list(out.items())[:MAX_PANELS])


def _pooled(
    entries: Sequence[GraphEntry], records_of: RecordsOf, kind: str
) -> dict[str, dict[str, FloatArray]]:
    """Latencies (µs) by backend, then by path or topic (`kind`), runs pooled."""
    parts: dict[str, dict[str, list[FloatArray]]] = {}
    for e in entries:
        table = records_of(e.trial)
        if table is None:
            continue
        mine = parts.setdefault(e.backend, {})
        for name, lat in latencies_by_node(table, kind).items():
            mine.setdefault(name, []).append(lat[~np.isnan(lat)])
    return {b: {n: np.concatenate(v) for n, v in by.items()} for b, by in parts.items()}


def _boxes(ax: Any, names: list[str], data: dict[str, dict[str, FloatArray]], colors: Any) -> None:
    """Horizontal boxes: a row per name (top to bottom), one box per backend in it."""
    backends = [b for b in colors if b in data]
    height = 0.8 / max(1, len(backends))
    for b, backend in enumerate(backends):
        rows = [(i, data[backend].get(name)) for i, name in enumerate(names)]
        kept = [(i, v) for i, v in rows if v is not None and v.size]
        if not kept:
            continue
        pos = [i + (b - (len(backends) - 1) / 2) * height for i, _ in kept]
        box = ax.boxplot(
            [v for _, v in kept], positions=pos, widths=height * 0.9, **HORIZONTAL,
            patch_artist=True, flierprops={"markersize": 2, "alpha": 0.4}, manage_ticks=False,
        )  # fmt: skip
        for patch in box["boxes"]:
            patch.set(facecolor=colors[backend], alpha=0.45, edgecolor=colors[backend])
        for median in box["medians"]:
            median.set(color="black")
    ax.set_yticks(range(len(names)), names, fontsize=8)
    ax.set_ylim(len(names) - 0.5, -0.5)
    ax.set_xscale("log")
    low, high = ax.get_xlim()
    decades = np.log10(high / low) if low > 0 else 9.0
    # Written out (50, 200, 10000): 1-2-3-5 within about a decade, 1-2-5 up to three, else
    # the powers of ten only.
    digits = "1235" if decades < 1.5 else "125" if decades < 3 else "1"
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _: _tick(x, digits)))
    ax.xaxis.set_minor_formatter(FuncFormatter(lambda x, _: _tick(x, digits)))
    ax.grid(alpha=0.3, axis="x", which="both")


def _tick(x: float, digits: str) -> str:
    """`x` written out when its leading digit is one of `digits`, else no label."""
    return f"{x:g}" if f"{x:e}"[0] in digits else ""


def _colors(entries: Sequence[GraphEntry]) -> dict[str, str]:
    backends = sorted({e.backend for e in entries})
    return {b: COLORS[i % len(COLORS)] for i, b in enumerate(backends)}


def _legend(fig: Figure, colors: dict[str, str]) -> None:
    handles = [Patch(facecolor=c, alpha=0.45, edgecolor=c) for c in colors.values()]
    fig.legend(handles, list(colors), loc="outside upper right", fontsize=8)


@dataclass
class Panels:
    """A figure with a row of panels per graph and environment: its entries and the
    names (paths or topics) on its y axis, the backends' colours."""

    fig: Figure
    rows: list[tuple[str, list[GraphEntry], list[str], Any]]  # key, entries, names, axes
    colors: dict[str, str]


def _panels(entries: Sequence[SummaryEntry], what: str, width: float, cols: int) -> Panels | None:
    """Panels for the `what` ("paths" or "topics") of the summary entries, or None."""
    groups = _groups(entries)

    def named(e: GraphEntry) -> list[str]:
        return [p.path for p in e.paths] if what == "paths" else [c.topic for c in e.topics]

    names = [list(dict.fromkeys(n for e in g for n in named(e))) for g in groups.values()]
    if not any(names):
        return None
    colors = _colors([e for g in groups.values() for e in g])
    height = 1.2 + ROW_INCHES * len(colors) * sum(len(n) for n in names)
    fig = Figure(figsize=(width, height), layout="constrained")
    axes = fig.subplots(len(groups), cols, squeeze=False, width_ratios=[3, 2][:cols],
                        height_ratios=[max(1, len(n)) for n in names])  # fmt: skip
    rows = [(k, g, n, ax) for (k, g), n, ax in zip(groups.items(), names, axes, strict=True)]
    _legend(fig, colors)
    return Panels(fig, rows, colors)


def path_latency(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> Figure | None:
    """End-to-end latency of each measured path, a box per backend."""
    panels = _panels(entries, "paths", 8, 1)
    if panels is None:
        return None
    for key, group, names, (ax,) in panels.rows:
        _boxes(ax, names, _pooled(group, records_of, "path"), panels.colors)
        ax.set(title=key, xlabel="end-to-end latency (µs), source send -> sink arrival")
    return panels.fig


def topic_latency_and_rate(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> Figure | None:
    """Per topic: its hops' latency (every publisher -> subscriber delivery pooled), a box
    per backend, and beside it the rate its publishers achieved together."""
    panels = _panels(entries, "topics", 11, 2)
    if panels is None:
        return None
    for key, group, names, (ax_lat, ax_rate) in panels.rows:
        _boxes(ax_lat, names, _pooled(group, records_of, "topic"), panels.colors)
        ax_lat.set(title=key, xlabel="hop latency (µs), publisher send -> subscriber arrival")
        _rate_bars(ax_rate, names, group, panels.colors)
        ax_rate.sharey(ax_lat)
        ax_rate.tick_params(labelleft=False)
    return panels.fig


def _rate_bars(
    ax: Any, names: list[str], group: Sequence[GraphEntry], colors: dict[str, str]
) -> None:
    """Each topic's achieved rate (its publishers' sends per second, summed; runs
    averaged), a bar per backend."""
    backends = [b for b in colors if any(e.backend == b for e in group)]
    height = 0.8 / max(1, len(backends))
    for b, backend in enumerate(backends):
        runs = [topic_rates(e) for e in group if e.backend == backend]
        rates = [np.mean([r.get(n, 0.0) for r in runs]) for n in names]
        pos = [i + (b - (len(backends) - 1) / 2) * height for i in range(len(names))]
        ax.barh(pos, rates, height=height * 0.9, color=colors[backend], alpha=0.7)
    ax.set(xlabel="achieved rate (Hz)")
    ax.grid(alpha=0.3, axis="x")


def topic_rates(entry: GraphEntry) -> dict[str, float]:
    """A trial's rate per topic: each publisher's achieved rate once (a summary row is a
    publisher and subscriber pair), summed over the topic's publishers."""
    seen: dict[tuple[str, str], float] = {}
    for c in entry.topics:
        seen[c.topic, c.publisher] = c.rate_hz or 0.0
    out: dict[str, float] = {}
    for (topic, _), rate in seen.items():
        out[topic] = out.get(topic, 0.0) + rate
    return out
