"""One-way workloads of the lab report (seed 003): fan-out, ping / ping-pong and chain.

Node 0 publishes, paced open loop like the echo sender (`pace`). Nodes 1..K
measure: each notes when a message first arrived (`t_echoed`); a chain hop then
forwards it unchanged to the next hop; with `ack`, each node acknowledges it with
a few bytes (ping-pong). Acks of all nodes share one topic, so the publisher has
one subscription (native-proc's bridge allows one per node); an ack's id packs
the message id and the node: `id * ACK_SLOTS + node`, negated for probes.

Probes (negative ids) go out until every measuring node acknowledged one, so the
whole path (every listener, every hop) is matched before counting. Nodes always
acknowledge probes, with or without `ack`.

Registered as three workloads (FANOUT, PING, CHAIN), one OneWay class: a chain's
measuring nodes are relays (hops), the others listeners. Stdlib only at import (ros1
agents): the driver half imports numpy, pyarrow and the analysis inside its methods.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from roboscale.backends.base import MessageKind, Session
from roboscale.jsonfields import Fields
from roboscale.records.raw import new_column
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
from roboscale.workloads.stream import (
    Counters,
    StreamConfig,
    pace,
    probe_until_matched,
    stream_fields,
)

if TYPE_CHECKING:
    import pyarrow as pa

    from roboscale.analysis.verdict import Thresholds
    from roboscale.records.models import NodeHeader, OneWayEntry, TrialParams
    from roboscale.spec.planner import TrialPlan
    from roboscale.spec.schema import Sweep

monotonic_ns = time.monotonic_ns
ACK_SLOTS = 64  # > the most measuring nodes; ids stay in ROS 1's int32 up to 30 M messages
ACK_KIND = MessageKind("bytes", 4)
DRAIN_POLL_S = 0.005


def ack_id(seq: int, node: int) -> int:
    return seq * ACK_SLOTS + node if seq >= 0 else -(-seq * ACK_SLOTS + node)


def split_ack(ack: int) -> tuple[int, int]:
    """(message id, node) of an ack id; probes keep their negative id."""
    seq, node = divmod(abs(ack), ACK_SLOTS)
    return (seq, node) if ack >= 0 else (-seq, node)


@dataclass(frozen=True, kw_only=True)
class FlowConfig(StreamConfig):
    workload: str
    node: int  # 0: the publisher; 1..nodes: measuring nodes
    nodes: int
    topic_in: str  # what a measuring node reads
    topic_out: str  # the publisher's topic, a chain hop's next topic, "" for none
    topic_ack: str
    ack: bool

    @classmethod
    def from_dict(cls, d: object) -> Self:
        f = Fields(d, "config")
        return cls(
            **stream_fields(f),
            workload=f.text("workload"),
            node=f.whole("node"),
            nodes=f.whole("nodes"),
            topic_in=f.text("topic_in"),
            topic_out=f.text("topic_out"),
            topic_ack=f.text("topic_ack"),
            ack=f.flag("ack"),
        )


def _wait(done: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(DRAIN_POLL_S)


class Source:
    """Node 0: publishes the stream and notes each node's acknowledgement."""

    paces = True

    def __init__(self, session: Session, cfg: FlowConfig) -> None:
        self.cfg = cfg
        self.counters = Counters()
        self.t_intended = new_column(cfg.total)
        self.t_sent = new_column(cfg.total)
        self.t_acked = [new_column(cfg.total) for _ in range(cfg.nodes)]
        # One count per node: rospy calls back from one thread per publishing node.
        self._acks = array("q", bytes(8 * cfg.nodes))
        self._probed: set[int] = set()
        self._matched = threading.Event()
        self._pub = session.publisher(cfg.topic_out, cfg.kind, cfg.publisher_queue)
        session.subscribe(cfg.topic_ack, ACK_KIND, self._on_ack, cfg.subscriber_queue)

    def _on_ack(self, ack: int, _msg: object) -> None:
        now = monotonic_ns()
        seq, node = split_ack(ack)
        c = self.counters
        if not 1 <= node <= self.cfg.nodes or seq >= self.cfg.total:
            c.out_of_range += 1
        elif seq < 0:
            c.probes += 1
            self._probed.add(node)
            if len(self._probed) == self.cfg.nodes:
                self._matched.set()
        elif self.t_acked[node - 1][seq]:
            c.duplicates += 1
        else:
            self.t_acked[node - 1][seq] = now
            self._acks[node - 1] += 1

    def wait_for_match(self) -> bool:
        """Probe until every measuring node acknowledged one probe."""
        return probe_until_matched(self._pub, self._matched, self.cfg)

    def no_match(self) -> str:
        return f"not every node answered within {self.cfg.match_timeout_s:g} s"

    def finish(self) -> None:
        return None

    def header(self) -> dict[str, object]:
        return {"pair": 0, "flow_node": self.cfg.node}

    def run(self) -> None:
        cfg = self.cfg
        start = monotonic_ns() + 1_000_000
        pace(self._pub.send, cfg.total, cfg.rate_hz, self.t_intended, self.t_sent, start)
        if cfg.ack:
            _wait(lambda: sum(self._acks) >= cfg.total * cfg.nodes, cfg.drain_s)
        self.counters.received = sum(self._acks)

    def columns(self) -> dict[str, array[int]]:
        w = self.cfg.warmup
        cols = {
            "seq": array("q", range(self.cfg.messages)),
            "t_intended": self.t_intended[w:],
            "t_sent": self.t_sent[w:],
        }
        if self.cfg.ack:
            cols.update({f"t_ack_{k + 1}": col[w:] for k, col in enumerate(self.t_acked)})
        return cols


