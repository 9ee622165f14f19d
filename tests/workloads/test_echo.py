"""The echo logic over an in-memory loopback session (the real transports are
tested in tests/backends). Nothing here asserts on elapsed time."""

from __future__ import annotations

from array import array

from roboscale.backends.base import Callback, MessageKind
from roboscale.workloads.echo import EchoConfig, Echoer, Sender, pace


class Loop:
    """A session whose publishers call subscribers directly, dropping chosen ids."""

    def __init__(self, drop: set[int] | None = None) -> None:
        self.subs: dict[str, list[Callback]] = {}
        self.drop = drop or set()

    def publisher(self, topic: str, kind: MessageKind, queue: int) -> LoopPublisher:
        return LoopPublisher(self, topic)

    def subscribe(self, topic: str, kind: MessageKind, callback: Callback, queue: int) -> None:
        self.subs.setdefault(topic, []).append(callback)

    def close(self) -> None:
        pass


class LoopPublisher:
    def __init__(self, loop: Loop, topic: str) -> None:
        self.loop, self.topic = loop, topic

    def send(self, seq: int, stamp_ns: int) -> None:
        self.forward(seq)

    def forward(self, msg: object) -> None:
        assert isinstance(msg, int)
        if msg in self.loop.drop and self.topic == "out":
            return
        for cb in self.loop.subs.get(self.topic, []):
            cb(msg, msg)


def config(**over: object) -> EchoConfig:
    base: dict[str, object] = {
        "pair": 0,
        "topic_out": "out",
        "topic_back": "back",
        "kind": {"kind": "text", "size": 11},
        "rate_hz": 1e6,
        "messages": 10,
        "warmup": 3,
        "drain_s": 0.0,
        "publisher_queue": 0,
        "subscriber_queue": 0,
        "wait_for_match": True,
        "match_timeout_s": 1.0,
    }
    base.update(over)
    return EchoConfig.from_dict(base)


def test_pace_records_deadlines_in_order() -> None:
    sent: list[int] = []
    t_int, t_sent = array("q", [0] * 5), array("q", [0] * 5)
    pace(lambda seq, _ts: sent.append(seq), 5, 1000.0, t_int, t_sent, start_ns=10)
    assert sent == [0, 1, 2, 3, 4]
    assert list(t_int) == [10, 1_000_010, 2_000_010, 3_000_010, 4_000_010]
    assert all(s >= i for s, i in zip(t_sent, t_int, strict=True))


def test_round_trip_counts_loss_and_drops_warmup() -> None:
    loop = Loop(drop={4, 7})
    cfg = config()
    echoer = Echoer(loop, cfg)  # type: ignore[arg-type]
    sender = Sender(loop, cfg)  # type: ignore[arg-type]
    assert sender.wait_for_match()
    sender.run()
    cols = sender.columns()
    assert list(cols["seq"]) == list(range(10))
    lost = [i for i, t in enumerate(cols["t_received"]) if t == 0]
    assert lost == [1, 4]  # ids 4 and 7 overall, minus 3 warm-up messages
    assert sender.counters.received == 11
    assert [i for i, t in enumerate(echoer.columns()["t_echoed"]) if t == 0] == [1, 4]


def test_duplicates_and_foreign_ids_are_counted_not_stored() -> None:
    sender = Sender(Loop(), config())  # type: ignore[arg-type]
    sender._on_reply(2, None)
    sender._on_reply(2, None)
    sender._on_reply(999, None)
    assert sender.counters.duplicates == 1
    assert sender.counters.out_of_range == 1
    assert sender.counters.received == 1


def test_no_match_without_echoer() -> None:
    sender = Sender(Loop(), config(match_timeout_s=0.1))  # type: ignore[arg-type]
    assert not sender.wait_for_match()


def test_thesis_compat_skips_matching() -> None:
    sender = Sender(Loop(), config(wait_for_match=False))  # type: ignore[arg-type]
    assert sender.wait_for_match()
