"""The graph workload's records, summary and tables (workloads/graph.py runs it).

Records (the common columns): one row per message per subscriber of its topic, node
`topic|TOPIC|PUBLISHER|SUBSCRIBER`, t_echoed = arrival there (null: never arrived);
one row per source message of each measured path, node `path|NAME`, t_sent = the
source's send, t_echoed = the first arrival at the path's sink of anything made from it
through the path's relays, fusions and timers (null: lost, or superseded at a fusion
or timer by a newer input before it was used). `seq` is the
publisher's own sequence number. Messages sent during the first trial.warmup (at
sweep.rate_hz: warmup / rate_hz seconds) are not recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute

from roboscale.analysis.stats import (
    NOTHING_ARRIVED,
    FloatArray,
    Measured,
    achieved_rate_hz,
    column,
    distribution,
    loss_of,
)
from roboscale.analysis.tables import pct, us
from roboscale.analysis.verdict import Thresholds, Trace, judge, period_of
from roboscale.records.models import (
    GraphEntry,
    PathFigures,
    SummaryEntry,
    TopicFigures,
    TrialParams,
)
from roboscale.records.raw import read_raw
from roboscale.records.store import records_table
from roboscale.spec.graphfile import Graph, GraphPath
from roboscale.spec.planner import TrialPlan

ID_SLOTS = 64  # workloads/graph.py packs ids as seq * ID_SLOTS + publisher
ARRIVAL, SENT, LINEAGE = 0, 1, 2


@dataclass
class Events:
    """Every node's events, indexed for following messages."""

    sent: dict[int, tuple[int, int, int]]  # id -> (topic, t_sent, deadline)
    arrived: list[dict[tuple[int, int], int]]  # per node: (topic, id) -> t
    made: list[dict[tuple[int, int, int], list[int]]]  # (in topic, parent, out topic) -> ids


def read_events(raw: Path, names: list[str]) -> Events:
    ev = Events({}, [], [])
    for name in names:
        _, cols = read_raw(raw / f"{name}.raw")
        kinds, topics, msgs, ts, extra = (cols[c].tolist() for c in
                                          ("event", "topic", "msg", "t", "extra"))  # fmt: skip
        arrived: dict[tuple[int, int], int] = {}
        made: dict[tuple[int, int, int], list[int]] = {}
        for kind, topic, msg, t, x in zip(kinds, topics, msgs, ts, extra, strict=True):
            if kind == SENT:
                ev.sent[msg] = (topic, t, x)
        for kind, topic, msg, t, x in zip(kinds, topics, msgs, ts, extra, strict=True):
            if kind == ARRIVAL:
                arrived.setdefault((topic, msg), t)
            elif kind == LINEAGE and msg in ev.sent:
                made.setdefault((topic, x, ev.sent[msg][0]), []).append(msg)
        ev.arrived.append(arrived)
        ev.made.append(made)
    return ev


def _follow(ev: Events, keys: list[int], index: dict[str, int], path: GraphPath, msg: int) -> int:
    """The first arrival at the path's sink of anything made from `msg` (a message may
    feed several: a timer or an `any` fusion reuses the latest input), or 0."""
    topics = [index[t] for t in path.topics]
    current = {msg}
    for step, key in enumerate(keys[1:]):
        here = [m for m in current if (topics[step], m) in ev.arrived[key]]
        if step == len(topics) - 1:
            return min((ev.arrived[key][topics[step], m] for m in here), default=0)
        made = ev.made[key]
        current = {n for m in here for n in made.get((topics[step], m, topics[step + 1]), ())}
        if not current:
            return 0
    return 0


