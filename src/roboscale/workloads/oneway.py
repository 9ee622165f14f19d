"""One-way workloads of the lab report (seed 003): fan-out, ping / ping-pong and chain.

Node 0 publishes, paced open loop like the echo sender (`pace`). Nodes 1..K
measure: each notes when a message first arrived (`t_echoed`); a chain hop then
forwards it unchanged to the next hop; with `ack`, each node acknowledges it with
a few bytes (ping-pong). Acks of all nodes share one topic, so the publisher has
one subscription (native-proc's bridge allows one per node); an ack's id packs
the message id and the node: `id * ACK_SLOTS + node`, negated for probes.

Probes (negative ids) go out until every measuring node acknowledged one, so the
whole path (every listener, every hop) is matched before counting. Nodes always
acknowledge probes, with or without `ack`. Stdlib only (ros1 agents).
"""

from __future__ import annotations

import threading
import time
from array import array
from dataclasses import dataclass
from typing import Any

from roboscale.backends.base import MessageKind, Session
from roboscale.records.raw import new_column
from roboscale.workloads.echo import Counters, StreamConfig, pace, probe_until_matched

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


@dataclass(kw_only=True)
class FlowConfig(StreamConfig):
    workload: str
    node: int  # 0: the publisher; 1..nodes: measuring nodes
    nodes: int
    topic_in: str  # what a measuring node reads
    topic_out: str  # the publisher's topic, a chain hop's next topic, "" for none
    topic_ack: str
    ack: bool


def _wait(done: Any, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not done() and time.monotonic() < deadline:
        time.sleep(DRAIN_POLL_S)


class Source:
    """Node 0: publishes the stream and notes each node's acknowledgement."""

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

    def drain(self) -> None:
        """After the publisher finished: wait for the stream's tail, up to drain_s."""
        _wait(lambda: self.counters.received >= self.cfg.total, self.cfg.drain_s)

    def columns(self) -> dict[str, array[int]]:
        w = self.cfg.warmup
        return {"seq": array("q", range(self.cfg.messages)), "t_echoed": self.t_echoed[w:]}
