"""The graph workload: a robot's node graph from a graph file (`spec/graphfile.py`).

Every graph node is one node of the trial. Its outputs are publishers: a paced
stream (`publish`), a `relay` (one input), a `fusion` (publishes when all, or any,
of its inputs arrived) or a `timer` (publishes at its rate with the latest of its
inputs). A node is single-threaded like a ROS executor: middleware callbacks only
note the arrival time and queue it; the node's own worker thread does the relays'
and fusions' work (`work_ms`, slept or busy) and publishes. Timers and streams run
on their own clocks in `run` (a node with one is a pacer; in one process, the first
pacer runs every clocked output of the process).

A message id packs its publisher (the output's index in the graph file, < ID_SLOTS)
and that publisher's sequence number: `seq * ID_SLOTS + publisher`, so a shared
topic says which publisher each message came from. Every node writes one event per
arrival (topic, id, time), per send (topic, id, time, the pace deadline), and per
input a sent message was made from (its lineage: topic, parent id): the driver
follows a path's source message through relays, fusions and timers from these.

Stdlib only at import (ros1 agents): the driver half imports the analysis lazily.
"""

from __future__ import annotations

import functools
import math
import queue
import threading
import time
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from roboscale.backends.base import Publisher, Session, get_backend
from roboscale.workloads.base import (
    AgentProtocol,
    FigureSpec,
    NodePlan,
    ProcessPlan,
    Program,
    ProgramConfig,
    TableSpec,
    Variant,
    VariantFields,
)
from roboscale.workloads.graph_config import (
    NO_REPLAY,
    GraphNodeConfig,
    InputPlan,
    OutputPlan,
    ReplayFields,
)
from roboscale.workloads.replay import Stream, open_stream
from roboscale.workloads.stream import Counters

if TYPE_CHECKING:
    import pyarrow as pa

    from roboscale.analysis.verdict import Thresholds
    from roboscale.records.models import GraphEntry, NodeHeader, TrialParams
    from roboscale.spec.graphfile import Graph, Replay
    from roboscale.spec.planner import TrialPlan
    from roboscale.spec.schema import Sweep

monotonic_ns = time.monotonic_ns
ID_SLOTS = 64  # > the publishers of a graph (graphfile.MAX_PUBLISHERS)
ARRIVAL, SENT, LINEAGE = 0, 1, 2
EVENT_COLUMNS = ("event", "topic", "msg", "t", "extra")  # extra: deadline (SENT), parent
STOP_WAIT_S = 5.0
MAX_MESSAGES = 200_000  # per clocked output: every trial stays bounded


def message_id(seq: int, publisher: int) -> int:
    return seq * ID_SLOTS + publisher


def do_work(out: OutputPlan) -> None:
    """The output's processing time: slept, or spent in a busy loop."""
    if out.work_ms <= 0:
        return
    if out.work == "sleep":
        time.sleep(out.work_ms / 1000)
        return
    deadline = monotonic_ns() + int(out.work_ms * 1e6)
    while monotonic_ns() < deadline:
        pass


# The clocked nodes of this process, in the order they opened: the pacer runs them all.
_CLOCKED: list[GraphNodeProgram] = []


