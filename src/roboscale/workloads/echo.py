"""Sender and echoer of the thesis's round-trip experiment, paced open-loop.

The sender aims every message at an absolute deadline `start + i/rate` and
records that deadline beside the real send time, so a stalled sender shows up
as `t_sent - t_intended` instead of silently lowering the rate (no coordinated
omission). Replies are matched by id; a reply that never comes stays 0 (lost).
"""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Self

from roboscale.backends.base import MessageKind, Publisher, Session
from roboscale.records.raw import new_column

monotonic_ns = time.monotonic_ns
PROBE_INTERVAL_S = 0.05


@dataclass(kw_only=True)
class StreamConfig:
    """How a paced stream is sent and received: what every workload shares."""

    kind: MessageKind
    rate_hz: float
    messages: int
    warmup: int
    drain_s: float
    publisher_queue: int
    subscriber_queue: int
    wait_for_match: bool
    match_timeout_s: float

    @property
    def total(self) -> int:
        return self.warmup + self.messages

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Self:
        fields = dict(d)
        fields["kind"] = MessageKind(**d["kind"])
        return cls(**fields)


@dataclass(kw_only=True)
class EchoConfig(StreamConfig):
    pair: int
    topic_out: str
    topic_back: str


def probe_until_matched(pub: Publisher, matched: threading.Event, cfg: StreamConfig) -> bool:
    """Send probes (negative ids) until `matched` is set by their answers, or time out."""
    if not cfg.wait_for_match:
        return True
    deadline = time.monotonic() + cfg.match_timeout_s
    probe = -1
    while time.monotonic() < deadline:
        pub.send(probe, monotonic_ns())
        if matched.wait(PROBE_INTERVAL_S):
            return True
        probe -= 1
    return False


@dataclass
class Counters:
    received: int = 0
    duplicates: int = 0
    out_of_range: int = 0
    probes: int = 0
    extra: dict[str, int] = field(default_factory=dict)


def pace(
    send: Callable[[int, int], None],
    total: int,
    rate_hz: float,
    t_intended: array[int],
    t_sent: array[int],
    start_ns: int,
) -> None:
    """Send `total` messages on absolute deadlines; behind schedule, send at once."""
    period_ns = 1e9 / rate_hz
    sleep = time.sleep
    clock = monotonic_ns
    for i in range(total):
        intended = start_ns + int(i * period_ns)
        delay = intended - clock()
        if delay > 0:
            sleep(delay * 1e-9)
        now = clock()
        t_intended[i] = intended
        t_sent[i] = now
        send(i, now)


class Sender:
    def __init__(self, session: Session, cfg: EchoConfig) -> None:
        self.cfg = cfg
        self.counters = Counters()
        self.t_intended = new_column(cfg.total)
        self.t_sent = new_column(cfg.total)
        self.t_received = new_column(cfg.total)
        self._matched = threading.Event()
        self._pub: Publisher = session.publisher(cfg.topic_out, cfg.kind, cfg.publisher_queue)
        session.subscribe(cfg.topic_back, cfg.kind, self._on_reply, cfg.subscriber_queue)

    def _on_reply(self, seq: int, _msg: object) -> None:
        now = monotonic_ns()
        c = self.counters
        if seq < 0:
            c.probes += 1
            self._matched.set()
        elif seq >= self.cfg.total:
            c.out_of_range += 1
        elif self.t_received[seq]:
            c.duplicates += 1
        else:
            self.t_received[seq] = now
            c.received += 1

    def wait_for_match(self) -> bool:
        """Probe until one echo returns, so that connection setup is never counted as loss."""
        return probe_until_matched(self._pub, self._matched, self.cfg)

    def run(self) -> None:
        start = monotonic_ns() + 1_000_000
        pace(self._pub.send, self.cfg.total, self.cfg.rate_hz, self.t_intended, self.t_sent, start)
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

    def __init__(self, session: Session, cfg: EchoConfig) -> None:
        self.cfg = cfg
        self.counters = Counters()
        self.t_echoed = new_column(cfg.total)
        self._pub = session.publisher(cfg.topic_back, cfg.kind, cfg.publisher_queue)
        session.subscribe(cfg.topic_out, cfg.kind, self._on_message, cfg.subscriber_queue)

    def _on_message(self, seq: int, msg: object) -> None:
        if 0 <= seq < self.cfg.total:
            if not self.t_echoed[seq]:
                self.t_echoed[seq] = monotonic_ns()
                self.counters.received += 1
        elif seq >= 0:
            self.counters.out_of_range += 1
        self._pub.forward(msg)

    def columns(self) -> dict[str, array[int]]:
        w = self.cfg.warmup
        return {"seq": array("q", range(self.cfg.messages)), "t_echoed": self.t_echoed[w:]}
