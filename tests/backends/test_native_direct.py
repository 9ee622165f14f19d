"""The native-proc sender's frames go through the bridge export from the pacing thread
only where that is all their topic has (backends/native.py `direct_export`)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from tests.conftest import require
from tests.runtime.conftest import wait_until

from roboscale.backends.base import MessageKind, free_port
from roboscale.backends.native import NativeProcPublisher, direct_export
from roboscale.backends.payload import HEADER
from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor
from roboscale.runtime.zlink import PATH_ENV, NativeLink, native_module


@pytest.mark.zenoh
def test_only_a_plain_export_with_no_local_subscriber_is_sent_through_directly(
    rt: Runtime,
) -> None:
    bus = rt.bus
    for name in ("/plain", "/watched", "/durable", "/later"):
        rt.call(bus.topic, name)
    rt.call(lambda: bus.inbox(bus.topic("/watched"), 10, _drop_oldest(), None))
    assert direct_export(bus.topic("/later")) is None  # not exported yet: asked again later
    config = {
        "listen": [f"tcp/127.0.0.1:{free_port()}"],
        "export": ["/plain", "/watched", "/durable"],
        "durable": ["/durable"],
        "retain": 10,
    }
    with Bridge(rt, bridge_config(config)):
        plain = direct_export(bus.topic("/plain"))
        assert callable(plain) and plain in bus.topic("/plain").taps
        assert direct_export(bus.topic("/watched")) is False  # a subscriber here: the loop
        assert direct_export(bus.topic("/durable")) is False  # a retention window: the loop
        assert plain(b"frame from the pacing thread") is None  # the export's own put


def _drop_oldest() -> Any:
    from roboscale.runtime.bus import Overflow

    return Overflow.DROP_OLDEST


class Keeps(Node):
    def on_start(self) -> None:
        got: list[bytes] = self.params["got"]
        self.subscribe("/frames", lambda msg: got.append(bytes(msg)))


@pytest.fixture(params=["native", "python"])
def link_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    path: str = request.param
    if path == "native":
        require(native_module() is not None, "the bridge's native path was not built")
    monkeypatch.setenv(PATH_ENV, path)
    return path


@pytest.mark.zenoh
def test_a_direct_frame_is_sent_as_header_and_body_and_arrives_whole(
    rt: Runtime, link_path: str
) -> None:
    """The sender gives the export its frame's header and body as parts (on the native
    link an image-sized frame is written into the shared memory pool, not concatenated
    first); the receiver gets exactly `header + body`. Both links."""
    receiver = Runtime().start()
    got: list[bytes] = []
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    try:
        sup = Supervisor(receiver, "s", [ChildSpec(NodeRecipe("keeps", Keeps, {"got": got}))])
        receiver.wait(sup.start_async())
        rt.call(rt.bus.topic, "/frames")
        out = {"listen": [endpoint], "export": ["/frames"]}
        into = {"connect": [endpoint], "import": ["/frames"]}
        with Bridge(rt, bridge_config(out)) as sender, Bridge(receiver, bridge_config(into)):
            topic = rt.bus.topic("/frames")
            pub = NativeProcPublisher(None, MessageKind("image", 307_200), topic)
            body = bytes(range(256)) * 1200
            frames = 0

            def sent() -> bool:
                nonlocal frames
                frames += 1
                pub.send_body(frames, 7, body)
                time.sleep(0.01)
                return bool(got)

            wait_until(sent)
            seq = HEADER.unpack_from(got[0])[0]
            assert got[0] == HEADER.pack(seq, 7) + body
            if isinstance(sender.link, NativeLink):
                composed, copied = topic.taps[0].pub.composed()
                assert composed + copied == frames  # every frame given as parts
    finally:
        receiver.close()
