"""The native backends: echo experiments on roboscale's own runtime.

`native`: a sender and its echoer are two runtime nodes in one OS process, on
the process's one event loop (placement "pair"): a message is a tuple
(seq, stamp, body) handed over by reference, with no copy and no serialization.
`native-proc`: one OS process per node (as ros1 and zenoh run), each a runtime
whose topics cross processes and hosts through the runtime's Zenoh bridge
(explicit endpoints: the echoer listens, its sender connects). A message is one
bytes object, the 16-byte header (seq, stamp) then the body: the bridge sends bytes
as they are. Subscriptions are typed `memoryview`: a frame arrives as a read-only view
of the received sample (no copy into a bytes on the native link), and the echoer
forwards that view.
The sender paces from its own thread (asyncio timers have 1 ms granularity on
epoll, too coarse for 10 kHz). In `native` each send crosses into the loop with
`call_soon_threadsafe`; the echoer's callback and the reply run on the loop. In
`native-proc` a send whose topic only goes out through the bridge (no subscriber in the
process, a plain export) runs the export itself on the pacing thread: the codec, the
header and the Rust put, as a node publishing from its own loop runs them, without the
thread hop to the loop that no robot node pays and no other backend's sender pays here
(the zenoh, ros1 and dds senders put from the pacing thread): 12-53 µs of the sender's
leg at the median in 5 of 6 trials (docs/runtime.md, "Zero copy into Python"). That
direct send gives the frame's header and body as two parts (`send_parts`): on the native
link each is copied once, a large frame straight into the shared memory pool, instead of
a `header + body` bytes that Zenoh then copies into its pool (docs/runtime.md, "A put
composed in the shared memory pool").
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Literal

from roboscale.backends.base import (
    Callback,
    Infrastructure,
    MessageKind,
    NodeContext,
    NodeSetting,
    NoInfrastructure,
    Where,
    current_python,
)
from roboscale.backends.payload import HEADER, wire_body
from roboscale.backends.qos import RELIABLE_VOLATILE
from roboscale.runtime.zenoh_config import TRANSPORTS

Transport = Literal["queued", "lowlatency"]  # runtime.zenoh_config.TRANSPORTS


class RuntimeOwner:
    """The one runtime of an agent process, started on first use and handed to every
    session the backend opens (no module-level singleton); `close` ends it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._runtime: Any = None

    def get(self) -> Any:
        from roboscale.runtime.executor import Runtime

        with self._lock:
            if self._runtime is None:
                self._runtime = Runtime().start()
            return self._runtime

    def close(self) -> None:
        with self._lock:
            runtime, self._runtime = self._runtime, None
        if runtime is not None:
            runtime.close()


class NativePublisher:
    __slots__ = ("_body", "_pub")

    def __init__(self, publisher: Any, kind: MessageKind) -> None:
        self._pub = publisher
        self._body = wire_body(kind)

    def send(self, seq: int, stamp_ns: int) -> None:
        self._pub.publish((seq, stamp_ns, self._body))

    def send_body(self, seq: int, stamp_ns: int, body: bytes) -> None:
        self._pub.publish((seq, stamp_ns, body))

    def forward(self, msg: object) -> None:
        self._pub.publish(msg)


class NativeProcPublisher(NativePublisher):
    """Frames as bytes: the bridge carries them without any serialization. From the pacing
    thread, a frame goes straight through its topic's bridge export where that is all the
    topic has (`direct_export`); otherwise it is published on the loop."""

    __slots__ = ("_direct", "_topic")

    def __init__(self, publisher: Any, kind: MessageKind, topic: Any) -> None:
        super().__init__(publisher, kind)
        self._topic = topic
        # The export to send through (found at the first send), False: publish on the loop.
        self._direct: Any = None

    def send(self, seq: int, stamp_ns: int) -> None:
        self._send(HEADER.pack(seq, stamp_ns), self._body)

    def send_body(self, seq: int, stamp_ns: int, body: bytes) -> None:
        self._send(HEADER.pack(seq, stamp_ns), body)

    def _send(self, header: bytes, body: bytes) -> None:
        direct = self._direct
        if direct is None:
            direct = self._direct = direct_export(self._topic)
        if direct is None or isinstance(direct, bool):
            self._pub.publish(header + body)
        else:
            # Header and body written once each into the frame's payload (on the native
            # link a large frame goes straight into the shared memory pool), not concatenated.
            direct.send_parts((header, body))


