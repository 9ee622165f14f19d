"""Received payloads without a copy into a Python bytes (native link), on both links: a
topic typed `memoryview` gets a read-only view of the sample; a view keeps its bytes
alive and unchanged after later samples, the bridges and the sessions are gone."""

from __future__ import annotations

import gc
import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roboscale.backends.base import free_port
from roboscale.runtime import zlink
from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor
from roboscale.runtime.wire import Codec, Malformed, WireCodec

from .conftest import wait_until
from .test_wire import Point
from .test_wire_fuzz import plain

LARGE = 300 * 1024  # over the native link's LEND_FROM (16 KiB): lent, not copied


def frame(n: int, size: int = LARGE) -> bytes:
    """A payload whose every byte depends on `n` (a reused buffer would show)."""
    return bytes((n + i) % 251 for i in range(251)) * (size // 251) + bytes([n % 256])


class Sink(Node):
    def on_start(self) -> None:
        views: list[Any] = self.params["views"]
        raw: list[Any] = self.params["raw"]
        plain: list[Any] = self.params["plain"]
        self.subscribe("/view", views.append, msg_type=memoryview, queue_size=10_000)
        self.subscribe("/any", raw.append, queue_size=10_000)
        self.subscribe("/plain", plain.append, msg_type=dict, queue_size=10_000)


def sink(rt: Runtime) -> tuple[list[Any], list[Any], list[Any]]:
    views: list[Any] = []
    raw: list[Any] = []
    plain: list[Any] = []
    params = {"views": views, "raw": raw, "plain": plain}
    sup = Supervisor(rt, "s", [ChildSpec(NodeRecipe("sink", Sink, params))])
    rt.wait(sup.start_async())
    return views, raw, plain


TOPICS = ["/view", "/any", "/plain"]


def bridges(a: Runtime, b: Runtime, endpoint: str) -> tuple[Bridge, Bridge]:
    out = Bridge(a, bridge_config({"listen": [endpoint], "export": TOPICS}))
    into = Bridge(b, bridge_config({"connect": [endpoint], "import": TOPICS}))
    return out.open(), into.open()


def connect(a: Runtime, views: list[Any]) -> None:
    """Probe until the sessions carry a sample (probes still in flight arrive later:
    `real` leaves them out)."""

    def probe() -> bool:
        a.call(lambda: a.bus.topic("/view").publish(PROBE))
        return bool(views)

    wait_until(probe)


PROBE = b"probe"


def real(views: list[Any]) -> list[Any]:
    return [v for v in views if bytes(v) != PROBE]


@pytest.mark.zenoh
def test_large_payloads_reach_a_view_topic_as_a_read_only_view_and_others_as_before(
    pair: tuple[Runtime, Runtime, str], bridge_path: str
) -> None:
    a, b, endpoint = pair
    views, raw, plain = sink(b)
    out, into = bridges(a, b, endpoint)
    try:
        connect(a, views)
        small = b"s" * 100
        a.call(lambda: a.bus.topic("/view").publish(frame(1)))
        a.call(lambda: a.bus.topic("/view").publish(small))
        a.call(lambda: a.bus.topic("/any").publish(frame(2)))
        a.call(lambda: a.bus.topic("/plain").publish({"image": frame(3), "n": 3}))
        wait_until(lambda: len(real(views)) == 2 and len(raw) == 1 and len(plain) == 1)
        large_view, small_view = real(views)
        assert type(large_view) is memoryview and large_view.readonly
        assert bytes(large_view) == frame(1) and bytes(small_view) == small
        if bridge_path == "native":  # the view is over the sample's bytes, not a copy
            assert type(large_view.obj).__name__ == "Payload"
            assert len(large_view.obj) == len(frame(1)) >= zlink.native_module().LEND_FROM  # type: ignore[union-attr]
        assert type(raw[0]) is bytes and raw[0] == frame(2)
        assert plain == [{"image": frame(3), "n": 3}]
        assert into.stats()["malformed"] == 0
    finally:
        into.close()
        out.close()


@pytest.mark.zenoh
def test_a_view_keeps_its_bytes_after_later_samples_and_the_sessions_are_gone(
    pair: tuple[Runtime, Runtime, str], bridge_path: str
) -> None:
    a, b, endpoint = pair
    views, _, _ = sink(b)
    out, into = bridges(a, b, endpoint)
    try:
        connect(a, views)
        a.call(lambda: a.bus.topic("/view").publish(frame(0)))
        wait_until(lambda: len(real(views)) == 1)
        first = real(views)[0]
        views.clear()
        # Zenoh reuses its receive buffers and the sender its shared memory pool (16 MB,
        # 55 of these frames): 120 more frames go through while the first view is held.
        for batch in range(6):
            for n in range(1 + 20 * batch, 21 + 20 * batch):
                a.call(lambda n=n: a.bus.topic("/view").publish(frame(n)))
            wait_until(lambda: len(real(views)) == 20)
            assert bytes(real(views)[-1]) == frame(20 + 20 * batch)
            views.clear()
    finally:
        into.close()
        out.close()
    views.clear()
    a.close()  # both runtimes and their sessions end; the view is all that is left
    b.close()
    gc.collect()
    assert bytes(first) == frame(0)
    with pytest.raises(TypeError):
        first[0] = 1  # read-only
    with pytest.raises((TypeError, BufferError)):
        struct.pack_into("B", first.obj, 0, 1)  # nor writable through its owner
    first.release()
    with pytest.raises(ValueError):
        bytes(first)  # a released view refuses, it never reads freed bytes


class Relay(Node):
    """Forwards every view it receives, as the lab's echoer does."""

    def on_start(self) -> None:
        back = self.publisher("/back")
        self.subscribe("/view", back.publish, msg_type=memoryview, queue_size=10_000)


class BackSink(Node):
    def on_start(self) -> None:
        got: list[Any] = self.params["got"]
        self.subscribe("/back", got.append, msg_type=memoryview, queue_size=10_000)


@pytest.mark.zenoh
def test_views_are_published_as_they_are_and_mutable_owners_are_copied_at_publish(
    pair: tuple[Runtime, Runtime, str], bridge_path: str
) -> None:
    a, b, endpoint = pair
    back: list[Any] = []
    for rt, name, cls, params in ((b, "relay", Relay, {}), (a, "back", BackSink, {"got": back})):
        sup = Supervisor(rt, name, [ChildSpec(NodeRecipe(name, cls, params))])
        rt.wait(sup.start_async())
    out = Bridge(a, bridge_config({"listen": [endpoint], "export": ["/view"], "import": ["/back"]}))
    into = Bridge(
        b, bridge_config({"connect": [endpoint], "import": ["/view"], "export": ["/back"]})
    )
    with out, into:
        connect(a, back)
        whole, sliced = frame(1), frame(2)
        mutable = bytearray(frame(3))
        words = frame(4)[:300_000]  # a view of 4-byte items: copied

        def publish() -> None:
            topic = a.bus.topic("/view")
            topic.publish(memoryview(whole))  # lent
            topic.publish(memoryview(sliced)[16:])  # a slice of a bytes: lent
            topic.publish(memoryview(mutable).toreadonly())  # a mutable owner: copied
            mutable[:] = bytes(len(mutable))  # changed after publish: never seen
            topic.publish(memoryview(words).cast("I").toreadonly())

        a.call(publish)
        # Each came in to the relay as a view of the sample and went back out as it was.
        wait_until(lambda: len(real(back)) == 4)
        got = [bytes(v) for v in real(back)]
        assert got == [frame(1), frame(2)[16:], frame(3), words]
        assert into.stats()["malformed"] == 0 and out.stats()["malformed"] == 0


@pytest.mark.zenoh
def test_a_backlog_is_copied_out_of_the_senders_pool_and_arrives_whole(zenoh: None) -> None:
    """Rows waiting behind SHM_HELD_ROWS others are copied on Zenoh's thread (the sender's
    pool chunk released), the first ones lent: all arrive, in order, byte for byte."""
    module = zlink.native_module()
    if module is None:
        from tests.conftest import require

        from .conftest import NOT_BUILT

        require(False, NOT_BUILT)
    from roboscale.runtime.bridge import bridge_settings

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    a = module.Session(bridge_settings(bridge_config({"listen": [endpoint]})))  # type: ignore[union-attr]
    b = module.Session(bridge_settings(bridge_config({"connect": [endpoint]})))  # type: ignore[union-attr]
    inbox = b.inbox("rs", 1000)
    inbox.import_topic("/x", 0)
    pub = a.publisher("rs/x", 1, True)
    try:
        wait_until(lambda: pub.send(PROBE, 0, 0) and bool(inbox.take(1000)))
        wait_until(lambda: not inbox.take(1000) and not inbox.take(1000))
        for n in range(40):
            pub.send(frame(n), 0, 0)  # nothing taken meanwhile: a backlog of 40
        rows: list[Any] = []
        wait_until(
            lambda: rows.extend(r for r in inbox.take(1000) if len(r[5]) > 5) or len(rows) >= 40
        )
        assert [bytes(r[5]) for r in rows] == [frame(n) for n in range(40)]
        assert [r[4] for r in rows] == sorted(r[4] for r in rows)  # in order
        if inbox.shm_received() > 0:  # through shared memory: the deep ones were copied
            assert not all(r[5].lent for r in rows)
    finally:
        inbox.close()
        a.close()
        b.close()


def _decoded(codec: int, tag: int, data: Any, msg_type: type) -> Any:
    try:
        msg = WireCodec().decode(codec, tag, data, msg_type, 150)
    except Malformed as e:
        return ("Malformed", str(e))
    return bytes(msg) if isinstance(msg, memoryview) else msg


payloads = st.binary(max_size=200) | plain.map(lambda v: msgpack.packb(v, use_bin_type=True))


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from([0, 1, 2, 3, 4, 5, 255]),
    st.integers(0, 2**32 - 1),
    payloads,
    st.sampled_from((object, bytes, memoryview, int, str, dict, list, tuple, Point)),
)
def test_a_payload_decodes_from_a_buffer_exactly_as_from_bytes(
    codec: int, tag: int, data: bytes, msg_type: type
) -> None:
    """What a lent buffer decodes to (or the error it is refused with) is what the same
    bytes decode to: the checks do not depend on how the payload arrived."""
    view = memoryview(data).toreadonly()  # the buffer protocol, as `_zbridge.Payload` serves it
    from_view = _decoded(codec, tag, view, msg_type)
    assert from_view == _decoded(codec, tag, data, msg_type)
    if msg_type is memoryview and codec == Codec.RAW and len(data) <= 150:
        got = WireCodec().decode(codec, tag, view, msg_type, 150)
        assert type(got) is memoryview and got.readonly and got.obj is data  # no copy
