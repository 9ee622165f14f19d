"""The graph workload's interactive figures: the node graph itself, each path's end-to-end
latency and each topic's hop latency, a box per backend (runs pooled).

The node graph is laid out in layers: a node's column is the length of the longest chain
of topics from a source to it (a cycle is cut where it closes), so data flows left to
right. Hovering an edge gives its topic, publisher, subscriber and, per backend, its
median hop latency and rate.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from plotly import graph_objects as go

from roboscale.analysis.graph import graph_entries, latencies_by_node
from roboscale.analysis.headline import fmt_us
from roboscale.analysis.interactive import HEIGHT, RecordsOf, _layout
from roboscale.analysis.plots import COLORS
from roboscale.analysis.stats import FloatArray
from roboscale.records.models import GraphEntry, SummaryEntry

Edge = tuple[str, str, str]  # publisher, subscriber, topic


def _edges(entries: Sequence[GraphEntry]) -> dict[Edge, list[GraphEntry]]:
    out: dict[Edge, list[GraphEntry]] = {}
    for e in entries:
        for c in e.topics:
            out.setdefault((c.publisher, c.subscriber, c.topic), []).append(e)
    return out


def layers(edges: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Each node's column: the longest chain of edges from a source to it; an edge that
    would close a cycle is not followed."""
    nodes = list(dict.fromkeys([n for edge in edges for n in edge]))
    after: dict[str, list[str]] = {n: [] for n in nodes}
    for a, b in edges:
        after[a].append(b)
    depth = dict.fromkeys(nodes, 0)
    incoming = {b for _, b in edges}
    sources = [n for n in nodes if n not in incoming] or nodes[:1]

    def walk(node: str, path: frozenset[str]) -> None:
        for nxt in after[node]:
            if nxt in path or depth[nxt] > depth[node]:
                continue
            depth[nxt] = depth[node] + 1
            walk(nxt, path | {nxt})

    for s in sources:
        walk(s, frozenset({s}))
    return depth


def node_graph(entries: Sequence[SummaryEntry]) -> go.Figure | None:
    """The first graph's nodes and topics, laid out left to right."""
    graphs = graph_entries(entries)
    if not graphs:
        return None
    first = Path(graphs[0].graph).stem
    mine = [e for e in graphs if Path(e.graph).stem == first]
    edges = _edges(mine)
    if not edges:
        return None
    depth = layers([(a, b) for a, b, _ in edges])
    columns: dict[int, list[str]] = {}
    for node, d in depth.items():
        columns.setdefault(d, []).append(node)
    pos = {n: (float(d), float(i) - (len(col) - 1) / 2) for d, col in columns.items()
           for i, n in enumerate(sorted(col))}  # fmt: skip
    fig = go.Figure()
    for (a, b, topic), group in edges.items():
        (x0, y0), (x1, y1) = pos[a], pos[b]
        fig.add_annotation(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y",
                           showarrow=True, arrowhead=2, arrowsize=1, arrowwidth=1.2,
                           arrowcolor="#888", standoff=10, startstandoff=10)  # fmt: skip
        fig.add_trace(go.Scatter(
            x=[(x0 + x1) / 2], y=[(y0 + y1) / 2], mode="markers", showlegend=False,
            marker={"size": 8, "color": "#bbb", "symbol": "diamond"},
            text=[_edge_hover(a, b, topic, group)], hoverinfo="text",
        ))  # fmt: skip
    names = list(pos)
    fig.add_trace(go.Scatter(
        x=[pos[n][0] for n in names], y=[pos[n][1] for n in names], mode="markers+text",
        text=names, textposition="top center", showlegend=False, hoverinfo="text",
        marker={"size": 16, "color": COLORS[0]},
    ))  # fmt: skip
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    rows = max(len(c) for c in columns.values())
    return _layout(fig, f"Node graph: {first} (hover a diamond for its topic)",
                   height=max(HEIGHT, 90 * rows))  # fmt: skip


def _edge_hover(a: str, b: str, topic: str, group: list[GraphEntry]) -> str:
    lines = [f"{topic}: {a} -> {b}"]
    for backend in sorted({e.backend for e in group}):
        rows = [c for e in group if e.backend == backend for c in e.topics
                if (c.publisher, c.subscriber, c.topic) == (a, b, topic)]  # fmt: skip
        p50s = [c.latency_us.p50 for c in rows if c.latency_us.p50 is not None]
        rates = [c.rate_hz for c in rows if c.rate_hz is not None]
        p50 = fmt_us(float(np.median(p50s))) if p50s else "-"
        rate = f"{np.mean(rates):.3g} Hz" if rates else "-"
        lines.append(f"{backend}: hop p50 {p50}, {rate}")
    return "<br>".join(lines)


def _boxes(entries: Sequence[SummaryEntry], records_of: RecordsOf, kind: str, title: str,
           axis: str) -> go.Figure | None:  # fmt: skip
    graphs = graph_entries(entries)
    pooled: dict[str, dict[str, list[FloatArray]]] = {}
    for e in graphs:
        table = records_of(e.trial)
        if table is None:
            continue
        for name, lat in latencies_by_node(table, kind).items():
            pooled.setdefault(e.backend, {}).setdefault(name, []).append(lat[~np.isnan(lat)])
    if not pooled:
        return None
    fig = go.Figure()
    for i, backend in enumerate(sorted(pooled)):
        names, stats = [], []
        for name, parts in pooled[backend].items():
            v = np.concatenate(parts)
            if v.size:
                names.append(name)
                stats.append(np.percentile(v, [1, 25, 50, 75, 99]))
        if not names:
            continue
        s = np.array(stats)
        fig.add_trace(go.Box(
            y=names, lowerfence=s[:, 0], q1=s[:, 1], median=s[:, 2], q3=s[:, 3],
            upperfence=s[:, 4], name=backend, orientation="h", boxpoints=False,
            marker={"color": COLORS[i % len(COLORS)]},
        ))  # fmt: skip
    fig.update_layout(boxmode="group")
    fig.update_xaxes(type="log", title=f"{axis} (µs, log)")
    rows = len({n for by in pooled.values() for n in by})
    return _layout(fig, title, height=max(HEIGHT, 60 + 28 * rows * len(pooled)))


def path_latency(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> go.Figure | None:
    return _boxes(entries, records_of, "path", "End to end per path, a box per backend "
                  "(quartiles; whiskers p1 to p99)", "source send -> sink arrival")  # fmt: skip


def topic_latency(entries: Sequence[SummaryEntry], records_of: RecordsOf) -> go.Figure | None:
    title = "Hop latency per topic, a box per backend (quartiles; whiskers p1 to p99)"
    return _boxes(entries, records_of, "topic", title, "publisher send -> subscriber arrival")
