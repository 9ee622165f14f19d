"""The report's interactive figures (Plotly): hover, zoom and legend toggles on each.

Plotly rather than Bokeh: one JavaScript file (plotly.min.js, included once in the page
by `analysis/report.py`) draws every figure from JSON, so the report stays a single
offline file, and the Python side builds figures as data, without a server or a
browser. Conventions, after the issue that asked for them:

- latency axes are logarithmic and carry no error bars (an interval below zero cannot be
  drawn on them); intervals are in the hover text and the tables;
- the achieved-rate axis runs from 0 to just above 1 and the loss axis from 0 to at least
  1 %, so a 0.07 % shortfall looks like one;
- every series is drawn with markers as well as lines, and the smaller ones last, so a
  short trial is never hidden under a long one;
- plots of many records are downsampled (`downsample`), keeping each bin's extremes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from plotly import graph_objects as go
from plotly.subplots import make_subplots

from roboscale.analysis.headline import fmt_us, latency_us, workload_label
from roboscale.analysis.plots import COLORS, series_key, series_label
from roboscale.analysis.stats import FloatArray, column
from roboscale.analysis.tables import env_label, rate_label
from roboscale.records.models import (
    Distribution,
    FailedEntry,
    GraphEntry,
    MeasuredEntry,
    NodeHeader,
    OneWayEntry,
    SummaryEntry,
    TrialParams,
)
from roboscale.workloads.base import FigureSpec

RecordsOf = Callable[[str], pa.Table | None]
MAX_POINTS = 2000  # per trace of a timeline: 1,000 bins, each keeping its min and max
CDF_POINTS = 300  # per line, fewer when there are many (CDF_BUDGET over all lines)
CDF_BUDGET = 30_000
MAX_TIMELINES = 24  # trials in the timeline's menu (the unsustained ones first)
HEIGHT = 420
LINES: tuple[tuple[Literal["p50", "p99"], str], ...] = (("p50", "solid"), ("p99", "dot"))


def downsample(x: FloatArray, y: FloatArray, max_points: int = MAX_POINTS) -> tuple[
    FloatArray, FloatArray]:  # fmt: skip
    """At most `max_points` of (x, y) in x order: consecutive bins, each keeping its lowest
    and its highest y, so spikes and dips survive."""
    keep = ~np.isnan(y) & ~np.isnan(x)
    x, y = x[keep], y[keep]
    if x.size <= max_points:
        return x, y
    order = np.argsort(x, kind="stable")
    x, y = x[order], y[order]
    bins = max_points // 2
    edges = np.linspace(0, x.size, bins + 1).astype(np.int64)
    picks = []
    for a, b in itertools.pairwise(edges):
        part = y[a:b]
        lo, hi = a + int(np.argmin(part)), a + int(np.argmax(part))
        picks += sorted({lo, hi})
    idx = np.asarray(picks)
    return x[idx], y[idx]


def _layout(fig: go.Figure, title: str, height: int = HEIGHT) -> go.Figure:
    fig.update_layout(
        title={"text": title, "x": 0.01},
        height=height,
        margin={"l": 60, "r": 20, "t": 50, "b": 50},
        legend={"font": {"size": 10}},
        template="plotly_white",
        hovermode="closest",
    )
    return fig


def ok(entries: Sequence[SummaryEntry]) -> list[MeasuredEntry]:
    return [e for e in entries if not isinstance(e, FailedEntry) and e.received > 0]


def _key(e: TrialParams) -> tuple[str, str, int, str, str]:
    """A series: backend, payload, pairs, environment and the workload's own axes."""
    return (*series_key(e), workload_label(e))


def _name(key: tuple[str, str, int, str, str]) -> str:
    return " ".join(p for p in (series_label(key[:4]), key[4]) if p)


def _label(e: TrialParams) -> str:
    return f"{_name(_key(e))} {rate_label(e)}" + (f" run {e.run}" if e.run else "")


def _kind(entries: Sequence[TrialParams]) -> str:
    return "round trip" if all(e.workload == "echo" for e in entries) else "latency"