class NativeSession:
    """One runtime node; the lab's publishers and subscriptions become the node's own."""

    def __init__(self, ctx: NodeContext, runtime: Any) -> None:
        from roboscale.runtime.node import Node, NodeHandle

        self.runtime = runtime
        self._malformed = 0
        self.exits: list[str] = []
        self._handle = NodeHandle(self.runtime, ctx.name, Node)
        self._handle.start(self._on_exit)

    def _on_exit(self, name: str, reason: Any, detail: str) -> None:
        self.exits.append(f"{name}: {reason.name} {detail}")

    def _node(self) -> Any:
        node = self._handle.node
        if node is None:
            raise RuntimeError(f"node {self._handle.name} is not running: {self.exits}")
        return node

    def publisher(self, topic: str, kind: MessageKind, queue: int) -> NativePublisher:
        pub = self.runtime.call(self._node().publisher, topic)
        return NativePublisher(pub, kind)

    def subscribe(self, topic: str, kind: MessageKind, callback: Callback, queue: int) -> None:
        def on_message(msg: Any) -> None:
            if type(msg) is not tuple or len(msg) != 3:
                self._malformed += 1
                return
            callback(msg[0], msg)

        node = self._node()
        self.runtime.call(lambda: node.subscribe(topic, on_message, queue_size=queue or 1 << 30))

    def body_of(self, msg: object, kind: MessageKind) -> bytes:
        frame: Any = msg
        return bytes(frame[2])

    @property
    def malformed(self) -> int:
        return self._malformed

    def close(self) -> None:
        self._handle.stop(1.0)


def direct_export(topic: Any) -> Any:
    """The bridge export of `topic` if a frame may go through it from another thread than
    the loop's, else False: the topic has no subscriber in this process and one tap, a
    plain export (its codec is pure and its Rust publisher numbers and puts atomically; a
    durable export keeps a retention window, which only the loop may touch). None while
    the bridge has not exported the topic yet (asked again at the next send)."""
    taps = list(topic.taps)
    if not taps:
        return None
    export = taps[0]
    plain = len(taps) == 1 and getattr(export, "retention", True) is None
    return export if plain and not topic.inboxes else False


class NativeProcSession(NativeSession):
    """A runtime node whose topics go through the bridge: what it publishes is exported,
    what it subscribes to is imported. The bridge opens once the node has subscribed,
    so that no sample arrives before an inbox exists for it; topics declared after that
    (a replay's second stream) are added to it."""

    def __init__(self, ctx: NodeContext, runtime: Any) -> None:
        super().__init__(ctx, runtime)
        self._endpoints: dict[str, object] = {
            k: ctx.config[k]
            for k in ("mode", "listen", "connect", "shared_memory", "transport")
            if k in ctx.config
        }
        self._exports: list[str] = []
        self._bridge: Any = None

    def publisher(self, topic: str, kind: MessageKind, queue: int) -> NativePublisher:
        self._exports.append(topic)
        pub = self.runtime.call(self._node().publisher, topic)
        if self._bridge is not None:  # declared after the first subscription
            self.runtime.call(self._bridge.add_topics, [topic])
        return NativeProcPublisher(pub, kind, self.runtime.bus.topic(topic))

    def subscribe(self, topic: str, kind: MessageKind, callback: Callback, queue: int) -> None:
        def on_frame(msg: Any) -> None:
            if type(msg) is not memoryview or len(msg) < HEADER.size:
                self._malformed += 1
                return
            callback(HEADER.unpack_from(msg)[0], msg)

        node = self._node()
        # A frame arrives as a read-only view of the sample's bytes: no copy into a bytes.
        self.runtime.call(
            lambda: node.subscribe(
                topic, on_frame, msg_type=memoryview, queue_size=queue or 1 << 30
            )
        )
        if self._bridge is not None:
            self.runtime.call(self._bridge.add_topics, (), [topic])
            return
        from roboscale.runtime.bridge import Bridge, bridge_config

        raw: dict[str, object] = {**self._endpoints, "export": self._exports, "import": [topic]}
        # The lab's own trial network: loopback, or emulated hosts in namespaces the lab
        # created; it measures the plain bridge. Beyond loopback this is logged as insecure.
        raw["security"] = {"insecure": True}
        self._bridge = Bridge(self.runtime, bridge_config(raw)).open()

    def body_of(self, msg: object, kind: MessageKind) -> bytes:
        frame: Any = msg
        return bytes(frame[HEADER.size :])

    @property
    def malformed(self) -> int:
        return self._malformed + (self._bridge.malformed if self._bridge is not None else 0)

    def close(self) -> None:
        if self._bridge is not None:
            self._bridge.close()
        super().close()