def collect_graph(
    t: TrialPlan, g: Graph, names: list[str], hosts: list[str], raw: Path
) -> tuple[list[pa.Table], list[dict[str, object]]]:
    """Record tables of a graph trial: `names[k]`, `hosts[k]` are node k's."""
    ev = read_events(raw, names)
    heads = [read_raw(raw / f"{n}.raw")[0] for n in names]
    index = {name: i for i, name in enumerate(g.topics())}
    topic_names = list(index)
    publishers = g.publishers()
    keys = {n.name: k for k, n in enumerate(g.nodes)}
    sizes = {name: k.size for name, k in g.kinds().items()}
    first = min((s[1] for s in ev.sent.values()), default=0)
    cut = first + int(t.warmup / t.rate_hz * 1e9)
    measured = sorted((m, s) for m, s in ev.sent.items() if s[1] >= cut)
    tables = []
    for k, node in enumerate(g.nodes):
        for topic in node.inputs:
            rows = [(m, s) for m, s in measured if s[0] == index[topic]]
            for pub in sorted({m % ID_SLOTS for m, _ in rows}):
                mine = [(m, s) for m, s in rows if m % ID_SLOTS == pub]
                label = f"topic|{topic}|{publishers[pub][0].name}|{node.name}"
                ends = [ev.arrived[k].get((s[0], m), 0) for m, s in mine]
                tables.append(_table(t, label, hosts[k], sizes[topic], mine, ends))
    for path in g.paths:
        path_keys = [keys[n] for n in path.nodes]
        src = {p for p, (n, o) in enumerate(publishers) if n.name == path.nodes[0]}
        mine = [(m, s) for m, s in measured
                if m % ID_SLOTS in src and topic_names[s[0]] == path.topics[0]]  # fmt: skip
        ends = [_follow(ev, path_keys, index, path, m) for m, _ in mine]
        size = sizes[path.topics[-1]]
        tables.append(_table(t, f"path|{path.name}", hosts[path_keys[-1]], size, mine, ends))
    return tables, heads