class Sink:
    """A listener or a chain hop: notes arrivals, forwards (chain), acknowledges."""

    paces = False

    def __init__(self, session: Session, cfg: FlowConfig) -> None:
        self.cfg = cfg
        self.counters = Counters()
        self.t_echoed = new_column(cfg.total)
        # Publishers first: native-proc exports what exists when the node subscribes.
        self._ack = session.publisher(cfg.topic_ack, ACK_KIND, cfg.publisher_queue)
        self._next = (
            session.publisher(cfg.topic_out, cfg.kind, cfg.publisher_queue)
            if cfg.topic_out
            else None
        )
        session.subscribe(cfg.topic_in, cfg.kind, self._on_message, cfg.subscriber_queue)

    def _on_message(self, seq: int, msg: object) -> None:
        now = monotonic_ns()
        c = self.counters
        if seq >= self.cfg.total:
            c.out_of_range += 1
        elif seq >= 0 and self.t_echoed[seq]:
            c.duplicates += 1
        elif seq >= 0:
            self.t_echoed[seq] = now
            c.received += 1
        # Forward before acknowledging: the ack must not delay the next hop.
        if self._next is not None:
            self._next.forward(msg)
        if seq < 0 or self.cfg.ack:
            self._ack.send(ack_id(seq, self.cfg.node), now)

    def wait_for_match(self) -> bool:
        return True

    def no_match(self) -> str:
        return ""

    def run(self) -> None:
        return None

    def finish(self) -> None:
        """After the publisher finished: wait for the stream's tail, up to drain_s."""
        _wait(lambda: self.counters.received >= self.cfg.total, self.cfg.drain_s)

    def drain(self) -> None:
        self.finish()

    def header(self) -> dict[str, object]:
        return {"pair": 0, "flow_node": self.cfg.node}

    def columns(self) -> dict[str, array[int]]:
        w = self.cfg.warmup
        return {"seq": array("q", range(self.cfg.messages)), "t_echoed": self.t_echoed[w:]}


