"""Durable topics no peer can poison (#23 item 5), on real Zenoh sessions (loopback): a
peer that may publish tries a sequence jump to 2**64-1 under the operator's publisher id,
a flood of fake publisher ids and backlog replies in the operator's name; the import keeps
delivering the operator's commands, and nothing is replayed after a restart."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from roboscale.backends.base import free_port
from roboscale.runtime.bridge import Bridge, BridgeConfig
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor
from roboscale.runtime.wire import Codec, pack_header

from .conftest import wait_until
from .test_security import peer

FAKE_IDS = 70


class DurableSink(Node):
    def on_start(self) -> None:
        self.subscribe("/cmd", self.params["got"].append, durable=True)


@dataclass
class Robot:
    rt: Runtime
    bridge: Bridge
    got: list[Any]

    def close(self) -> None:
        self.bridge.close()
        self.rt.close()


def robot(endpoint: str, cursor: Path) -> Robot:
    rt = Runtime().start()
    got: list[Any] = []
    recipe = NodeRecipe("sink", DurableSink, {"got": got})
    rt.wait(Supervisor(rt, "s", [ChildSpec(recipe)]).start_async())
    config = BridgeConfig(listen=(endpoint,), imports=("/cmd",), durable=("/cmd",), retain=100)
    bridge = Bridge(rt, config, cursors={"/cmd": cursor}, query_timeout_s=1.0)
    return Robot(rt, bridge.open(), got)


@dataclass
class Operator:
    rt: Runtime
    bridge: Bridge
    sent: int = 0

    def send(self, count: int) -> list[bytes]:
        out = []
        for _ in range(count):
            self.sent += 1
            out.append(b"op %d" % self.sent)
            self.rt.call(lambda m=out[-1]: self.rt.bus.topic("/cmd").publish(m))
        return out


@pytest.fixture
def setup(zenoh: None, tmp_path: Path) -> Iterator[tuple[str, Path, Operator]]:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    rt = Runtime().start()
    config = BridgeConfig(connect=(endpoint,), exports=("/cmd",), durable=("/cmd",), retain=100)
    bridge = Bridge(rt, config).open()
    try:
        yield endpoint, tmp_path / "cursor", Operator(rt, bridge)
    finally:
        bridge.close()
        rt.close()


@pytest.mark.zenoh
def test_a_seq_jump_and_fake_ids_leave_the_import_delivering_and_nothing_replays(
    setup: tuple[str, Path, Operator],
) -> None:
    endpoint, cursor, operator = setup
    first = robot(endpoint, cursor)
    attacker: Any = None
    try:
        wait_until(lambda: operator.send(1) and first.got, timeout_s=30.0)  # connected
        wait_until(lambda: first.got[-1:] == [b"op %d" % operator.sent])
        sent = list(first.got) + operator.send(5)  # what came while connecting, then 5
        wait_until(lambda: first.got == sent)
        attacker = peer(endpoint, [])
        real = operator.bridge.publisher_id

        def answer_as_operator(query: Any) -> None:  # backlog replies in the operator's name
            for seq in range(operator.sent + 1, operator.sent + 151):  # more than retain
                att = pack_header(Codec.RAW, 0, real, seq)
                query.reply("rs/@retain/cmd", b"forged reply", attachment=att)

        queryable = attacker.declare_queryable("rs/@retain/**", answer_as_operator)
        refused = lambda: first.bridge.stats()["durable"]["/cmd"]["refused"]  # noqa: E731
        top = 2**64 - 1
        wait_until(
            lambda: (
                attacker.put("rs/cmd", b"poison", attachment=pack_header(Codec.RAW, 0, real, top))
                or refused()["jumps"] > 0
            )
        )
        for fake in range(1, FAKE_IDS + 1):
            for seq in (1, top):
                attacker.put("rs/cmd", b"fake", attachment=pack_header(Codec.RAW, 0, fake, seq))
        wait_until(lambda: refused()["expired"] >= FAKE_IDS - 16)
        sent += operator.send(5)
        wait_until(lambda: first.got[-1:] == sent[-1:])
        assert first.got == sent  # in order, once, nothing of the attacker's
        stats = refused()
        assert stats["jumps"] >= 1 and stats["forged_replies"] >= 1, stats
        assert stats["flooded_replies"] >= 1, stats  # past 100 replies from one session
        queryable.undeclare()
        attacker.close()
        attacker = None
    finally:
        if attacker is not None:
            attacker.close()
        first.close()
    last = operator.sent
    again = robot(endpoint, cursor)  # the same cursor file: resume, replay nothing
    try:
        wait_until(lambda: operator.send(1) and again.got, timeout_s=30.0)
        wait_until(lambda: again.got[-1:] == [b"op %d" % operator.sent])
        # In order, once, and nothing sent before the restart again (what was sent while
        # the operator reconnected, beyond its retention of 100, is a counted gap).
        seqs = [int(m.split()[1]) for m in again.got]
        assert seqs == sorted(set(seqs)) and min(seqs) > last, (last, seqs[:5])
    finally:
        again.close()


@pytest.mark.zenoh
def test_a_live_message_refused_as_too_far_ahead_during_a_query_asks_again(
    setup: tuple[str, Path, Operator],
) -> None:
    """The bridge's side of test_durable.py's jump-during-a-query case: a live message too
    far ahead, refused while a backlog query is out, makes the import ask again at once
    (the reply came from before it), and only once (the publisher has nothing more)."""
    endpoint, cursor, operator = setup
    first = robot(endpoint, cursor)
    try:
        wait_until(lambda: operator.send(1) and first.got, timeout_s=30.0)  # connected
        wait_until(lambda: first.got[-1:] == [b"op %d" % operator.sent])
        durable = first.bridge.imported["/cmd"]
        assert durable is not None
        idle = lambda: first.rt.call(lambda: not durable.querying)  # noqa: E731
        wait_until(idle)
        before = first.bridge.stats()["durable"]["/cmd"]
        ahead = operator.sent + 1 + 100  # the window is the retention: 100

        def refused_during_a_query() -> None:  # on the loop: no reply can come in between
            durable.query()
            durable.offer(operator.bridge.publisher_id, ahead, b"ahead")

        first.rt.call(refused_during_a_query)
        wait_until(lambda: idle() and durable.queries >= before["queries"] + 2)
        after = first.bridge.stats()["durable"]["/cmd"]
        assert after["queries"] == before["queries"] + 2, (before, after)
        assert after["refused"]["jumps"] == before["refused"]["jumps"] + 1, (before, after)
        sent = operator.send(1)  # still delivering, in order
        wait_until(lambda: first.got[-1:] == sent)
    finally:
        first.close()
