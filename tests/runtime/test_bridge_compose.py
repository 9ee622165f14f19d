"""A message given as parts (`_Export.send_parts`, the lab's frame: header, then body):
on the native link each part is written once straight into the sender's shared memory
pool and the message crosses as a descriptor (the bytes on the TCP socket show it, as in
test_bridge_shm.py); without shared memory, or with the pool full, it is one heap copy
put as before, never a wait or a loss; a chunk held by a receiver is never rewritten.
Both links (zenoh-python concatenates the parts)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.conftest import require

from roboscale.backends.base import free_port
from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor
from roboscale.runtime.zenoh_config import SHM_THRESHOLD
from roboscale.runtime.zlink import NativeLink, native_module

from .conftest import NOT_BUILT, wait_until
from .test_bridge_shm import DESCRIPTOR_BOUND, socket_bytes

IMAGE = 307_200
BIG = 4 * 1024 * 1024


class Keeps(Node):
    """Keeps every message as it came: on the native link a large one is a view of the
    sample, which holds the sender's shared memory chunk while it is kept."""

    def on_start(self) -> None:
        kept: list[Any] = self.params["kept"]
        self.subscribe("/big", kept.append, msg_type=memoryview)


class Pair:
    def __init__(self, a: Runtime, b: Runtime, port: int, kept: list[Any]) -> None:
        self.a, self.b, self.port, self.kept = a, b, port, kept
        self.export: Any = a.bus.topic("/big").taps[0]
        self.frames = 0

    def send(self, size: int) -> bytes:
        """Send one frame of `size` bytes as (16-byte header, body), distinct per frame;
        wait until it arrived; the frame as it must arrive."""
        self.frames += 1
        header = self.frames.to_bytes(16, "little")
        body = bytes([self.frames % 251]) * (size - len(header))
        n = len(self.kept)
        self.export.send_parts((header, memoryview(body)))
        wait_until(lambda: len(self.kept) > n and len(self.kept[-1]) == size)
        return header + body

    def crossing(self, size: int) -> int:
        """The bytes one frame of `size` put on the socket (checked whole on arrival)."""
        before = socket_bytes(self.port)
        frame = self.send(size)
        assert bytes(self.kept[-1]) == frame
        return socket_bytes(self.port) - before

    def composed(self) -> tuple[int, int]:
        """(frames written into the pool, frames copied to the heap) on the native link."""
        if not isinstance(self.export.bridge.link, NativeLink):
            return (0, 0)
        counts: tuple[int, int] = self.export.pub.composed()
        return counts

    def release(self) -> None:
        """The receiver lets go of every kept message (and so of their chunks)."""
        self.b.call(self.kept.clear)

    def pool_handed_over(self, size: int) -> None:
        """Wait until the sending session uses its pool: Zenoh makes it on the first large
        message, in its own thread, and what is sent before it is handed over goes over
        TCP. A mapped pool is no sign of that (this session's is mapped before it is handed
        over, an earlier session's of this process may still be mapped): a frame that
        crossed as a descriptor is."""
        wait_until(lambda: self.release() or self.crossing(size) < DESCRIPTOR_BOUND)
        self.release()


@pytest.fixture
def pair(zenoh: None, bridge_path: str, request: pytest.FixtureRequest) -> Iterator[Pair]:
    """Runtime a exports /big (listening), b keeps what it imports; shared memory on both
    as `request.param`; yielded once a small message came through."""
    a, b = Runtime().start(), Runtime().start()
    port, kept = free_port(), []
    try:
        sup = Supervisor(b, "s", [ChildSpec(NodeRecipe("keeps", Keeps, {"kept": kept}))])
        b.wait(sup.start_async())
        endpoint, shm = f"tcp/127.0.0.1:{port}", request.param
        out = {"listen": [endpoint], "export": ["/big"], "shared_memory": shm}
        into = {"connect": [endpoint], "import": ["/big"], "shared_memory": shm}
        with Bridge(a, bridge_config(out)), Bridge(b, bridge_config(into)):

            def probe() -> bool:
                a.call(lambda: a.bus.topic("/big").publish(b"hi"))
                return bool(kept)

            wait_until(probe)
            b.call(kept.clear)
            yield Pair(a, b, port, kept)
    finally:
        a.close()
        b.close()


def test_the_threshold_is_the_transports() -> None:
    module = native_module()
    require(module is not None, NOT_BUILT)
    assert module is not None and module.SHM_THRESHOLD == SHM_THRESHOLD


@pytest.mark.zenoh
@pytest.mark.parametrize("pair", [True], indirect=True, ids=["shm"])
@pytest.mark.parametrize("size", [IMAGE, BIG], ids=["307KB", "4MiB"])
def test_parts_cross_whole_through_shared_memory(pair: Pair, size: int) -> None:
    pair.pool_handed_over(size)
    crossed = []
    for _ in range(4):
        crossed.append(pair.crossing(size))
        pair.release()  # a kept 4 MiB frame holds a quarter of the pool
    assert max(crossed) < DESCRIPTOR_BOUND, f"bytes on the socket per message: {crossed}"
    if isinstance(pair.export.bridge.link, NativeLink):
        composed, _ = pair.composed()
        assert composed >= 3, pair.composed()


@pytest.mark.zenoh
@pytest.mark.parametrize("pair", [False], indirect=True, ids=["no-shm"])
def test_without_shared_memory_parts_cross_as_one_copy(pair: Pair) -> None:
    crossed = [pair.crossing(size) for size in (IMAGE, SHM_THRESHOLD - 1, SHM_THRESHOLD)]
    assert crossed[0] >= IMAGE, crossed
    assert pair.composed() == (
        (0, 3) if isinstance(pair.export.bridge.link, NativeLink) else (0, 0)
    )


@pytest.mark.zenoh
@pytest.mark.parametrize("pair", [True], indirect=True, ids=["shm"])
def test_a_full_pool_is_a_heap_copy_and_no_held_chunk_is_rewritten(pair: Pair) -> None:
    """The receiver keeps every 4 MiB frame: on the native link each holds its chunk of the
    16 MiB pool, which fills; later frames are copied to the heap (and cross over TCP), none
    waits or is lost, and every kept frame still reads its own bytes. Once they are let go,
    frames are written into the pool again."""
    pair.pool_handed_over(BIG)
    sent = [pair.send(BIG) for _ in range(8)]
    assert [bytes(view) for view in pair.kept] == sent  # none rewritten while held
    if isinstance(pair.export.bridge.link, NativeLink):
        composed, copied = pair.composed()
        assert composed >= 1 and copied >= 1, pair.composed()
        pair.release()
        frame = pair.send(BIG)
        assert bytes(pair.kept[-1]) == frame
        assert pair.composed()[0] == composed + 1, (composed, pair.composed())


@pytest.mark.zenoh
def test_a_durable_export_retains_the_parts_joined(zenoh: None, bridge_path: str) -> None:
    """A durable export keeps its own bytes in the retention window: the parts, joined."""
    rt = Runtime().start()
    try:
        rt.call(rt.bus.topic, "/kept")
        config = {
            "listen": [f"tcp/127.0.0.1:{free_port()}"],
            "export": ["/kept"],
            "durable": ["/kept"],
            "retain": 4,
        }
        with Bridge(rt, bridge_config(config)):
            export: Any = rt.bus.topic("/kept").taps[0]
            body = bytes(IMAGE)
            rt.call(lambda: export.send_parts((b"head", memoryview(body))))
            (seq, payload, _), *_ = export.retention.items
            assert (seq, payload) == (1, b"head" + body)
    finally:
        rt.close()
