"""What every workload's nodes share: the paced stream's settings, its counters, open-loop
pacing and the probes that match a path before counting. Stdlib only (ros1 agents)."""

from __future__ import annotations

import threading
import time
from array import array
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Self, TypedDict

from roboscale.backends.base import MessageKind, Publisher
from roboscale.jsonfields import Fields

monotonic_ns = time.monotonic_ns
PROBE_INTERVAL_S = 0.05


@dataclass(frozen=True, kw_only=True)
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
    def from_dict(cls, d: object) -> Self:
        """As the lab wrote it (JSON), each field checked."""
        return cls(**stream_fields(Fields(d, "config")))

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class StreamFields(TypedDict):
    """StreamConfig's fields: what every workload's node config holds of its stream."""

    kind: MessageKind
    rate_hz: float
    messages: int
    warmup: int
    drain_s: float
    publisher_queue: int
    subscriber_queue: int
    wait_for_match: bool
    match_timeout_s: float


def stream_fields(f: Fields) -> StreamFields:
    return StreamFields(
        kind=MessageKind.read(f.nested("kind")),
        rate_hz=f.number("rate_hz"),
        messages=f.whole("messages"),
        warmup=f.whole("warmup"),
        drain_s=f.number("drain_s"),
        publisher_queue=f.whole("publisher_queue"),
        subscriber_queue=f.whole("subscriber_queue"),
        wait_for_match=f.flag("wait_for_match"),
        match_timeout_s=f.number("match_timeout_s"),
    )


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
    deadlines = (start_ns + int(i * period_ns) for i in range(total))
    pace_deadlines(send, deadlines, t_intended, t_sent)


def pace_deadlines(
    send: Callable[[int, int], None],
    deadlines: Iterable[int],
    t_intended: array[int],
    t_sent: array[int],
) -> None:
    """`send(i, now)` at each absolute deadline (the i-th, in monotonic ns), recording it
    beside the real send time; behind schedule, at once. The next deadline is drawn
    before the wait, so whatever its iterator prepares is never counted as latency."""
    sleep = time.sleep
    clock = monotonic_ns
    for i, intended in enumerate(deadlines):
        delay = intended - clock()
        if delay > 0:
            sleep(delay * 1e-9)
        now = clock()
        t_intended[i] = intended
        t_sent[i] = now
        send(i, now)
