"""The one-way workload logic over an in-memory session (real transports: tests/lab)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import pytest

from roboscale.backends.base import Callback, MessageKind
from roboscale.workloads.oneway import ACK_SLOTS, FlowConfig, Sink, Source, ack_id, split_ack


class Bus:
    """Publishers call every subscriber of their topic at once; `drop` loses (topic, id)."""

    def __init__(self, drop: set[tuple[str, int]] | None = None) -> None:
        self.subs: dict[str, list[Callback]] = {}
        self.drop = drop or set()

    def publisher(self, topic: str, kind: MessageKind, queue: int) -> Pub:
        return Pub(self, topic)

    def subscribe(self, topic: str, kind: MessageKind, callback: Callback, queue: int) -> None:
        self.subs.setdefault(topic, []).append(callback)

    def close(self) -> None:
        pass


class Pub:
    def __init__(self, bus: Bus, topic: str) -> None:
        self.bus, self.topic = bus, topic

    def send(self, seq: int, stamp_ns: int) -> None:
        self.forward(seq)

    def forward(self, msg: object) -> None:
        assert isinstance(msg, int)
        if (self.topic, msg) not in self.bus.drop:
            for cb in self.bus.subs.get(self.topic, []):
                cb(msg, msg)


def cfg(node: int, topic_in: str, topic_out: str, **over: Any) -> FlowConfig:
    base: dict[str, Any] = {
        "workload": "chain", "node": node, "nodes": 2, "topic_in": topic_in,
        "topic_out": topic_out, "topic_ack": "ack", "kind": {"kind": "bytes", "size": 8},
        "rate_hz": 1e6, "messages": 6, "warmup": 2, "drain_s": 0.0, "publisher_queue": 0,
        "subscriber_queue": 0, "wait_for_match": True, "match_timeout_s": 1.0, "ack": True,
    }  # fmt: skip
    base.update(over)
    return FlowConfig.from_dict(base)


@pytest.mark.parametrize(("seq", "node"), [(0, 1), (5, 63), (10_000_000, 7), (-1, 1), (-42, 3)])
def test_ack_ids_round_trip(seq: int, node: int) -> None:
    assert split_ack(ack_id(seq, node)) == (seq, node)
    assert node < ACK_SLOTS


def test_chain_forwards_records_and_acknowledges() -> None:
    # hop 1 never gets message 4 (warm-up 2, so record seq 2); hop 2's ack of 5 is lost.
    bus = Bus(drop={("hop_1", 4), ("ack", ack_id(5, 2))})
    hop2 = Sink(bus, cfg(2, "hop_2", ""))  # type: ignore[arg-type]
    hop1 = Sink(bus, cfg(1, "hop_1", "hop_2"))  # type: ignore[arg-type]
    source = Source(bus, cfg(0, "", "hop_1"))  # type: ignore[arg-type]
    assert source.wait_for_match()
    source.run()
    src, c1, c2 = source.columns(), hop1.columns(), hop2.columns()
    assert list(src) == ["seq", "t_intended", "t_sent", "t_ack_1", "t_ack_2"]
    assert [bool(t) for t in c1["t_echoed"]] == [True, True, False, True, True, True]
    assert [bool(t) for t in c2["t_echoed"]] == [True, True, False, True, True, True]
    assert [bool(t) for t in src["t_ack_2"]] == [True, True, False, False, True, True]
    assert all(e >= s for e, s in zip(c1["t_echoed"], src["t_sent"], strict=True) if e)
    assert hop1.counters.received == 7 and source.counters.received == 7 + 7 - 1


def test_one_way_without_ack_acknowledges_probes_only() -> None:
    bus = Bus()
    sink = Sink(bus, cfg(1, "flow", "", nodes=1, ack=False))  # type: ignore[arg-type]
    source = Source(bus, cfg(0, "", "flow", nodes=1, ack=False))  # type: ignore[arg-type]
    assert source.wait_for_match()
    source.run()
    assert list(source.columns()) == ["seq", "t_intended", "t_sent"]
    assert source.counters.received == 0 and source.counters.probes == 1
    assert all(sink.columns()["t_echoed"])
    assert asdict(sink.counters)["received"] == 8


def test_no_match_when_a_node_is_missing() -> None:
    bus = Bus()
    Sink(bus, cfg(1, "flow", "", ack=False))  # type: ignore[arg-type]
    source = Source(bus, cfg(0, "", "flow", match_timeout_s=0.2))  # type: ignore[arg-type]
    assert not source.wait_for_match()  # node 2 of 2 never answers