class NativeBackend:
    qos = RELIABLE_VOLATILE
    name = "native"
    # Replayed bytes go as recorded: the runtime passes a message's bytes untouched and has
    # no wire format of its own (its bridge carries frames, not ROS 2 messages).
    replay_encoding = ""
    placement = "pair"

    def __init__(self) -> None:
        self.runtimes = RuntimeOwner()

    @property
    def python(self) -> str:
        return current_python()

    def check(self) -> None:
        return None  # the runtime is part of roboscale: always available

    def version(self) -> str:
        import roboscale

        return f"roboscale runtime {roboscale.__version__} (in-process)"

    def start_infrastructure(self, workdir: Path, where: Where) -> Infrastructure:
        return NoInfrastructure()

    def node_config(self, role: str, key: int, node: NodeSetting) -> dict[str, object]:
        return {}

    def open(self, ctx: NodeContext) -> NativeSession:
        return NativeSession(ctx, self.runtimes.get())


class NativeProcBackend(NativeBackend):
    """`transport`: the bridges' Zenoh transport (the bridge's `transport:`). The lab runs
    the default, "queued"; "lowlatency" is opt-in for benchmarks that build this backend
    themselves (bench/scale_dds.py), for payloads up to its cap only
    (runtime.zenoh_config.LOWLATENCY_MAX_PAYLOAD: Zenoh does not fragment on it)."""

    name = "native-proc"
    placement = "node"

    def __init__(self, transport: Transport = "queued") -> None:
        super().__init__()
        if transport not in TRANSPORTS:
            raise ValueError(f"transport {transport!r}: allowed are {', '.join(TRANSPORTS)}")
        self.transport = transport
        self._ports: dict[tuple[str, int], int] = {}

    def check(self) -> None:
        from roboscale.backends.zenoh import BACKEND as ZENOH

        ZENOH.check()  # the bridge is Zenoh

    def version(self) -> str:
        from roboscale.backends.zenoh import BACKEND as ZENOH
        from roboscale.runtime.bridge import BridgeConfig
        from roboscale.runtime.zlink import link_path

        path = link_path(BridgeConfig(), load=False)[1]
        over = f"processes over {ZENOH.version()}, bridge: {path}"
        if self.transport != "queued":
            over += f", transport {self.transport}"
        return super().version().replace("in-process", over)

    def start_infrastructure(self, workdir: Path, where: Where) -> Infrastructure:
        from roboscale.backends.zenoh import BACKEND as ZENOH

        return ZENOH.start_infrastructure(workdir, where)  # routers, when asked for

    def node_config(self, role: str, key: int, node: NodeSetting) -> dict[str, object]:
        from roboscale.backends.zenoh import BACKEND as ZENOH

        return {**ZENOH.node_config(role, key, node), "transport": self.transport}

    def open(self, ctx: NodeContext) -> NativeProcSession:
        return NativeProcSession(ctx, self.runtimes.get())


BACKEND = NativeBackend()
PROC_BACKEND = NativeProcBackend()