class OneWay:
    """fanout, ping or chain. Node 0 publishes; measuring nodes 1..K listen on their own
    endpoints (key = node); the publisher connects to every one, a chain hop also to the
    hop before it. Names sort in flow order, so analysis finds hop k after hop k-1."""

    emulated_hosts = True  # nodes spread over the hosts (host_of)
    log_words = ("one_way_us", "reached all", "one-way")
    replays = False

    def __init__(self, name: str, axes: tuple[str, ...], relays: bool) -> None:
        self.name = name
        self.axes = axes
        self.relays = relays  # measuring nodes forward to the next one (a chain)

    def variants(self, sweep: Sweep) -> list[Variant]:
        """Each run of the workload, crossed only with the axes it uses."""
        axis = "chain_length" if self.relays else "listeners"
        counted = axis in self.axes  # ping has one listener
        out = []
        for n in getattr(sweep, axis) if counted else [1]:
            for ack in sweep.ack:
                label = f"{self.name}{n}{'ack' if ack else ''}" if counted else self.name
                label += "" if counted or not ack else "pong"
                fixed = (
                    VariantFields(chain_length=n, ack=ack)
                    if self.relays
                    else VariantFields(listeners=n, ack=ack)
                )
                out.append(Variant(fixed, label))
        return out

    def measured_nodes(self, t: TrialPlan) -> int:
        return t.chain_length - 1 if self.relays else t.listeners

    def describe(self, entry: TrialParams) -> str:
        """For a table cell: "chain of 5 ack", "fanout x3", "ping-pong"."""
        ack = " ack" if entry.ack else ""
        if self.relays:
            return f"{self.name} of {entry.chain_length}{ack}"
        if "listeners" in self.axes:
            return f"{self.name} x{entry.listeners}{ack}"
        return f"{self.name}-pong" if entry.ack else self.name

    def series_names(self, entry: TrialParams) -> tuple[str, str]:
        """Labels of the one-way series (a chain's end to end) and of the round trip."""
        if self.relays:
            return "end-to-end", "every hop"
        if "listeners" in self.axes:
            return f"{entry.listeners} listeners", f"{entry.listeners} listeners"
        return (f"{self.name}-pong" if entry.ack else self.name), f"{self.name}-pong"

    def host_of(self, t: TrialPlan, key: int) -> int:
        """Node 0 (the publisher) or measuring node 1..K: a chain walks the hosts in turn;
        listeners spread over the hosts but the publisher's."""
        if t.hosts == 1:
            return 0
        if self.relays:
            return key % t.hosts
        return 0 if key == 0 else 1 + (key - 1) % (t.hosts - 1)

    def node_name(self, t: TrialPlan, node: int) -> str:
        if node == 0:
            return f"source_t{t.index:04d}"
        role = "hop" if self.relays else "listener"
        return f"{role}{node:02d}_t{t.index:04d}"

    def _topics(self, t: TrialPlan, node: int) -> tuple[str, str]:
        """(topic read, topic written) of a node; chain hop k reads hop_k, writes hop_k+1."""
        prefix = f"/t{t.index:04d}"
        if not self.relays:
            return ("", f"{prefix}/flow") if node == 0 else (f"{prefix}/flow", "")
        last = node == self.measured_nodes(t)
        return (
            f"{prefix}/hop_{node}" if node else "",
            "" if last else f"{prefix}/hop_{node + 1}",
        )

    def config(self, t: TrialPlan, node: int) -> FlowConfig:
        topic_in, topic_out = self._topics(t, node)
        return FlowConfig(
            workload=self.name,
            node=node,
            nodes=self.measured_nodes(t),
            topic_in=topic_in,
            topic_out=topic_out,
            topic_ack=f"/t{t.index:04d}/ack",
            ack=t.ack,
            **t.stream_settings(),
        )

    def _node(self, t: TrialPlan, node: int) -> NodePlan:
        if node == 0:
            connects = tuple(range(1, self.measured_nodes(t) + 1))
        else:
            connects = (node - 1,) if self.relays and node > 1 else ()
        return NodePlan(
            self.node_name(t, node), "source" if node == 0 else "sink", self.host_of(t, node),
            node, self.config(t, node), listens=node > 0, connects=connects,
        )  # fmt: skip

    def processes(self, t: TrialPlan, together: bool) -> list[list[ProcessPlan]]:
        """Measuring nodes first, then the publisher; `together`: all in one process
        (placement "pair": in-process delivery), the publisher last."""
        sinks = [self._node(t, k) for k in range(1, self.measured_nodes(t) + 1)]
        source = self._node(t, 0)
        if together:
            return [[ProcessPlan(f"group_t{t.index:04d}", "group", (*sinks, source))]]
        return [
            [ProcessPlan(n.name, n.role, (n,)) for n in sinks],
            [ProcessPlan(source.name, source.role, (source,))],
        ]

    def drive(self, t: TrialPlan) -> AgentProtocol:
        return AgentProtocol(
            pacers=("source", "group"),
            stopped=("sink",),
            done_timeout_s=t.intended_duration_s * 3 + t.drain_s * 2 + 30,
            stop_timeout_s=t.drain_s + 30,
            close=True,  # nodes keep their sessions open until every node drained
        )

    def read_program(self, role: str, data: object) -> FlowConfig:
        return FlowConfig.from_dict(data)

    def start(self, role: str, session: Session, cfg: ProgramConfig) -> Program:
        assert isinstance(cfg, FlowConfig)
        return Source(session, cfg) if cfg.node == 0 else Sink(session, cfg)

    def collect(
        self, t: TrialPlan, raw: Path, hosts: list[str]
    ) -> tuple[list[pa.Table], list[NodeHeader]]:
        """One record table per measuring node, joined with the publisher's send times:
        `t_echoed` = arrival at node k, `t_received` = node k's ack back (null without)."""
        import numpy as np

        from roboscale.records.models import node_headers
        from roboscale.records.raw import read_raw
        from roboscale.records.store import records_table

        src_head, src = read_raw(raw / f"{self.node_name(t, 0)}.raw")
        sent = {k: np.frombuffer(src[k], dtype=np.int64) for k in ("seq", "t_intended", "t_sent")}
        tables, heads = [], node_headers([src_head])
        for k in range(1, self.measured_nodes(t) + 1):
            raw_head, cols = read_raw(raw / f"{self.node_name(t, k)}.raw")
            (head,) = node_headers([raw_head])
            acked = src.get(f"t_ack_{k}")
            columns = {
                **sent,
                "t_echoed": np.frombuffer(cols["t_echoed"], dtype=np.int64),
                "t_received": (
                    np.frombuffer(acked, dtype=np.int64)
                    if acked is not None
                    else np.zeros(len(sent["seq"]), dtype=np.int64)
                ),
            }
            host = hosts[self.host_of(t, k)]
            tables.append(records_table(t.trial, head.node, host, t.payload_bytes, columns))
            heads.append(head)
        return tables, heads

    def summarize(
        self,
        table: pa.Table,
        params: TrialParams,
        th: Thresholds,
        nodes: Sequence[NodeHeader] = (),
    ) -> OneWayEntry:
        from roboscale.analysis.oneway import summarize_oneway
        from roboscale.records.models import OneWayEntry
        from roboscale.workloads.oneway_figures import flow_figures

        measured, per_node = summarize_oneway(table, params, th)
        flow = flow_figures(table, params) if table.num_rows else None
        return measured.entry(OneWayEntry, per_node=per_node, flow=flow)

    def figures(self) -> list[FigureSpec]:
        from roboscale.analysis import flowplots, interactive

        return [
            *interactive.stream_figures(),
            FigureSpec("One-way latency by payload size", "Lab-report style box plots of the "
                       "one-way workloads: a box per listener count (fan-out, pooled over "
                       "listeners), per ping mode (the ack's round trip beside it), or per chain "
                       "hop (arrival minus the previous hop's) and end to end; whiskers at p1 "
                       "and p99.", flowplots.flow_boxes_interactive),
        ]  # fmt: skip

    def tables(self) -> list[TableSpec]:
        from roboscale.analysis.tables import flow_table

        return [TableSpec("One-way workloads per trial", flow_table)]


FANOUT = OneWay("fanout", ("listeners", "ack"), relays=False)
PING = OneWay("ping", ("ack",), relays=False)
CHAIN = OneWay("chain", ("chain_length", "ack"), relays=True)