class GraphNodeProgram:
    """One graph node: its subscriptions, its worker thread, its clocked outputs."""

    def __init__(self, session: Session, cfg: GraphNodeConfig) -> None:
        self.cfg = cfg
        self.counters = Counters()
        self.paces = any(o.clocked for o in cfg.outputs)
        self.events = {name: array("q") for name in EVENT_COLUMNS}
        self._lock = threading.Lock()  # the worker and the clocks share events and state
        self._latest: dict[int, int] = {}
        self._pending: dict[int, set[int]] = {o.pub: set() for o in cfg.outputs}
        self._seq = {o.pub: 0 for o in cfg.outputs}
        self._arrivals: queue.SimpleQueue[tuple[int, int, int] | None] = queue.SimpleQueue()
        self._replays = {o.pub: replay_schedule(o, cfg.seed) for o in cfg.outputs if o.replay}
        # Publishers first: native-proc exports what exists when the node subscribes.
        self._pubs: dict[int, Publisher] = {
            o.pub: session.publisher(o.name, o.kind, cfg.publisher_queue) for o in cfg.outputs
        }
        self._worker = threading.Thread(target=self._work_loop, daemon=True)
        self._worker.start()
        for i in cfg.inputs:
            session.subscribe(i.name, i.kind, functools.partial(self._on_message, i.topic),
                              cfg.subscriber_queue)  # fmt: skip
        if self.paces:
            _CLOCKED.append(self)

    def _on_message(self, topic: int, msg_id: int, _msg: object) -> None:
        # On the middleware's thread: note the time, leave the work to the node's worker.
        self._arrivals.put((topic, msg_id, monotonic_ns()))

    def _record(self, event: int, topic: int, msg: int, t: int, extra: int) -> None:
        for name, value in zip(EVENT_COLUMNS, (event, topic, msg, t, extra), strict=True):
            self.events[name].append(value)

    def _work_loop(self) -> None:
        while (item := self._arrivals.get()) is not None:
            topic, msg_id, now = item
            if msg_id < 0:
                self.counters.out_of_range += 1
                continue
            with self._lock:
                self.counters.received += 1
                self._record(ARRIVAL, topic, msg_id, now, 0)
                self._latest[topic] = msg_id
            for out in self.cfg.outputs:
                if not out.clocked and topic in out.inputs:
                    self._triggered(out, topic)

    def _triggered(self, out: OutputPlan, topic: int) -> None:
        if out.stage == "relay" or out.when == "any":
            self._fire(out, (topic,) if out.stage == "relay" else out.inputs)
            return
        # Inputs may arrive on several threads at once (a drain thread per subscription on
        # zenoh, ros1 and dds): the check and the reset are one step, or both threads see
        # every input in and the fusion fires twice for one set.
        with self._lock:
            pending = self._pending[out.pub]
            pending.add(topic)
            complete = len(pending) == len(out.inputs)
            if complete:
                pending.clear()
        if complete:
            self._fire(out, out.inputs)

    def _fire(
        self, out: OutputPlan, inputs: Sequence[int], deadline: int = 0, body: bytes | None = None
    ) -> None:
        """Work, then publish one message made from the latest message of `inputs` (a
        replayed message: `body`, the recorded bytes)."""
        with self._lock:
            parents = [(t, self._latest[t]) for t in inputs if t in self._latest]
        do_work(out)
        with self._lock:
            msg_id = message_id(self._seq[out.pub], out.pub)
            self._seq[out.pub] += 1
            now = monotonic_ns()
            if body is None:
                self._pubs[out.pub].send(msg_id, now)
            else:
                self._pubs[out.pub].send_body(msg_id, now, body)
            self._record(SENT, out.topic, msg_id, now, deadline or now)
            for topic, parent in parents:
                self._record(LINEAGE, topic, msg_id, 0, parent)

    def _clock(self, out: OutputPlan, start_ns: int) -> None:
        if out.pub in self._replays:
            self._replay(out, start_ns, *self._replays[out.pub])
            return
        period_ns = 1e9 / out.rate_hz
        for i in range(out.messages):
            deadline = start_ns + int(i * period_ns)
            delay = deadline - monotonic_ns()
            if delay > 0:
                time.sleep(delay * 1e-9)
            self._fire(out, out.inputs, deadline)

    def _replay(
        self, out: OutputPlan, start_ns: int, stream: Stream, schedule: list[tuple[int, int]]
    ) -> None:
        """The bag topic's messages at `start + recorded offset / rate_factor`, each body
        built before its wait."""
        for offset, frame in schedule:
            body = stream.body(frame)
            deadline = start_ns + int(offset / out.rate_factor)
            delay = deadline - monotonic_ns()
            if delay > 0:
                time.sleep(delay * 1e-9)
            self._fire(out, out.inputs, deadline, body)

    def wait_for_match(self) -> bool:
        return True  # the first trial.warmup of the run is not measured (see collect)

    def no_match(self) -> str:
        return ""

    def run(self) -> None:
        """Every clocked output of this process on its own thread, then the drain."""
        start = monotonic_ns() + 1_000_000
        clocks = [
            threading.Thread(target=node._clock, args=(out, start), daemon=True)
            for node in _CLOCKED
            for out in node.cfg.outputs
            if out.clocked
        ]
        for c in clocks:
            c.start()
        for c in clocks:
            c.join()
        time.sleep(self.cfg.drain_s)  # downstream nodes finish before the lab stops them

    def finish(self) -> None:
        self._arrivals.put(None)
        self._worker.join(STOP_WAIT_S + self.cfg.drain_s)

    def header(self) -> dict[str, object]:
        return {"graph_node": self.cfg.node}

    def columns(self) -> dict[str, array[int]]:
        with self._lock:
            return {name: array("q", col) for name, col in self.events.items()}