def latency_cdf(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> go.Figure | None:
    """The share of messages at or below each latency, a line per configuration (runs
    pooled), each line at most CDF_POINTS quantiles (the minimum and maximum kept)."""
    good = ok(entries)
    if not good:
        return None
    configs: dict[tuple[str, int, float, str, int, str, str], list[MeasuredEntry]] = {}
    for e in good:
        key = (e.backend, e.payload_bytes, e.rate_hz, *_key(e)[1:])
        configs.setdefault(key, []).append(e)
    fig = go.Figure()
    points = max(20, min(CDF_POINTS, CDF_BUDGET // len(configs)))
    probs = np.linspace(0, 1, points)
    backends = sorted({e.backend for e in good})
    for key in sorted(configs):
        group = configs[key]
        parts = [latency_us(e, t) for e in group if (t := records_of(e.trial)) is not None]
        lat = np.concatenate(parts) if parts else np.zeros(0)
        lat = lat[~np.isnan(lat)]
        if lat.size == 0:
            continue
        xs = np.quantile(lat, probs) if lat.size > points else np.sort(lat)
        ys = probs if lat.size > points else np.arange(1, lat.size + 1) / lat.size
        e = group[0]
        label = f"{_name(_key(e))} {rate_label(e)}" + (
            f" ({len(group)} runs)" if len(group) > 1 else "")  # fmt: skip
        color = COLORS[backends.index(e.backend) % len(COLORS)]
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="lines", name=label, legendgroup=e.backend,
            line={"color": color, "width": 1.2, "dash": _dash(e, good)},
            hovertemplate="%{x:.4g} µs: %{y:.1%}<extra>" + label + "</extra>",
        ))  # fmt: skip
    fig.update_xaxes(type="log", title=f"{_kind(good)} (µs, log)")
    fig.update_yaxes(range=[0, 1.01], title="share of messages at or below", tickformat=".0%")
    return _layout(fig, f"Latency CDF per configuration ({_kind(good)})")


def _dash(e: TrialParams, entries: Sequence[TrialParams]) -> str:
    rates = sorted({x.rate_hz for x in entries})
    return ["solid", "dot", "dash", "dashdot", "longdash"][rates.index(e.rate_hz) % 5]


def latency_timeline(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> go.Figure | None:
    """Latency against send time, a trial at a time (menu), with the verdict's trend line."""
    good = sorted(ok(entries), key=lambda e: (e.sustained, -_failed(e), e.trial))
    good = good[:MAX_TIMELINES]
    if not good:
        return None
    fig = go.Figure()
    traces_of = []
    for i, e in enumerate(good):
        table = records_of(e.trial)
        if table is None:
            continue
        if isinstance(e, GraphEntry):  # the verdict judges a graph's deliveries: every hop
            hops = table.filter(pc.starts_with(table.column("node"), "topic|"))
            lat = (column(hops, "t_echoed") - column(hops, "t_sent")) / 1e3
            sent = column(hops, "t_sent")
        else:
            lat = latency_us(e, table)
            sent = _sent_for(e, table) if isinstance(e, OneWayEntry) else column(table, "t_sent")
        t0 = np.nanmin(sent) if sent.size else 0.0
        xs, ys = downsample((sent - t0) / 1e9, lat)
        first = len(fig.data)
        fig.add_trace(go.Scatter(
            x=xs, y=ys, mode="markers", name="messages", visible=i == 0,
            marker={"size": 3, "color": COLORS[0]},
            hovertemplate="sent at %{x:.3f} s: %{y:.4g} µs<extra></extra>",
        ))  # fmt: skip
        trend = e.verdict.trend
        if trend:
            tx = np.linspace(0.0, trend["duration_s"], 60)  # a line curves on a log axis
            ty = trend["start_us"] + trend["slope_us_per_s"] * tx
            fig.add_trace(go.Scatter(
                x=tx, y=np.maximum(ty, 1e-3), mode="lines", name="trend (Theil-Sen)",
                visible=i == 0, line={"color": COLORS[1], "width": 2},
                hovertemplate=f"slope {trend['slope_us_per_s']:.4g} µs/s "
                f"[{trend['slope_low']:.4g}, {trend['slope_high']:.4g}]<extra></extra>",
            ))  # fmt: skip
        traces_of.append((e, first, len(fig.data)))
    total = len(fig.data)
    buttons = []
    for e, a, b in traces_of:
        visible = [a <= k < b for k in range(total)]
        held = "sustained" if e.sustained else "NOT sustained"
        title = {"title.text": _timeline_title(e)}
        buttons.append({"label": f"{e.trial} ({held})", "method": "update",
                        "args": [{"visible": visible}, title]})  # fmt: skip
    fig.update_layout(updatemenus=[{"buttons": buttons, "x": 1.0, "xanchor": "right", "y": 1.16,
                                    "yanchor": "top", "font": {"size": 10}}])  # fmt: skip
    fig.update_xaxes(title="send time from the first message (s)")
    fig.update_yaxes(type="log")
    graph = isinstance(good[0], GraphEntry)
    fig.update_yaxes(title=("hop latency, every topic" if graph else _kind(good))
                     + " (µs, log)")  # fmt: skip
    return _layout(fig, _timeline_title(good[0]), height=460)


def _failed(e: MeasuredEntry) -> int:
    """How many rules a trial failed: the most saturated trial is drawn first."""
    return sum(1 for r in e.verdict.rules or [] if not r.ok)


def _timeline_title(e: SummaryEntry | MeasuredEntry) -> str:
    held = "sustained" if e.sustained else "not sustained"
    return f"{e.trial}: {held}"


def _sent_for(e: OneWayEntry, table: pa.Table) -> FloatArray:
    """Send times matching `latency_us`'s order for one-way trials."""
    from roboscale.analysis.oneway import flow_of, shape_of

    flow = flow_of(table)
    sent = np.broadcast_to(flow.sent, flow.one_way_us.shape)
    out: FloatArray = (sent[-1] if shape_of(e).relays else sent.ravel()).astype(np.float64)
    return out


def percentiles_by_rate(entries: Sequence[SummaryEntry]) -> go.Figure | None:
    """p50 and p99 against target rate per series; hollow: not sustained. Intervals in the
    hover text (a log axis takes no error bars)."""
    good = ok(entries)
    groups: dict[tuple[str, str, int, str, str], list[MeasuredEntry]] = {}
    for e in good:
        groups.setdefault(_key(e), []).append(e)
    if not groups or all(len({e.rate_hz for e in g}) < 2 for g in groups.values()):
        return None
    round_trip = _kind(good) == "round trip"
    fig = go.Figure()
    for i, key in enumerate(sorted(groups, key=lambda k: -len(groups[k]))):
        color = COLORS[i % len(COLORS)]
        rows = sorted(groups[key], key=lambda e: e.rate_hz)
        for q, dash in LINES:
            shown = [(e, _quantile(e.rtt_us if round_trip else e.one_way_us, q)) for e in rows]
            pts = [(e, v) for e, (v, _, _) in shown if v is not None]
            if not pts:
                continue
            fig.add_trace(go.Scatter(
                x=[e.rate_hz for e, _ in pts], y=[v for _, v in pts],
                mode="lines+markers", name=f"{_name(key)} {q}",
                line={"color": color, "dash": dash},
                marker={"size": 9, "symbol": ["circle" if e.sustained else "circle-open"
                                              for e, _ in pts], "line": {"width": 2}},
                text=[_hover(e, round_trip, q) for e, _ in pts], hoverinfo="text",
            ))  # fmt: skip
    fig.update_xaxes(type="log", title="target rate (Hz, log)")
    fig.update_yaxes(type="log", title=f"{_kind(good)} (µs, log)")
    return _layout(fig, "p50 (solid) and p99 (dotted) against rate; hollow: not sustained")


def _quantile(
    d: Distribution, q: Literal["p50", "p99"]
) -> tuple[float | None, float | None, float | None]:
    """A percentile and its 95 % interval."""
    if q == "p50":
        return d.p50, d.p50_low, d.p50_high
    return d.p99, d.p99_low, d.p99_high


def _hover(e: MeasuredEntry, round_trip: bool, q: Literal["p50", "p99"]) -> str:
    value, low, high = _quantile(e.rtt_us if round_trip else e.one_way_us, q)
    interval = f" [{fmt_us(low)}, {fmt_us(high)}]" if low is not None else ""
    held = "sustained" if e.sustained else "not sustained"
    return f"{e.trial}<br>{q} {fmt_us(value)}{interval} (95 %, single run)<br>{held}"


def rate_and_loss(entries: Sequence[SummaryEntry]) -> go.Figure | None:
    """Achieved over target rate (slowest sender) and loss, by target rate."""
    good = [e for e in entries if not isinstance(e, FailedEntry)]
    groups: dict[tuple[str, str, int, str, str], list[MeasuredEntry]] = {}
    for e in good:
        groups.setdefault(_key(e), []).append(e)
    if not groups or all(len({e.rate_hz for e in g}) < 2 for g in groups.values()):
        return None
    fig = make_subplots(rows=1, cols=2, subplot_titles=("achieved / target (slowest sender)",
                                                        "messages lost (%)"))  # fmt: skip
    top_loss = 1.0
    for i, key in enumerate(sorted(groups)):
        color = COLORS[i % len(COLORS)]
        rows = sorted(groups[key], key=lambda e: e.rate_hz)
        xs = [e.rate_hz for e in rows]
        ratio = [min((e.achieved_rate_min_hz or 0) / e.rate_hz, 1.05) for e in rows]
        loss = [100 * e.loss for e in rows]
        top_loss = max(top_loss, *loss)
        symbols = ["circle" if e.sustained else "circle-open" for e in rows]
        for col, ys in ((1, ratio), (2, loss)):
            fig.add_trace(go.Scatter(
                x=xs, y=ys, mode="lines+markers", name=_name(key), legendgroup=str(key),
                showlegend=col == 1, line={"color": color},
                marker={"size": 9, "symbol": symbols, "line": {"width": 2}},
                text=[e.trial for e in rows],
                hovertemplate="%{text}: %{y:.4g}<extra></extra>",
            ), row=1, col=col)  # fmt: skip
    fig.update_xaxes(type="log", title="target rate (Hz, log)")
    fig.update_yaxes(range=[0, 1.05], row=1, col=1, tickformat=".0%")
    fig.update_yaxes(range=[0, top_loss * 1.1], row=1, col=2, rangemode="nonnegative")
    return _layout(fig, "Achieved rate and loss by target rate; hollow: not sustained")


def box_by_size(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> go.Figure | None:
    """Latency per payload size and rate, a box per backend: median, quartiles, whiskers at
    p1 and p99 (quartiles computed here: the page holds five numbers per box, not every
    message)."""
    good = ok(entries)
    if not good:
        return None
    backends = sorted({e.backend for e in good})
    fig = go.Figure()
    for b, backend in enumerate(backends):
        mine = sorted((e for e in good if e.backend == backend),
                      key=lambda e: (e.payload_bytes, e.rate_hz))  # fmt: skip
        groups: dict[str, list[FloatArray]] = {}
        for e in mine:
            table = records_of(e.trial)
            if table is not None:
                label = f"{e.payload} {rate_label(e)} {env_label(e)}".strip()
                groups.setdefault(label, []).append(latency_us(e, table))
        xs, stats = [], []
        for label, parts in groups.items():
            v = np.concatenate(parts)
            v = v[~np.isnan(v)]
            if v.size:
                xs.append(label)
                stats.append(np.percentile(v, [1, 25, 50, 75, 99]))
        if not xs:
            continue
        s = np.array(stats)
        fig.add_trace(go.Box(
            x=xs, lowerfence=s[:, 0], q1=s[:, 1], median=s[:, 2], q3=s[:, 3], upperfence=s[:, 4],
            name=backend, marker={"color": COLORS[b % len(COLORS)]}, boxpoints=False,
        ))  # fmt: skip
    fig.update_layout(boxmode="group")
    fig.update_yaxes(type="log", title=f"{_kind(good)} (µs, log)")
    return _layout(fig, "Latency by payload and rate (box: quartiles; whiskers: p1 to p99)")


def usage_by_node(
    entries: Sequence[SummaryEntry], nodes_of: Callable[[str], list[NodeHeader]]
) -> go.Figure | None:
    """CPU (share of one core over the trial, after the nodes were ready) and peak memory
    of every node, per trial."""
    rows = []
    for e in entries:
        if isinstance(e, FailedEntry):
            continue
        span = e.sent / e.rate_hz
        for n in nodes_of(e.trial):
            use, ready = n.usage, n.usage_ready
            cpu = use.cpu_user_s + use.cpu_sys_s - ready.cpu_user_s - ready.cpu_sys_s
            rss = use.max_rss_kb / 1024
            rows.append((e.trial, n.role or "?", cpu / span if span else 0.0, rss))
    if not rows:
        return None
    fig = make_subplots(rows=1, cols=2, subplot_titles=("CPU (share of one core)",
                                                        "peak RSS (MiB)"))  # fmt: skip
    roles = sorted({r for _, r, _, _ in rows})
    for i, role in enumerate(roles):
        mine = [r for r in rows if r[1] == role]
        for col, k in ((1, 2), (2, 3)):
            fig.add_trace(go.Bar(
                x=[r[0] for r in mine], y=[r[k] for r in mine], name=role, legendgroup=role,
                showlegend=col == 1, marker={"color": COLORS[i % len(COLORS)]},
                hovertemplate="%{x}: %{y:.3g}<extra>" + role + "</extra>",
            ), row=1, col=col)  # fmt: skip
    fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(tickformat=".0%", row=1, col=1)
    fig.update_xaxes(showticklabels=False, title="trial (hover for its name)")
    fig.update_layout(barmode="group")
    return _layout(fig, "CPU and memory per node (processes shared by nodes count for each)")


def stream_figures() -> list[FigureSpec]:
    """The figures echo and the one-way workloads share (one each in the report)."""
    return [
        FigureSpec("Latency over time", "Each message's latency against its send time, one "
                   "trial at a time (menu, top right; unsustained trials first), with the trend "
                   "the verdict judged (Theil-Sen over the whole trial; its 90 % interval in "
                   "the hover). Downsampled to 2,000 points, keeping each bin's extremes.",
                   latency_timeline),
        FigureSpec("Latency CDF", "The share of messages at or below each latency, a line "
                   "per trial (colour: backend; dash: rate). Click a legend entry to hide it, "
                   "double-click to show it alone.", latency_cdf),
        FigureSpec("Percentiles against rate", "Median and 99th percentile by target rate; "
                   "hover for the 95 % interval; hollow markers were not sustained.",
                   percentiles_by_rate, needs_records=False),
        FigureSpec("Achieved rate and loss", "Where a configuration stops keeping up: the "
                   "slowest sender's achieved rate over the target (0 to 105 %), and the share "
                   "of messages lost (from 0).", rate_and_loss, needs_records=False),
    ]  # fmt: skip


def latency_vs_nodes(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> go.Figure | None:
    """Thesis Figure 4.4: latency against nodes (2 x pairs), a line per rate."""
    return _against(entries, records_of, lambda e: 2 * e.pairs, "nodes (2 x pairs)",
                    "Latency against node count (vertical scaling)", "pairs")  # fmt: skip


def latency_vs_hosts(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> go.Figure | None:
    """Thesis Experiment 9: latency against the number of hosts, a line per rate."""
    return _against(entries, records_of, lambda e: e.hosts, "hosts",
                    "Latency against host count (horizontal scaling)", "hosts")  # fmt: skip


def _against(entries: Sequence[SummaryEntry], records_of: RecordsOf,
             x_of: Callable[[MeasuredEntry], int], xlabel: str, title: str,
             axis: str) -> go.Figure | None:  # fmt: skip
    """p50 (solid) and p99 (dotted) of the runs pooled at each x, a line per backend,
    payload, rate and environment; the 95 % interval in the hover (log axis: no bars)."""
    from roboscale.analysis.uncertainty import interval_text, percentile

    good = ok(entries)
    if len({x_of(e) for e in good}) < 2:
        return None
    lines: dict[tuple[str, str, float, str], dict[int, list[MeasuredEntry]]] = {}
    for e in good:
        key = (e.backend, e.payload, e.rate_hz, env_label(e.model_copy(update={axis: 1})))
        lines.setdefault(key, {}).setdefault(x_of(e), []).append(e)
    if all(len(points) < 2 for points in lines.values()):
        return None  # every line is one point: the axis varies only with something else
    fig = go.Figure()
    for i, key in enumerate(sorted(lines)):
        points = lines[key]
        xs = sorted(points)
        runs = [[latency_us(e, t) for e in points[x] if (t := records_of(e.trial)) is not None]
                for x in xs]  # fmt: skip
        label = " ".join(p for p in (key[0], key[1], f"{key[2]:g} Hz", key[3]) if p)
        for q, dash in ((50.0, "solid"), (99.0, "dot")):
            est = [percentile(r, q) for r in runs]
            fig.add_trace(go.Scatter(
                x=xs, y=[e.value for e in est], mode="lines+markers", name=f"{label} p{q:g}",
                line={"color": COLORS[i % len(COLORS)], "dash": dash},
                text=[f"{label} p{q:g}: {interval_text(e, ' µs')}" for e in est],
                hoverinfo="text",
            ))  # fmt: skip
    fig.update_xaxes(title=xlabel, type="log" if axis == "pairs" else "linear")
    fig.update_yaxes(type="log", title=f"{_kind(good)} (µs, log)")
    return _layout(fig, title + ": p50 solid, p99 dotted")
