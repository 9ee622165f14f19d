"""What an imported topic takes (#23 item 7): only its type's codec, payloads up to its
maximum, msgpack within its limits; everything else is counted as malformed and dropped.
Real Zenoh sessions on loopback: a raw session plays the foreign peer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgpack
import pytest

from roboscale.backends.base import free_port
from roboscale.errors import UserError
from roboscale.runtime.bridge import Bridge, BridgeConfig, bridge_config, session_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor
from roboscale.runtime.wire import DEFAULT_MAX_PAYLOAD, Codec, pack_header, type_tag

from .conftest import wait_until
from .test_bridge import Sink
from .test_wire import Point


@pytest.fixture
def importer(zenoh: None) -> Iterator[tuple[Bridge, Any, list[Any]]]:
    """Runtime b imports /points (typed Point) and /any (at most 1,000 bytes) from a raw
    Zenoh session; yields once a first sample got through."""
    import zenoh as z

    rt = Runtime().start()
    got: list[Any] = []
    sup = Supervisor(rt, "s", [ChildSpec(NodeRecipe("sink", Sink, {"got": got}))])
    rt.wait(sup.start_async())
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    session = z.open(session_config(BridgeConfig(listen=(endpoint,))))
    raw = {"connect": [endpoint], "import": ["/points", "/any"], "max_payload": {"/any": 1000}}
    try:
        with Bridge(rt, bridge_config(raw)) as bridge:
            hello = pack_header(Codec.RAW, 0, 1, 1)
            wait_until(lambda: session.put("rs/any", b"hello", attachment=hello) or got)
            yield bridge, session, got
    finally:
        session.close()
        rt.close()


def point(x: int, seq: int) -> tuple[bytes, bytes]:
    return Point(x).to_bytes(), pack_header(Codec.TYPED, type_tag("Point"), 1, seq)


@pytest.mark.zenoh
def test_raw_and_msgpack_samples_on_a_typed_topic_are_malformed(
    importer: tuple[Bridge, Any, list[Any]],
) -> None:
    bridge, session, got = importer
    before = bridge.malformed
    session.put("rs/points", b"\x07\x00\x00\x00", attachment=pack_header(Codec.RAW, 0, 1, 2))
    data = msgpack.packb({"x": 7})
    session.put("rs/points", data, attachment=pack_header(Codec.MSGPACK, 0, 1, 3))
    payload, attachment = point(5, 4)
    session.put("rs/points", payload, attachment=attachment)
    wait_until(lambda: any(isinstance(m, Point) for m in got))
    assert [m.x for m in got if isinstance(m, Point)] == [5]
    assert not [m for m in got if isinstance(m, bytes | dict) and m != b"hello"]
    assert bridge.malformed - before == 2


@pytest.mark.zenoh
def test_a_payload_over_the_topics_maximum_and_msgpack_bombs_are_malformed(
    importer: tuple[Bridge, Any, list[Any]],
) -> None:
    bridge, session, got = importer
    before = bridge.malformed
    session.put("rs/any", b"x" * 1001, attachment=pack_header(Codec.RAW, 0, 1, 2))
    bomb = b"\xdc\x03\xe7" + b"\x90" * 999  # 999 empty lists in 1,002 bytes: over 1,000
    session.put("rs/any", bomb, attachment=pack_header(Codec.MSGPACK, 0, 1, 3))
    session.put("rs/any", b"x" * 1000, attachment=pack_header(Codec.RAW, 0, 1, 4))
    wait_until(lambda: got[-1] == b"x" * 1000)
    assert bridge.malformed - before == 2
    assert [len(m) for m in got if m != b"hello"] == [1000]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (0, "max_payload: a number of bytes from 1 to"),
        ("1 MB", "max_payload: a number of bytes"),
        ({"/any": True}, "max_payload: /any: a number of bytes"),
        ({"/other": 10}, "max_payload: '/other' is not an imported topic; imported: /any$"),
    ],
)
def test_bad_payload_maximums_are_refused_with_the_field(value: Any, message: str) -> None:
    with pytest.raises(UserError, match=f"^bridge: {message}"):
        bridge_config({"import": ["/any"], "max_payload": value})


@pytest.mark.parametrize("value", [40_000, {"/any": 600}])
def test_a_payload_maximum_on_a_bridge_that_imports_nothing_is_refused(value: Any) -> None:
    """It bounds what a bridge takes in: on a bridge that imports nothing it would bound
    nothing, silently."""
    with pytest.raises(UserError, match=r"^bridge: max_payload: .* imports none"):
        bridge_config({"export": ["/any"], "max_payload": value})


def test_payload_maximums_default_and_per_topic() -> None:
    config = bridge_config({"import": ["/a", "/b"], "max_payload": {"/b": 64}})
    assert config.payload_limits() == {"/a": DEFAULT_MAX_PAYLOAD, "/b": 64}
    assert bridge_config({"import": ["/a"], "max_payload": 5}).payload_limits() == {"/a": 5}