class GraphWorkload:
    """Nodes from the trial's graph file; node key = its index in the file."""

    name = "graph"
    axes = ("graph",)
    emulated_hosts = True  # each node on its graph host (all on host 0 with hosts: 1)
    replays = False  # its publishers keep the rates of the graph file
    log_words = ("e2e_us", "deliveries arrived", "first path end-to-end")

    def variants(self, sweep: Sweep) -> list[Variant]:
        return [
            Variant(VariantFields(graph=g), Path(g).stem, names_payload=False) for g in sweep.graph
        ]

    @staticmethod
    def graph(t: TrialPlan) -> Graph:
        from roboscale.spec.graphfile import cached_graph

        return cached_graph(t.graph)

    def measured_nodes(self, t: TrialPlan) -> int:
        return len(self.graph(t).nodes)

    def host_of(self, t: TrialPlan, key: int) -> int:
        return self.graph(t).nodes[key].host if t.hosts > 1 else 0

    def node_name(self, t: TrialPlan, key: int) -> str:
        return f"{self.graph(t).nodes[key].name}_t{t.index:04d}"

    def config(self, t: TrialPlan, key: int) -> GraphNodeConfig:
        g = self.graph(t)
        topics = g.topics()
        index = {name: i for i, name in enumerate(topics)}
        kinds = g.kinds()
        full = {name: f"/t{t.index:04d}/{name}" for name in topics}
        seconds = t.intended_duration_s
        replays = any(o.replay for _, o in g.publishers())
        encoding = get_backend(t.backend).replay_encoding if replays else ""
        outputs = tuple(
            OutputPlan(
                stage=o.stage,
                pub=pub,
                topic=index[o.topic],
                name=full[o.topic],
                kind=kinds[o.topic],
                rate_hz=o.rate_hz,
                messages=min(MAX_MESSAGES, math.ceil(o.rate_hz * seconds)),
                inputs=tuple(index[i] for i in o.inputs),
                when=o.when,
                work_ms=o.work_ms,
                work=o.work,
                **replay_fields(o.replay, encoding),
            )
            for pub, (n, o) in enumerate(g.publishers())
            if n.name == g.nodes[key].name
        )
        inputs = tuple(InputPlan(index[i], full[i], kinds[i]) for i in g.nodes[key].inputs)
        return GraphNodeConfig(
            node=g.nodes[key].name, outputs=outputs, inputs=inputs, drain_s=t.drain_s,
            publisher_queue=t.publisher_queue, subscriber_queue=t.subscriber_queue, seed=t.seed,
        )  # fmt: skip

    def _node(self, t: TrialPlan, key: int) -> NodePlan:
        g = self.graph(t)
        node = g.nodes[key]
        keys = {n.name: k for k, n in enumerate(g.nodes)}
        connects = sorted({keys[p] for i in node.inputs for p in topic_publishers(g, i)} - {key})
        role = "clocked" if any(not o.triggered for o in node.outputs) else "reactive"
        return NodePlan(self.node_name(t, key), role, self.host_of(t, key), key,
                        self.config(t, key), listens=True, connects=tuple(connects))  # fmt: skip

    def processes(self, t: TrialPlan, together: bool) -> list[list[ProcessPlan]]:
        """Reactive nodes (relays, fusions, sinks) first, then the clocked ones; together:
        all in one process, the clocked nodes last."""
        nodes = [self._node(t, k) for k in range(self.measured_nodes(t))]
        reactive = [n for n in nodes if n.role == "reactive"]
        clocked = [n for n in nodes if n.role == "clocked"]
        if together:
            return [[ProcessPlan(f"group_t{t.index:04d}", "group", (*reactive, *clocked))]]
        stages = [
            [ProcessPlan(n.name, n.role, (n,)) for n in group] for group in (reactive, clocked)
        ]
        return [s for s in stages if s]

    def drive(self, t: TrialPlan) -> AgentProtocol:
        return AgentProtocol(
            pacers=("clocked", "group"),
            stopped=("reactive",),
            done_timeout_s=t.intended_duration_s * 3 + t.drain_s * 2 + 30,
            stop_timeout_s=t.drain_s + STOP_WAIT_S + 30,
            close=True,
        )

    def read_program(self, role: str, data: object) -> GraphNodeConfig:
        return GraphNodeConfig.from_dict(data)

    def start(self, role: str, session: Session, cfg: ProgramConfig) -> Program:
        assert isinstance(cfg, GraphNodeConfig)
        return GraphNodeProgram(session, cfg)

    def collect(
        self, t: TrialPlan, raw: Path, hosts: list[str]
    ) -> tuple[list[pa.Table], list[NodeHeader]]:
        from roboscale.analysis.graph import collect_graph
        from roboscale.records.models import node_headers

        keys = range(self.measured_nodes(t))
        names = [self.node_name(t, k) for k in keys]
        where = [hosts[self.host_of(t, k)] for k in keys]
        tables, heads = collect_graph(t, self.graph(t), names, where, raw)
        return tables, node_headers(heads)

    def summarize(
        self,
        table: pa.Table,
        params: TrialParams,
        th: Thresholds,
        nodes: Sequence[NodeHeader] = (),
    ) -> GraphEntry:
        from roboscale.analysis.graph import summarize_graph

        return summarize_graph(table, params, th)

    def figures(self) -> list[FigureSpec]:
        from roboscale.analysis import graphviews, interactive

        return [
            FigureSpec("Node graph", "The graph's nodes left to right in the order data flows "
                       "through them; hover a topic (diamond) for its hop latency and rate per "
                       "backend.", graphviews.node_graph, needs_records=False),
            FigureSpec("Graph paths: end-to-end latency by backend", PATH_MEANS + " Boxes: "
                       "median, quartiles, whiskers at p1 and p99; runs pooled.",
                       graphviews.path_latency),
            FigureSpec("Graph topics: hop latency by backend", TOPIC_MEANS + " Every delivery "
                       "on the topic (all its publishers and subscribers) pooled.",
                       graphviews.topic_latency),
            interactive.stream_figures()[0],  # latency over time: the first path's
        ]  # fmt: skip

    def tables(self) -> list[TableSpec]:
        from roboscale.analysis.graph import path_table, topic_table

        return [
            TableSpec("Graph paths: end-to-end latency", path_table, lead=True,
                      caption=PATH_MEANS),
            TableSpec("Graph topics: rate, hop latency and publisher", topic_table,
                      caption=TOPIC_MEANS),
        ]  # fmt: skip