def _table(
    t: TrialPlan, node: str, host: str, size: int, rows: list[tuple[int, tuple[int, int, int]]],
    arrived: list[int],
) -> pa.Table:  # fmt: skip
    def col(values: list[int]) -> np.ndarray[Any, np.dtype[np.int64]]:
        return np.asarray(values, dtype=np.int64)

    return records_table(t.trial, node, host, size, {
        "seq": col([m // ID_SLOTS for m, _ in rows]),
        "t_intended": col([s[2] for _, s in rows]),
        "t_sent": col([s[1] for _, s in rows]),
        "t_echoed": col(arrived),
        "t_received": col([0] * len(rows)),
    })  # fmt: skip


def _groups(table: pa.Table) -> dict[str, pa.Table]:
    nodes = np.asarray(table.column("node").to_pylist(), dtype=object)
    return {n: table.filter(pa.array(nodes == n)) for n in dict.fromkeys(nodes.tolist())}


def _latency_us(part: pa.Table) -> FloatArray:
    return (column(part, "t_echoed") - column(part, "t_sent")) / 1e3


def latencies_by_node(table: pa.Table, kind: str) -> dict[str, FloatArray]:
    """A trial's latencies (µs, NaN: not arrived or not followed) by path (`kind` "path":
    end to end) or by topic ("topic": every hop on it, its publishers and subscribers
    pooled)."""
    parts: dict[str, list[FloatArray]] = {}
    for node, part in _groups(table).items():
        what, name, *_ = node.split("|")
        if what == kind:
            parts.setdefault(name, []).append(_latency_us(part))
    return {name: np.concatenate(lat) for name, lat in parts.items()}


def _rate_ratio(part: pa.Table) -> float:
    """Achieved over intended rate of one publisher (1 for a relay: sent when made)."""
    sent = np.unique(column(part, "t_sent"))
    intended = np.unique(column(part, "t_intended"))
    got, asked = achieved_rate_hz(sent), achieved_rate_hz(intended)
    return got / asked if got and asked else 1.0


@dataclass(frozen=True)
class _PathRows:
    figures: PathFigures
    latency_us: FloatArray
    intended_ns: FloatArray


def summarize_graph(table: pa.Table, params: TrialParams, th: Thresholds) -> GraphEntry:
    """Per path (end to end), per topic and publisher (rate, latency, delivery); the
    headline `e2e_us` is the first path's; loss counts topic deliveries only."""
    paths: list[_PathRows] = []
    topics: list[TopicFigures] = []
    sent = received = 0
    ratio = 1.0
    for node, part in _groups(table).items():
        lat = _latency_us(part)
        kind, *rest = node.split("|")
        if kind == "path":
            figures = PathFigures(
                path=rest[0],
                sources=part.num_rows,
                followed=int(np.count_nonzero(~np.isnan(lat))),
                e2e_us=distribution(lat),
                rate_hz=achieved_rate_hz(column(part, "t_sent")),
            )
            paths.append(_PathRows(figures, lat, column(part, "t_intended")))
            continue
        topic, publisher, subscriber = rest
        arrived = int(np.count_nonzero(~np.isnan(lat)))
        sent, received = sent + part.num_rows, received + arrived
        ratio = min(ratio, _rate_ratio(part))
        topics.append(TopicFigures(
            topic=topic, publisher=publisher, subscriber=subscriber,
            sent=part.num_rows, arrived=arrived,
            rate_hz=achieved_rate_hz(column(part, "t_sent")), latency_us=distribution(lat),
        ))  # fmt: skip
    head = paths[0].latency_us if paths else np.array([], dtype=float)
    headline = distribution(head)
    topic_rows = table.filter(pa.compute.starts_with(table.column("node"), "topic|"))
    lag = (column(topic_rows, "t_sent") - column(topic_rows, "t_intended")) / 1e3
    # The verdict judges deliveries (every hop), not the paths' end to end: a path through
    # stages that work for 50 ms each takes longer than its period by design, while a hop
    # slower than the period, or growing, is a queue. The period is the first path's
    # source's (graph files set rates per node, not per trial).
    period = period_of(paths[0].intended_ns, None) if paths else None
    hops = _latency_us(topic_rows)
    trace = Trace(column(topic_rows, "t_sent"), hops, lag, period, round_trip=False)
    verdict = judge(th, trace, ratio, loss_of(sent, received))
    # The log's "Hz achieved": the first path's source (0 without paths or messages).
    rate = (paths[0].figures.rate_hz if paths else None) or 0.0
    rates = [c.rate_hz for c in topics if c.rate_hz is not None]
    measured = Measured(
        params=params,
        thresholds=th,
        sent=sent,
        received=received,
        verdict=verdict,
        achieved_rate_hz=rate,
        achieved_rate_min_hz=min(rates) if rates else None,
        rtt_us=NOTHING_ARRIVED,  # nothing goes back
        one_way_us=headline,  # the results' common keys: one way = end to end here
        send_lag_us=distribution(lag),
    )
    return measured.entry(
        GraphEntry, e2e_us=headline, paths=[p.figures for p in paths], topics=topics
    )


def graph_entries(entries: Sequence[SummaryEntry]) -> list[GraphEntry]:
    return [e for e in entries if isinstance(e, GraphEntry)]


def path_table(entries: Sequence[SummaryEntry]) -> tuple[list[str], list[list[str]]] | None:
    rows = [
        [e.trial, e.backend, Path(e.graph).stem, p.path,
         f"{p.followed}/{p.sources}", pct(p.e2e_us, "p50"), pct(p.e2e_us, "p90"),
         pct(p.e2e_us, "p99"), us(p.e2e_us.max), us(p.e2e_us.mean)]
        for e in graph_entries(entries)
        for p in e.paths
    ]  # fmt: skip
    head = ["trial", "backend", "graph", "path", "followed/sources",
            "end-to-end p50 µs [95 %]", "p90 µs", "p99 µs [95 %]", "max µs", "mean µs"]  # fmt: skip
    return (head, rows) if rows else None


def topic_table(entries: Sequence[SummaryEntry]) -> tuple[list[str], list[list[str]]] | None:
    rows = [
        [e.trial, e.backend, c.topic, c.publisher, c.subscriber,
         f"{c.arrived}/{c.sent}", "-" if c.rate_hz is None else f"{c.rate_hz:.1f}",
         pct(c.latency_us, "p50"), pct(c.latency_us, "p99")]
        for e in graph_entries(entries)
        for c in e.topics
    ]  # fmt: skip
    head = ["trial", "backend", "topic", "publisher", "subscriber", "arrived/sent", "rate Hz",
            "hop latency p50 µs [95 %]", "p99 µs [95 %]"]  # fmt: skip
    return (head, rows) if rows else None


def clock_jitter(table: pa.Table) -> dict[str, tuple[float, FloatArray]]:
    """Publishers on a clock (paced sources and timers: their sends have deadlines of
    their own), each with its period (s) and every send's lag behind its deadline (µs):
    the reference system's jitter of a cyclic node against its period."""
    out: dict[str, tuple[float, FloatArray]] = {}
    for node, part in _groups(table).items():
        kind, *rest = node.split("|")
        if kind != "topic" or rest[1] in out:
            continue
        intended = np.unique(column(part, "t_intended"))
        sent = np.unique(column(part, "t_sent"))
        if intended.size < 3 or np.array_equal(intended, sent):
            continue  # a relay or fusion sends when its input came: no clock of its own
        period = float(np.median(np.diff(intended))) / 1e9
        lag = (column(part, "t_sent") - column(part, "t_intended")) / 1e3
        out[rest[1]] = (period, np.unique(lag[~np.isnan(lag)]))
    return out
