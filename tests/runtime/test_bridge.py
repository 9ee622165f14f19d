"""The Zenoh bridge with real sessions on loopback (two runtimes in this process)."""

from __future__ import annotations

import pickle
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from roboscale.errors import UserError
from roboscale.runtime.bridge import Bridge, BridgeConfig, bridge_config, session_config
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor
from roboscale.runtime.wire import Codec, Unencodable, pack_header, unpack_header

from .conftest import wait_until
from .test_wire import Opaque, Point


class Sink(Node):
    def on_start(self) -> None:
        got: list[Any] = self.params["got"]
        self.subscribe("/points", got.append, msg_type=Point)
        self.subscribe("/any", got.append)


def subscriber(rt: Runtime, got: list[Any]) -> Supervisor:
    sup = Supervisor(rt, "s", [ChildSpec(NodeRecipe("sink", Sink, {"got": got}))])
    rt.wait(sup.start_async())
    return sup


@pytest.mark.zenoh
def test_bridged_topics_carry_bytes_typed_and_plain_data(
    pair: tuple[Runtime, Runtime, str],
) -> None:
    a, b, endpoint = pair
    got: list[Any] = []
    subscriber(b, got)
    exports = {"listen": [endpoint], "export": ["/points", "/any"]}
    with (
        Bridge(a, bridge_config(exports)),
        Bridge(b, bridge_config({"connect": [endpoint], "import": ["/points", "/any"]})) as bb,
    ):
        wait_until(lambda: _connected(a, b, got))
        a.call(lambda: a.bus.topic("/any").publish(b"raw"))
        a.call(lambda: a.bus.topic("/any").publish({"k": (1, 2)}))
        a.call(lambda: a.bus.topic("/points").publish(Point(5)))
        wait_until(lambda: len([m for m in got if m != b"probe"]) == 3)
        raw, obj, point = [m for m in got if m != b"probe"]
        assert raw == b"raw" and obj == {"k": [1, 2]}  # msgpack: tuples arrive as lists
        assert isinstance(point, Point) and point.x == 5
        assert bb.stats()["malformed"] == 0 and bb.stats()["path"] == bb.path


def _connected(a: Runtime, b: Runtime, got: list[Any]) -> bool:
    # Sessions connect asynchronously: probe until one message gets through.
    a.call(lambda: a.bus.topic("/any").publish(b"probe"))
    return bool(got)


@contextmanager
def raw_peer_into(
    pair: tuple[Runtime, Runtime, str],
) -> Iterator[tuple[Bridge, Any, list[Any]]]:
    """A raw Zenoh session whose `rs/any` runtime b's bridge imports; yields once connected."""
    import zenoh

    _, b, endpoint = pair
    got: list[Any] = []
    subscriber(b, got)
    session = zenoh.open(session_config(BridgeConfig(listen=(endpoint,))))
    try:
        with Bridge(b, bridge_config({"connect": [endpoint], "import": ["/any"]})) as bridge:
            hello = pack_header(Codec.RAW, 0, 1, 1)
            wait_until(lambda: _put(session, b"hello", hello) and bool(got))
            yield bridge, session, got
    finally:
        session.close()


@pytest.mark.zenoh
def test_malformed_samples_are_counted_and_dropped(
    pair: tuple[Runtime, Runtime, str], events: list[SupervisionEvent]
) -> None:
    with raw_peer_into(pair) as (bridge, session, got):
        good = pack_header(Codec.RAW, 0, 1, 1)
        session.put("rs/any", b"x")  # no attachment
        session.put("rs/any", b"x", attachment=b"short")
        session.put("rs/any", b"\x81", attachment=pack_header(Codec.MSGPACK, 0, 1, 2))
        session.put("rs/other", b"x", attachment=good)  # not imported: ignored
        session.put("rs/any", b"last", attachment=pack_header(Codec.RAW, 0, 1, 3))
        wait_until(lambda: got[-1] == b"last")
        assert bridge.malformed == 3 and bridge.ignored >= 1
        assert set(got) == {b"hello", b"last"}


