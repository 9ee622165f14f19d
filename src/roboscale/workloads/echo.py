"""The echo workload: the thesis's round trips between senders and echoers.

The sender aims every message at an absolute deadline `start + i/rate` and
records that deadline beside the real send time, so a stalled sender shows up
as `t_sent - t_intended` instead of silently lowering the rate (no coordinated
omission). Replies are matched by id; a reply that never comes stays 0 (lost).

Pair p has a sender and an echoer; the echoer listens (its endpoint key is p), the
sender connects to it (key pairs + p). Stdlib only at import: the driver half
imports numpy, pyarrow and the analysis inside its methods.
"""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Self

from roboscale.backends.base import Callback, MessageKind, Publisher, Session
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
)
from roboscale.workloads.replay import (
    Stream,
    StreamTopic,
    open_stream,
    pace_stream,
    write_stream_file,
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
    from roboscale.records.models import EchoEntry, NodeHeader, TrialParams
    from roboscale.spec.planner import TrialPlan
    from roboscale.spec.schema import Sweep

__all__ = ["WORKLOAD", "EchoConfig", "Echoer", "Sender", "pace"]
NAME = "echo"
monotonic_ns = time.monotonic_ns


@dataclass(frozen=True, kw_only=True)
class EchoConfig(StreamConfig):
    pair: int
    topic_out: str
    topic_back: str
    # Replay (workloads/replay.py): `stata` or a stream file; one topic pair per stream topic.
    replay: str = ""
    stream_topics: tuple[str, ...] = ()
    # Each stream topic's message kind (its recorded type), and the serialization the
    # stream is in: the backend's `replay_encoding` ("": as recorded).
    stream_kinds: tuple[MessageKind, ...] = ()
    stream_encoding: str = ""
    rate_factor: float = 1.0
    loop: bool = False
    seed: int = 0
    record: str = ""  # the echoer's capture file (--record): what it received, and when

    @classmethod
    def from_dict(cls, d: object) -> Self:
        f = Fields(d, "config")
        return cls(
            **stream_fields(f),
            pair=f.whole("pair"),
            topic_out=f.text("topic_out"),
            topic_back=f.text("topic_back"),
            replay=f.text("replay", ""),
            stream_topics=f.texts("stream_topics"),
            stream_kinds=tuple(MessageKind.read(k) for k in f.nested_list("stream_kinds")),
            stream_encoding=f.text("stream_encoding", ""),
            rate_factor=f.number("rate_factor", 1.0),
            loop=f.flag("loop", False),
            seed=f.whole("seed", 0),
            record=f.text("record", ""),
        )

    @property
    def topic_suffixes(self) -> tuple[str, ...]:
        """Each stream topic under the pair's topics (one unnamed topic without replay)."""
        return tuple(self.stream_topics) or ("",)

    def kind_of(self, topic: int) -> MessageKind:
        """The message kind of stream topic `topic` (the trial's without replay)."""
        return self.stream_kinds[topic] if self.stream_kinds else self.kind


class Sender:
    paces = True

    def __init__(self, session: Session, cfg: EchoConfig) -> None:
        self.cfg = cfg
        self.counters = Counters()
        self.t_intended = new_column(cfg.total)
        self.t_sent = new_column(cfg.total)
        self.t_received = new_column(cfg.total)
        self._stream: Stream | None = None
        self._schedule: list[tuple[int, int]] = []
        if cfg.replay:
            self._stream = open_stream(cfg.replay, cfg.seed, cfg.stream_encoding)
            self._schedule = list(self._stream.schedule(cfg.total, cfg.loop))
            self._stream.prepare({i for _, i in self._schedule})
        self._matched = [threading.Event() for _ in cfg.topic_suffixes]
        self._pubs: list[Publisher] = []
        for k, suffix in enumerate(cfg.topic_suffixes):
            kind = cfg.kind_of(k)
            self._pubs.append(session.publisher(cfg.topic_out + suffix, kind, cfg.publisher_queue))
            session.subscribe(
                cfg.topic_back + suffix, kind, self._reply_of(k), cfg.subscriber_queue
            )
        self._pub = self._pubs[0]

    def _reply_of(self, topic: int) -> Callback:
        if topic == 0:
            return self._on_reply

        def on_reply(seq: int, msg: object) -> None:
            if seq < 0:
                self._matched[topic].set()
            self._on_reply(seq, msg)

        return on_reply

    def _on_reply(self, seq: int, _msg: object) -> None:
        now = monotonic_ns()
        c = self.counters
        if seq < 0:
            c.probes += 1
            self._matched[0].set()
        elif seq >= self.cfg.total:
            c.out_of_range += 1
        elif self.t_received[seq]:
            c.duplicates += 1
        else:
            self.t_received[seq] = now
            c.received += 1

    def wait_for_match(self) -> bool:
        """Probe until one echo returns on every topic, so that connection setup is never
        counted as loss."""
        pairs = zip(self._pubs, self._matched, strict=True)
        return all(probe_until_matched(pub, matched, self.cfg) for pub, matched in pairs)

    def no_match(self) -> str:
        return f"no echo within {self.cfg.match_timeout_s:g} s"

    def finish(self) -> None:
        return None

    def header(self) -> dict[str, object]:
        return {"pair": self.cfg.pair}

    def run(self) -> None:
        start = monotonic_ns() + 1_000_000
        if self._stream is None:
            pace(
                self._pub.send,
                self.cfg.total,
                self.cfg.rate_hz,
                self.t_intended,
                self.t_sent,
                start,
            )
        else:
            pubs, factor = self._pubs, self.cfg.rate_factor

            def send(seq: int, stamp: int, topic: int, body: bytes) -> None:
                pubs[topic].send_body(seq, stamp, body)

            stream, schedule = self._stream, self._schedule
            pace_stream(send, schedule, stream, factor, self.t_intended, self.t_sent, start)
        deadline = time.monotonic() + self.cfg.drain_s
        while self.counters.received < self.cfg.total and time.monotonic() < deadline:
            time.sleep(0.005)

    def columns(self) -> dict[str, array[int]]:
        w = self.cfg.warmup
        n = self.cfg.messages
        return {
            "seq": array("q", range(n)),
            "t_intended": self.t_intended[w:],
            "t_sent": self.t_sent[w:],
            "t_received": self.t_received[w:],
        }


class Echoer:
    """Republishes every message unchanged and notes when each one arrived."""

    paces = False

    def __init__(self, session: Session, cfg: EchoConfig) -> None:
        self.cfg = cfg
        self.counters = Counters()
        self.t_echoed = new_column(cfg.total)
        self._session = session
        # (receive time, topic, body): kept in memory, written after the trial (finish)
        self._captured: list[tuple[int, int, bytes]] | None = [] if cfg.record else None
        for k, suffix in enumerate(cfg.topic_suffixes):
            kind = cfg.kind_of(k)
            pub = session.publisher(cfg.topic_back + suffix, kind, cfg.publisher_queue)
            on_message = self._echo_to(pub, k)
            session.subscribe(cfg.topic_out + suffix, kind, on_message, cfg.subscriber_queue)

    def _echo_to(self, pub: Publisher, topic: int) -> Callback:
        kind = self.cfg.kind_of(topic)

        def on_message(seq: int, msg: object) -> None:
            if 0 <= seq < self.cfg.total:
                if not self.t_echoed[seq]:
                    self.t_echoed[seq] = now = monotonic_ns()
                    self.counters.received += 1
                    if self._captured is not None:
                        self._captured.append((now, topic, self._session.body_of(msg, kind)))
            elif seq >= 0:
                self.counters.out_of_range += 1
            pub.forward(msg)

        return on_message

    def wait_for_match(self) -> bool:
        return True

    def no_match(self) -> str:
        return ""

    def run(self) -> None:
        return None

    def finish(self) -> None:
        """Write what was captured, stamped on the wall clock, as a stream file (in the
        serialization it arrived in)."""
        if self._captured is None:
            return
        to_wall = time.time_ns() - monotonic_ns()
        encoding, names = self.cfg.stream_encoding, self.cfg.topic_suffixes
        topics = [StreamTopic(self.cfg.topic_out + s, "", encoding) for s in names]
        frames = [(t + to_wall, k, body) for t, k, body in self._captured]
        write_stream_file(Path(self.cfg.record), topics, frames)

    def header(self) -> dict[str, object]:
        return {"pair": self.cfg.pair}

    def columns(self) -> dict[str, array[int]]:
        w = self.cfg.warmup
        return {"seq": array("q", range(self.cfg.messages)), "t_echoed": self.t_echoed[w:]}


def node_name(t: TrialPlan, role: str, pair: int) -> str:
    return f"{role}_{pair}_t{t.index:04d}"


class EchoWorkload:
    """Round trips: the sender's rows, `t_echoed` at the echoer, `t_received` back home."""

    name = NAME
    axes = ("pairs",)
    emulated_hosts = True
    log_words = ("rtt_us", "back", "RTT")
    replays = True  # its senders can replay a stream (spec `replay`)

    def variants(self, sweep: Sweep) -> list[Variant]:
        return [Variant()]

    def measured_nodes(self, t: TrialPlan) -> int:
        return t.pairs

    def host_of(self, t: TrialPlan, key: int) -> int:
        """Keys 0..pairs-1 are the echoers, pairs.. the senders."""
        return t.host_of("echoer", key) if key < t.pairs else t.host_of("sender", key - t.pairs)

    def _config(self, t: TrialPlan, pair: int) -> EchoConfig:
        from roboscale.backends.base import get_backend
        from roboscale.bags import replay_kinds, replay_stream  # a bag: a stream file, once

        prefix = f"t{t.index:04d}"
        encoding = get_backend(t.backend).replay_encoding if t.replay else ""
        return EchoConfig(
            pair=pair,
            topic_out=f"/{prefix}/chatter_m_{pair}",
            topic_back=f"/{prefix}/chatter_s_{pair}",
            replay=replay_stream(t.replay, encoding, t.replay_topics)[0] if t.replay else "",
            stream_topics=t.stream_topics,
            stream_kinds=replay_kinds(t.replay, t.replay_topics) if t.replay else (),
            stream_encoding=encoding,
            rate_factor=t.rate_factor,
            loop=t.loop,
            seed=t.seed,
            record=f"{t.record}/{node_name(t, 'echoer', pair)}.rec" if t.record else "",
            **t.stream_settings(),
        )

    def _nodes(self, t: TrialPlan, pair: int) -> tuple[NodePlan, NodePlan]:
        cfg = self._config(t, pair)
        echoer = NodePlan(
            node_name(t, "echoer", pair), "echoer", t.host_of("echoer", pair), pair, cfg,
            listens=True,
        )  # fmt: skip
        sender = NodePlan(
            node_name(t, "sender", pair), "sender", t.host_of("sender", pair), t.pairs + pair,
            cfg, connects=(pair,),
        )  # fmt: skip
        return echoer, sender

    def processes(self, t: TrialPlan, together: bool) -> list[list[ProcessPlan]]:
        """Echoers first, then senders; `together`: each pair in one process (placement
        "pair", one host only)."""
        pairs = [self._nodes(t, p) for p in range(t.pairs)]
        if together:
            return [
                [ProcessPlan(f"pair_{p}_t{t.index:04d}", "pair", n) for p, n in enumerate(pairs)]
            ]
        return [
            [ProcessPlan(e.name, e.role, (e,)) for e, _ in pairs],
            [ProcessPlan(s.name, s.role, (s,)) for _, s in pairs],
        ]

    def drive(self, t: TrialPlan) -> AgentProtocol:
        return AgentProtocol(
            pacers=("sender", "pair"),
            stopped=("echoer",),
            done_timeout_s=t.intended_duration_s * 3 + t.drain_s + 30,
            stop_timeout_s=30,
        )

    def read_program(self, role: str, data: object) -> EchoConfig:
        return EchoConfig.from_dict(data)

    def start(self, role: str, session: Session, cfg: ProgramConfig) -> Program:
        assert isinstance(cfg, EchoConfig)
        return Sender(session, cfg) if role == "sender" else Echoer(session, cfg)

    def collect(
        self, t: TrialPlan, raw: Path, hosts: list[str]
    ) -> tuple[list[pa.Table], list[NodeHeader]]:
        """Join each sender's rows with its echoer's arrival times into record tables."""
        import numpy as np

        from roboscale.records.models import node_headers
        from roboscale.records.raw import read_raw
        from roboscale.records.store import records_table

        tables, nodes = [], []
        for pair in range(t.pairs):
            s_head, s_cols = read_raw(raw / f"{node_name(t, 'sender', pair)}.raw")
            e_head, e_cols = read_raw(raw / f"{node_name(t, 'echoer', pair)}.raw")
            sender, echoer = node_headers([s_head, e_head])
            cols = {k: np.frombuffer(v, dtype=np.int64) for k, v in s_cols.items()}
            cols["t_echoed"] = np.frombuffer(e_cols["t_echoed"], dtype=np.int64)
            host = hosts[t.host_of("sender", pair)]
            tables.append(records_table(t.trial, sender.node, host, t.payload_bytes, cols))
            nodes += [sender, echoer]
        return tables, nodes

    def summarize(
        self,
        table: pa.Table,
        params: TrialParams,
        th: Thresholds,
        nodes: Sequence[NodeHeader] = (),
    ) -> EchoEntry:
        from roboscale.analysis.stats import summarize_round_trips
        from roboscale.records.models import EchoEntry

        return summarize_round_trips(table, params, th).entry(EchoEntry)

    def figures(self) -> list[FigureSpec]:
        from roboscale.analysis import interactive

        return [*interactive.stream_figures(), *[
            FigureSpec("Latency by payload and rate", "Round trips per payload and rate, "
                       "backends side by side: median, quartiles, whiskers at p1 and p99.",
                       interactive.box_by_size),
            FigureSpec("Latency against node count", "Thesis Figure 4.4 style: round trip "
                       "(log scale) against nodes, N = 2 x pairs, one line per rate; runs "
                       "pooled, the 95 % interval in the hover.", interactive.latency_vs_nodes),
            FigureSpec("Latency against host count", "Thesis Experiment 9: round trip against "
                       "the number of emulated hosts, half of them senders talking to every "
                       "echoer host; the 95 % interval in the hover.",
                       interactive.latency_vs_hosts),
        ]]  # fmt: skip

    def tables(self) -> list[TableSpec]:
        from roboscale.analysis.tables import comparison_table, percentile_table

        return [
            TableSpec("Backends side by side", comparison_table, lead=True),
            TableSpec("Percentiles per trial", percentile_table),
        ]


WORKLOAD = EchoWorkload()
