"""The zenoh backend: real eclipse-zenoh, peer to peer on explicit loopback endpoints.

Each echoer listens on its own tcp/127.0.0.1 port and its sender connects to it;
multicast scouting is off, so nothing leaves loopback. The 16-byte header (seq,
stamp) travels as the sample's attachment, so an echoer forwards the payload
without copying it. Subscriptions use FIFO channel handlers drained by one thread
per subscriber, never a Python callback per sample on zenoh's threads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roboscale.backends.base import (
    Callback,
    Infrastructure,
    MessageKind,
    NodeContext,
    NodeSetting,
    NoInfrastructure,
    Where,
    current_python,
    free_port,
)
from roboscale.backends.payload import HEADER, wire_body
from roboscale.backends.qos import RELIABLE_VOLATILE
from roboscale.errors import BackendUnavailable
from roboscale.jsonfields import Fields
from roboscale.runtime.threads import ThreadScope
from roboscale.runtime.zenoh_config import zenoh_config, zenoh_settings

DEFAULT_CHANNEL = 100_000


class ZenohPublisher:
    def __init__(self, publisher: Any, kind: MessageKind) -> None:
        import zenoh

        self._pub: Any = publisher
        self._body: Any = zenoh.ZBytes(wire_body(kind))
        self._header = bytearray(HEADER.size)

    def send(self, seq: int, stamp_ns: int) -> None:
        HEADER.pack_into(self._header, 0, seq, stamp_ns)
        self._pub.put(self._body, attachment=bytes(self._header))

    def send_body(self, seq: int, stamp_ns: int, body: bytes) -> None:
        self._pub.put(body, attachment=HEADER.pack(seq, stamp_ns))

    def forward(self, msg: object) -> None:
        sample: Any = msg
        self._pub.put(sample[0], attachment=sample[1])


class ZenohSession:
    def __init__(self, ctx: NodeContext) -> None:
        import zenoh

        self._zenoh: Any = zenoh
        cfg = Fields(ctx.config, "zenoh config")
        self._session: Any = zenoh.open(
            zenoh_config(
                zenoh_settings(
                    cfg.texts("listen"),
                    cfg.texts("connect"),
                    mode=cfg.text("mode", "peer"),
                    shared_memory=cfg.flag("shared_memory", True),
                    retry_ms=cfg.optional_whole("retry_ms"),
                )
            )
        )
        self._subs: list[Any] = []
        self._pubs: list[Any] = []
        self.malformed = 0
        # The drain threads: joined on close, and what one raised (a callback's bug) is
        # raised there, not lost with the thread.
        self._threads = ThreadScope("zenoh session")

    def _key(self, topic: str) -> str:
        return f"roboscale/{topic.strip('/')}"

    def publisher(self, topic: str, kind: MessageKind, queue: int) -> ZenohPublisher:
        pub = self._session.declare_publisher(
            self._key(topic),
            congestion_control=self._zenoh.CongestionControl.BLOCK,
            express=True,
        )
        self._pubs.append(pub)
        return ZenohPublisher(pub, kind)

    def subscribe(self, topic: str, kind: MessageKind, callback: Callback, queue: int) -> None:
        channel: Any = self._zenoh.handlers.FifoChannel(queue or DEFAULT_CHANNEL)
        sub = self._session.declare_subscriber(self._key(topic), channel)
        self._subs.append(sub)
        self._threads.spawn(self._drain, sub, callback, name=f"zenoh-drain {topic}")

    def _drain(self, sub: Any, callback: Callback) -> None:
        while True:
            try:
                sample: Any = sub.recv()
            except Exception:
                return  # the channel closed with the session
            attachment: Any = sample.attachment
            raw = attachment.to_bytes() if attachment is not None else b""
            if len(raw) != HEADER.size:
                self.malformed += 1
                continue
            seq, _stamp = HEADER.unpack(raw)
            callback(seq, (sample.payload, raw))

    def body_of(self, msg: object, kind: MessageKind) -> bytes:
        sample: Any = msg
        return bytes(sample[0].to_bytes())

    def close(self) -> None:
        for entity in self._subs + self._pubs:
            entity.undeclare()
        self._session.close()  # ends the channels: the drain threads return
        stuck = self._threads.close(timeout_s=5.0)
        if self._threads.errors:
            name, error = self._threads.errors[0]
            raise RuntimeError(f"{name} failed: {type(error).__name__}: {error}") from error
        if stuck:
            raise RuntimeError(f"zenoh session: {', '.join(stuck)} did not end on close")


class ZenohBackend:
    qos = RELIABLE_VOLATILE
    name = "zenoh"
    replay_encoding = "cdr"  # as rmw_zenoh carries a ROS 2 message: its CDR as the payload
    placement = "node"

    def __init__(self) -> None:
        self._ports: dict[tuple[str, int], int] = {}
        self._router_port = 0  # the routers' port while env.zenoh_routers runs them

    @property
    def python(self) -> str:
        return current_python()

    def check(self) -> None:
        try:
            import zenoh  # noqa: F401
        except ImportError:
            raise BackendUnavailable(
                "backend 'zenoh' is not installed: the Python package eclipse-zenoh is missing",
                hint="pip install eclipse-zenoh (make demo installs it into .venv)",
            ) from None

    def version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return f"eclipse-zenoh {version('eclipse-zenoh')}"
        except PackageNotFoundError:
            return "eclipse-zenoh (unknown version)"

    def start_infrastructure(self, workdir: Path, where: Where) -> Infrastructure:
        if not where.zenoh_routers:
            return NoInfrastructure()
        from roboscale.backends.zenoh_router import ZenohRouters

        # A port of its own: backends sharing the hosts each run their routers.
        self._router_port = free_port()
        return ZenohRouters(workdir, where, self._router_port)

    def node_config(self, role: str, key: int, node: NodeSetting) -> dict[str, object]:
        """A node listens on its own port when the workload says so (`listen`, its endpoint
        `key`) and connects to the nodes in `links` (key -> address); with routers, it is
        a client of the router on its own host."""
        own = node.node_address
        # Separate emulated hosts must not share memory; one machine may.
        local = node.hosts == 1
        if node.zenoh_routers:
            router = f"tcp/{own}:{self._router_port}"
            return {"mode": "client", "listen": [], "connect": [router], "shared_memory": local}

        def endpoint(index: int, address: str) -> str:
            port = self._ports.setdefault((node.trial, index), free_port())
            return f"tcp/{address}:{port}"

        return {
            "listen": [endpoint(key, own)] if node.listen else [],
            "connect": [endpoint(int(k), a) for k, a in node.links.items()],
            "shared_memory": local,
            "retry_ms": 50,  # peers started together connect to each other: retry soon
        }

    def open(self, ctx: NodeContext) -> ZenohSession:
        return ZenohSession(ctx)


BACKEND = ZenohBackend()