def replay_fields(replay: Replay | None, encoding: str) -> ReplayFields:
    """A replayed publisher's OutputPlan fields: the stream its agent opens (a bag becomes
    a stream file in `encoding`, once per lab process: `roboscale.bags`) and its topic
    there."""
    if replay is None:
        return NO_REPLAY
    from roboscale.bags import replay_info, replay_stream

    info = replay_info(replay.bag)
    names = [topic.name for topic in info.topics]
    return ReplayFields(
        replay=replay_stream(replay.bag, encoding)[0],
        stream_encoding=encoding,
        stream_topic=names.index(replay.topic),
        rate_factor=replay.rate_factor,
        loop=replay.loop,
    )


@functools.cache
def _open_stream(source: str, seed: int, encoding: str) -> Stream:
    """One stream per source in a process (its nodes may replay several of its topics)."""
    return open_stream(source, seed, encoding)


def replay_schedule(out: OutputPlan, seed: int) -> tuple[Stream, list[tuple[int, int]]]:
    """A replayed output's stream and its (offset, frame) sends, their bodies prepared."""
    stream = _open_stream(out.replay, seed, out.stream_encoding)
    schedule = list(stream.schedule(out.messages, out.loop, out.stream_topic))
    stream.prepare({i for _, i in schedule})
    return stream, schedule


PATH_MEANS = (
    "End to end: from the send of a path's source message (on its publisher's clock) to "
    "the first arrival at the path's last node of anything made from it, followed node by "
    "node through each relay's, fusion's and timer's records of what it made from which "
    "input (not through message stamps). followed/sources: messages superseded at a fusion "
    "or timer by a newer input before use are not followed. A path through a timer includes "
    "the wait for its next tick."
)
TOPIC_MEANS = (
    "One hop: from the publisher's send of each message to its arrival at the subscriber's "
    "node. On a topic published by a relay, fusion or timer this is that last hop only, "
    "not the time since the data's origin (that is the paths' end-to-end latency)."
)


def topic_publishers(g: Graph, topic: str) -> list[str]:
    return [n.name for n, o in g.publishers() if o.topic == topic]


WORKLOAD = GraphWorkload()