class CreatesFile:
    """A pickle whose loading would create a file: the proof that nothing unpickles it."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (str(self.path), "w"))


@pytest.mark.zenoh
def test_a_pickle_published_raw_is_dropped_counted_and_never_loaded(
    pair: tuple[Runtime, Runtime, str], tmp_path: Path
) -> None:
    events: list[SupervisionEvent] = []
    pair[1].subscribers.append(events.append)
    evil = pickle.dumps(CreatesFile(tmp_path / "pwned"))
    pickle_era = struct.pack("<BBQQ", 1, 1, 1, 2)  # version 1 header, codec 1 = pickle
    with raw_peer_into(pair) as (bridge, session, got):
        session.put("rs/any", evil, attachment=pickle_era)
        session.put("rs/any", evil, attachment=struct.pack("<BBIQQ", 2, 1, 0, 1, 3))
        session.put("rs/any", evil, attachment=pack_header(Codec.MSGPACK, 0, 1, 4))
        session.put("rs/any", evil, attachment=pack_header(Codec.TYPED, 0, 1, 5))
        session.put("rs/any", b"last", attachment=pack_header(Codec.RAW, 0, 1, 6))
        wait_until(lambda: got[-1] == b"last")
        assert bridge.stats()["malformed"] == 4
    assert not (tmp_path / "pwned").exists()
    assert set(got) == {b"hello", b"last"}  # hello: probes until connected
    assert any(e.kind == "malformed" and "4 dropped" in e.detail for e in events)


@pytest.mark.zenoh
def test_an_object_without_a_safe_codec_is_refused_at_publish(
    pair: tuple[Runtime, Runtime, str],
) -> None:
    a, _, endpoint = pair
    with Bridge(a, bridge_config({"listen": [endpoint], "export": ["/any"]})):
        with pytest.raises(Unencodable, match=r"cannot send a .*Opaque over the bridge"):
            a.call(lambda: a.bus.topic("/any").publish(Opaque(1)))
        a.call(lambda: a.bus.topic("/any").publish({"plain": 1}))  # still exporting


@pytest.mark.zenoh
def test_a_busy_loop_holds_the_drain_thread_back_at_the_backlog_bound(
    pair: tuple[Runtime, Runtime, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from roboscale.runtime import zlink

    monkeypatch.setattr(zlink, "BACKLOG", 2)
    monkeypatch.setenv(zlink.PATH_ENV, "python")  # the drain thread is the python link's
    b = pair[1]
    with raw_peer_into(pair) as (bridge, session, got):
        assert isinstance(bridge.link, zlink.PythonLink) and bridge.link.drain is not None
        drain = bridge.link.drain
        b.call(lambda: None)
        blocked = threading.Event()
        b.loop.call_soon_threadsafe(blocked.wait, 10.0)  # the loop is busy until set
        for seq in range(2, 12):
            _put(session, b"m", pack_header(Codec.RAW, 0, 1, seq))
            time.sleep(0.01)  # one batch per sample
        wait_until(lambda: drain.posted - drain.taken == 2)
        time.sleep(0.2)
        held = drain.posted - drain.taken  # the drain thread waits, samples stay in Zenoh
        pending = len(drain.pending)  # both batches wait for one wake-up of the loop
        blocked.set()
        wait_until(lambda: got.count(b"m") == 10)
        assert held == pending == 2 and bridge.malformed == 0


class SlowSink(Node):
    """A subscriber slower than its publisher, with a queue of 100 (ROS's default size)."""

    def on_start(self) -> None:
        got: list[Any] = self.params["got"]

        def slow(msg: Any) -> None:
            time.sleep(0.0005)
            got.append(msg)

        self.subscribe("/any", slow, queue_size=100)


@pytest.mark.zenoh
def test_a_slow_subscriber_holds_the_bridge_back_instead_of_dropping(
    pair: tuple[Runtime, Runtime, str],
) -> None:
    """The link hands the loop no more samples per turn than a turn hands an inbox: a
    burst over a slow subscriber waits in the link (and Zenoh, and the publisher) rather
    than overflowing the inbox (with 256 per turn, 156 of each batch were dropped)."""
    a, b, endpoint = pair
    got: list[Any] = []
    sup = Supervisor(b, "s", [ChildSpec(NodeRecipe("slow", SlowSink, {"got": got}))])
    b.wait(sup.start_async())
    inbox = b.bus.topic("/any").inboxes[0]
    with (
        Bridge(a, bridge_config({"listen": [endpoint], "export": ["/any"]})),
        Bridge(b, bridge_config({"connect": [endpoint], "import": ["/any"]})) as bb,
    ):
        wait_until(lambda: _connected(a, b, got))
        burst = [b"%d" % i for i in range(600)]

        def publish_all() -> None:
            topic = a.bus.topic("/any")
            for msg in burst:
                topic.publish(msg)

        a.call(publish_all)
        wait_until(lambda: burst[-1] in got)
        assert [m for m in got if m != b"probe"] == burst
        assert inbox.dropped == 0 and bb.malformed == 0


def _put(session: Any, payload: bytes, attachment: bytes) -> bool:
    session.put("rs/any", payload, attachment=attachment)
    return True


@pytest.mark.zenoh
def test_retention_queryable_answers_after_a_sequence_number(
    pair: tuple[Runtime, Runtime, str],
) -> None:
    import zenoh

    a, _, endpoint = pair
    config = bridge_config(
        {"listen": [endpoint], "export": ["/data"], "durable": ["/data"], "retain": 5}
    )
    with Bridge(a, config) as bridge:
        for i in range(1, 9):
            a.call(lambda i=i: a.bus.topic("/data").publish(b"%d" % i))
        session = zenoh.open(session_config(BridgeConfig(connect=(endpoint,))))
        try:
            seqs: list[int] = []
            for _ in range(50):  # the session connects asynchronously
                replies = session.get(
                    "rs/@retain/data?after=5",
                    consolidation=zenoh.ConsolidationMode.NONE,
                    timeout=2.0,
                )
                seqs = [unpack_header(r.ok.attachment.to_bytes())[3] for r in replies if r.ok]
                if seqs:
                    break
            assert seqs == [6, 7, 8]
            assert bridge.stats()["evicted"] == {"/data": 3}
        finally:
            session.close()


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"mode": "router"}, "mode: 'router' is not allowed: allowed are peer, client"),
        ({"exprot": []}, "unknown field 'exprot' (did you mean 'export'?): allowed are mode"),
        (
            {"colour": 1, "transprot": "x"},
            "unknown field 'colour', 'transprot' (did you mean 'transport'?): allowed",
        ),
        ({"export": ["bad name"]}, "export: invalid topic name"),
        ({"connect": ["127.0.0.1"]}, "connect: a list of endpoints"),
        ({"retain": 0}, "retain: must be an integer >= 1"),
        ({"durable": ["/x"]}, "durable: /x is neither exported nor imported"),
        ({"express": "yes"}, "express: true or false, got 'yes'"),
        ({"shared_memory": 1}, "shared_memory: true or false, got 1"),
        ({"delivery": "exactly_once"}, "delivery: 'exactly_once' is not allowed: allowed are"),
    ],
)
def test_bad_bridge_configs_are_refused_with_the_field(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(UserError, match="^launch.yaml:3: bridge: " + _escape(message)):
        bridge_config(raw, where="launch.yaml:3: bridge")


def _escape(text: str) -> str:
    import re

    return re.escape(text)


def test_exports_are_express_unless_turned_off() -> None:
    assert bridge_config({}).express
    assert not bridge_config({"express": False}).express


def test_a_durable_import_needs_a_cursor_file(rt: Runtime) -> None:
    config = bridge_config({"import": ["/x"], "durable": ["/x"]})
    with pytest.raises(UserError, match="durable import /x needs a cursor file"):
        Bridge(rt, config)


class Escapes(BaseException):
    """What no callback guard stops, as a CallbackHung arriving after its callback returned."""


def test_an_escaping_exception_leaves_the_other_inboxes_of_the_batch_scheduled(
    rt: Runtime,
) -> None:
    got: list[Any] = []

    def explode(_: Any) -> None:
        raise Escapes

    class Two(Node):
        def on_start(self) -> None:
            self.subscribe("/a", explode)
            self.subscribe("/b", got.append)

    rt.wait(Supervisor(rt, "s", [ChildSpec(NodeRecipe("two", Two))]).start_async())
    bridge = Bridge(rt, bridge_config({"import": ["/a", "/b"]}))  # never opened: no Zenoh
    bridge.imported = {"/a": None, "/b": None}
    header = pack_header(Codec.RAW, 0, 1, 1)

    def on_samples() -> str:
        try:
            bridge._on_samples([("/a", b"x", header), ("/b", b"y", header)])
        except Escapes:
            return "escaped"
        return "returned"

    assert rt.call(on_samples) == "escaped"
    wait_until(lambda: got == [b"y"])  # delivered in a later turn, not stranded


@pytest.mark.zenoh
def test_rosbags_messages_cross_as_cdr_into_a_topic_of_their_type(
    pair: tuple[Runtime, Runtime, str],
) -> None:
    from rosbags.typesys import Stores, get_typestore

    vector = get_typestore(Stores.LATEST).types["geometry_msgs/msg/Vector3"]
    a, b, endpoint = pair
    got: list[Any] = []

    class VectorSink(Node):
        def on_start(self) -> None:
            self.subscribe("/vec", got.append, msg_type=vector)

    sup = Supervisor(b, "s", [ChildSpec(NodeRecipe("sink", VectorSink))])
    b.wait(sup.start_async())
    with (
        Bridge(a, bridge_config({"listen": [endpoint], "export": ["/vec"]})),
        Bridge(b, bridge_config({"connect": [endpoint], "import": ["/vec"]})) as bb,
    ):
        publish = lambda: a.bus.topic("/vec").publish(vector(1.0, 2.0, 3.0))  # noqa: E731
        # Sessions connect asynchronously: publish until one arrives.
        wait_until(lambda: a.call(publish) > 0 and bool(got), timeout_s=10.0)
        assert isinstance(got[0], vector) and (got[0].y, got[0].z) == (2.0, 3.0)
        assert bb.stats()["malformed"] == 0


class Tripwire(Node):
    """Takes /t; raises Escapes on b"boom" after taking it."""

    def on_start(self) -> None:
        got: list[Any] = self.get_param("got")

        def take(msg: Any) -> None:
            got.append(msg)
            if msg == b"boom":
                raise Escapes

        self.subscribe("/t", take)


@pytest.mark.parametrize("link", ["native rows", "python samples"])
def test_the_samples_after_one_an_escaping_exception_struck_still_come(
    rt: Runtime, link: str
) -> None:
    """A batch handed on at once: an exception that escapes a callback's guard leaves the
    batch's later samples for the next loop turn, in order (the bridge is not opened: its
    batch methods are fed directly)."""
    got: list[Any] = []
    sup = Supervisor(rt, "s", [ChildSpec(NodeRecipe("trip", Tripwire, {"got": got}))])
    rt.wait(sup.start_async())
    bridge = Bridge(rt, bridge_config({"import": ["/t"]}))
    payloads = [b"a", b"boom", b"c", b"d"]
    if link == "native rows":
        bridge._by_index = [(rt.bus.topic("/t"), None)]
        rows: list[Any] = [(0, Codec.RAW, 0, 1, n, p) for n, p in enumerate(payloads, 1)]
        run: Any = bridge._deliver_rows
    else:
        bridge.imported = {"/t": None}
        rows = [("/t", p, pack_header(Codec.RAW, 0, 1, n)) for n, p in enumerate(payloads, 1)]
        run = bridge._on_samples
    with pytest.raises(Escapes):
        rt.call(run, rows)
    wait_until(lambda: got == payloads)
    rt.wait(sup.stop_async())
