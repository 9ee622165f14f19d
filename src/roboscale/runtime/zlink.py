"""The bridge's link to Zenoh: the per-message path, native (Rust) or zenoh-python.

runtime/bridge.py decides what a sample means (topics, codecs, durable delivery); a link
moves samples between its session and the event loop. Two links, one interface:

- `NativeLink`: the compiled extension `roboscale.runtime._zbridge` (native/zbridge, pyo3
  over the zenoh crate; `make native`). Zenoh's own thread checks each sample (imported
  topic, wire header: the checks of wire.unpack_header) and queues it in Rust; an eventfd
  watched by the loop (`add_reader`) wakes the loop, which is the first Python to see the
  sample. Sending packs the header and puts in Rust, the GIL released.
- `PythonLink`: zenoh-python. One FIFO channel subscriber drained by one thread, which
  hands batches to the loop (`call_soon_threadsafe`); headers are checked on the loop.

`link_path` chooses: the native link where the extension was built and the bridge is not
secured (the extension is built without TLS and user/password authentication, to keep
its build to the features the benchmarks' build already compiles; a `security` section
that only says `insecure: true` secures nothing and keeps the native link), unless
$ROBOSCALE_BRIDGE_PATH=python. $ROBOSCALE_BRIDGE_PATH=native makes a missing extension
an error instead of a silent fallback.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any, Protocol

from roboscale.errors import UserError
from roboscale.runtime.bridgeconfig import BridgeConfig, bridge_settings, session_config
from roboscale.runtime.bus import DRAIN_BATCH
from roboscale.runtime.executor import Runtime
from roboscale.runtime.security import Security
from roboscale.runtime.threads import ThreadScope
from roboscale.runtime.wire import HEADER, VERSION
from roboscale.runtime.zenoh_config import use_thread_layout

PATH_ENV, PATHS = "ROBOSCALE_BRIDGE_PATH", ("auto", "native", "python")
# Samples handed to the loop per wake-up at most: what one loop turn hands a subscriber's
# inbox (bus.DRAIN_BATCH). A larger batch outran the inboxes: 256 samples in, 64 handed to
# the callback per turn, so a busy subscriber's inbox filled and dropped messages instead
# of holding the link, and through it Zenoh and the publisher, back.
BATCH = DRAIN_BATCH
BACKLOG = 64  # batches waiting for the loop at most (python link)
QUEUE = 16_384  # samples waiting for the loop at most (native link); then back-pressure
CHANNEL = 100_000  # FIFO channel capacity; when full, Zenoh applies back-pressure

# A sample as the loop gets it. Python link: (topic name, payload, attachment), header
# unchecked. Native link: (topic index, codec, tag, publisher id, seq, payload), checked;
# its payload a bytes, or from `_zbridge.LEND_FROM` bytes a `_zbridge.Payload` (a read-only
# buffer over the sample's own bytes: wire.Received, decoded by wire.WireCodec.decode).
RawRows = Callable[[list[tuple[str, bytes, bytes]]], None]
Answer = Callable[[str, "str | None", bytes], list[tuple[bytes, bytes]]]


def native_module() -> ModuleType | None:
    """The compiled link (`_zbridge`), or None where it was not built (no Rust toolchain)."""
    try:
        from roboscale.runtime import _zbridge  # type: ignore[attr-defined]
    except ImportError:
        return None
    module: ModuleType = _zbridge
    return module


def native_built() -> bool:
    """Whether the compiled link is installed, without loading it (a process that only
    reports, such as the lab's driver, need not carry a second Zenoh runtime)."""
    import importlib.util

    return importlib.util.find_spec("roboscale.runtime._zbridge") is not None


def link_path(
    config: BridgeConfig, *, load: bool = True, liveliness: bool = False
) -> tuple[str, str]:
    """("native" or "python", why) for a bridge of `config`, from $ROBOSCALE_BRIDGE_PATH;
    `load=False` only looks for the extension (`native_built`); `liveliness`: the session
    must also watch liveliness tokens, which only zenoh-python's session does."""
    chosen = os.environ.get(PATH_ENV, "") or "auto"
    if chosen not in PATHS:
        raise UserError(f"${PATH_ENV} is {chosen!r}; allowed: {', '.join(PATHS)}")
    if chosen == "python":
        return "python", f"${PATH_ENV}=python"
    if liveliness:
        return "python", "remote children are watched through zenoh-python's liveliness"
    if not (native_module() is not None if load else native_built()):
        if chosen == "native":
            raise UserError(
                f"${PATH_ENV}=native but the native bridge path was not built",
                hint="run 'make native' (it needs Rust's cargo)",
            )
        return "python", "the native bridge path was not built (make native)"
    if secured(config.security):
        return "python", "secured bridges run on zenoh-python (TLS, authentication)"
    return "native", "per-message path in Rust (_zbridge)"


def secured(security: Security | None) -> bool:
    """Whether `security` asks for authentication, TLS or access control, which only
    zenoh-python's session carries here. `insecure: true` alone (the lab's own trial
    networks) adds no session setting at all (security.security_settings): such a
    bridge is the plain one and keeps the native link."""
    if security is None:
        return False
    return (
        security.users_file is not None
        or security.user is not None
        or security.tls is not None
        or bool(security.rules)
    )


class Publisher(Protocol):
    def send(self, payload: bytes | memoryview, codec: int, tag: int) -> int: ...
    # The concatenation of `parts` as one payload: on the native link each part is copied
    # once, large payloads straight into the shared memory pool (`_zbridge` compose.rs).
    def send_parts(self, parts: Sequence[bytes | memoryview], codec: int, tag: int) -> int: ...
    def put(self, payload: bytes, attachment: bytes) -> None: ...
    def undeclare(self) -> None: ...


class NativeLink:
    """A bridge's session through the compiled extension."""

    native = True

    def __init__(self, runtime: Runtime, config: BridgeConfig) -> None:
        module = native_module()
        assert module is not None, "link_path chose the native link"
        self.runtime, self.module = runtime, module
        try:
            self.session = module.Session(bridge_settings(config))
        except RuntimeError as e:
            raise OpenFailed(str(e)) from e
        self.inbox: Any = None
        self._entities: list[Any] = []

    def publisher(self, key: str, publisher_id: int, express: bool) -> Publisher:
        pub: Publisher = self.session.publisher(key, publisher_id, express)
        return pub

    def subscribe(self, prefix: str, on_ready: Callable[[Any], None]) -> None:
        """On the loop: the data subscriber; `on_ready(inbox)` runs when rows wait."""
        self.inbox = self.session.inbox(prefix, QUEUE)
        self.runtime.loop.add_reader(self.inbox.fileno(), on_ready, self.inbox)

    def import_topic(self, name: str, index: int) -> None:
        self.inbox.import_topic(name, index)

    def queryable(self, key: str, answer: Answer) -> None:
        self._entities.append(self.session.queryable(key, answer))

    def zid(self) -> str:
        zid: str = self.session.zid()
        return zid

    def get(
        self, selector: str, payload: bytes, timeout_s: float
    ) -> list[tuple[bytes, bytes, str]]:
        """Replies as (payload, attachment, the answering session's Zenoh id or "")."""
        replies: list[tuple[bytes, bytes, str]] = self.session.get(selector, payload, timeout_s)
        return replies

    def watch_peers(self, on_event: Callable[[bool, str], None]) -> None:
        """`on_event(opened, zid)` for each peer's transport opened or closed."""
        self._entities.append(self.session.peers(on_event))

    def close(self) -> None:
        if self.inbox is not None:
            loop, fd = self.runtime.loop, self.inbox.fileno()
            if loop.is_running():
                self.runtime.call(loop.remove_reader, fd)
            elif not loop.is_closed():
                loop.remove_reader(fd)
            self.inbox.close()
        for entity in self._entities:
            with contextlib.suppress(Exception):  # the session closes below regardless
                entity.undeclare()
        self.session.close()


class OpenFailed(Exception):
    """The session did not open (the bridge says why, with a hint)."""


class _PythonPublisher:
    def __init__(self, pub: Any, publisher_id: int) -> None:
        self.pub, self.id, self.seq = pub, publisher_id, 0

    def send(self, payload: bytes | memoryview, codec: int, tag: int) -> int:
        self.seq += 1
        if type(payload) is not bytes:
            payload = bytes(payload)  # zenoh-python puts bytes
        self.pub.put(payload, attachment=HEADER.pack(VERSION, codec, tag, self.id, self.seq))
        return self.seq

    def send_parts(self, parts: Sequence[bytes | memoryview], codec: int, tag: int) -> int:
        return self.send(b"".join(parts), codec, tag)  # zenoh-python puts one bytes

    def put(self, payload: bytes, attachment: bytes) -> None:
        self.pub.put(payload, attachment=attachment)

    def undeclare(self) -> None:
        self.pub.undeclare()


class PythonLink:
    """A bridge's session through zenoh-python: one subscriber, one drain thread."""

    native = False

    def __init__(self, runtime: Runtime, config: BridgeConfig) -> None:
        import zenoh

        self.runtime = runtime
        try:
            self.session: Any = zenoh.open(session_config(config))
        except zenoh.ZError as e:
            raise OpenFailed(str(e)) from e
        self._entities: list[Any] = []
        self.drain: Drain | None = None
        self.threads: ThreadScope | None = None

    def publisher(self, key: str, publisher_id: int, express: bool) -> Publisher:
        import zenoh

        pub = self.session.declare_publisher(
            key, congestion_control=zenoh.CongestionControl.BLOCK, express=express
        )
        return _PythonPublisher(pub, publisher_id)

    def subscribe(self, prefix: str, on_rows: RawRows, on_error: Callable[[str], None]) -> None:
        import zenoh

        sub = self.session.declare_subscriber(
            f"{prefix}/**",
            zenoh.handlers.FifoChannel(CHANNEL),
            allowed_origin=zenoh.Locality.REMOTE,
        )
        self._entities.append(sub)
        loop = self.runtime.loop

        def report(name: str, e: BaseException) -> None:
            detail = f"bridge drain thread failed: {type(e).__name__}: {e}"
            with contextlib.suppress(RuntimeError):  # a closed loop: the process is ending
                loop.call_soon_threadsafe(on_error, detail)

        self.threads = ThreadScope("bridge", on_error=report)
        self.drain = Drain(self.runtime, sub, len(prefix), on_rows)
        self.drain.thread = self.threads.spawn(self.drain.run, name="roboscale-bridge")

    def queryable(self, key: str, answer: Answer) -> None:
        def on_query(query: Any) -> None:
            payload = query.payload.to_bytes() if query.payload is not None else b""
            after = query.parameters.get("after")
            for reply, attachment in answer(str(query.key_expr), after, payload):
                query.reply(query.key_expr, reply, attachment=attachment)

        self._entities.append(self.session.declare_queryable(key, on_query))

    def zid(self) -> str:
        return str(self.session.zid())

    def get(
        self, selector: str, payload: bytes, timeout_s: float
    ) -> list[tuple[bytes, bytes, str]]:
        """Replies as (payload, attachment, the answering session's Zenoh id or "")."""
        import zenoh

        replies: list[tuple[bytes, bytes, str]] = []
        handler = self.session.get(
            selector,
            payload=payload,
            target=zenoh.QueryTarget.ALL,
            consolidation=zenoh.ConsolidationMode.NONE,
            timeout=timeout_s,
        )
        for reply in handler:
            ok, replier = reply.ok, reply.replier_id
            if ok is not None:
                att = ok.attachment
                zid = str(replier.zid) if replier is not None else ""
                replies.append((ok.payload.to_bytes(), att.to_bytes() if att else b"", zid))
        return replies

    def watch_peers(self, on_event: Callable[[bool, str], None]) -> None:
        """Count the peers Zenoh admits to this session (one callback, rare events)."""
        import zenoh

        def on_transport(event: Any) -> None:
            on_event(event.kind == zenoh.SampleKind.PUT, str(event.transport.zid))

        self._entities.append(self.session.info.declare_transport_events_listener(on_transport))

    def close(self) -> None:
        for entity in self._entities:
            with contextlib.suppress(Exception):  # the session closes below regardless
                entity.undeclare()
        self.session.close()
        if self.drain is not None:
            self.drain.stop()
        if self.threads is not None:
            self.threads.close(timeout_s=5.0)


class Drain:
    """The one thread of a zenoh-python session: batches of samples to the loop.

    At most BACKLOG batches wait for the loop: past that this thread waits, the channel
    fills, and Zenoh applies back-pressure to the publishers. Batches handed to the loop
    and taken by it are plain counters, each written by one thread only, so neither
    thread takes a lock per batch. Batches wait in `pending`, and the thread wakes the
    loop (`call_soon_threadsafe`, a system call) only when the loop is not already due to
    take them (`_woken`): under sustained load the loop takes one batch a turn and
    schedules the next itself, so the wake-ups coalesce. The thread runs in the link's
    ThreadScope: an exception it ends on (other than the channel closing with the
    subscriber) is reported on the loop as a `thread_failed` event, and closing the link
    joins it.
    """

    def __init__(self, runtime: Runtime, sub: Any, strip: int, on_rows: RawRows) -> None:
        self.runtime, self.sub, self.strip, self.on_rows = runtime, sub, strip, on_rows
        self.posted = 0
        self.taken = 0
        self.pending: deque[list[tuple[str, bytes, bytes]]] = deque()
        self._woken = False  # a `_deliver` is due on the loop: it takes what is pending
        self.stopped = False
        self._waiting = False  # the drain thread waits for room: the loop sets _room
        self._room = threading.Event()
        self.thread: threading.Thread | None = None

    def stop(self) -> None:
        """After the subscriber is undeclared (its channel closed): let the thread end."""
        self.stopped = True
        self._room.set()

    def run(self) -> None:
        sample: Any = None
        while True:
            if sample is None:
                try:
                    sample = self.sub.recv()
                except Exception:
                    return  # the channel closed with the subscriber
            batch: list[tuple[str, bytes, bytes]] = []
            closed = False
            while sample is not None and len(batch) < BATCH:
                batch.append(self.row(sample))
                try:
                    sample = self.sub.try_recv()  # a full batch leaves this one for the next
                except Exception:  # the channel closed with the subscriber, mid-batch
                    sample, closed = None, True
            if self.posted - self.taken >= BACKLOG and not self._wait_for_room():
                return
            self.posted += 1
            self.pending.append(batch)
            if not self._woken:
                self._woken = True
                try:
                    self.runtime.loop.call_soon_threadsafe(self._deliver)
                except RuntimeError:
                    return  # the loop is closed: the process is ending
            if closed:
                return

    def row(self, sample: Any) -> tuple[str, bytes, bytes]:
        att = sample.attachment
        return (
            str(sample.key_expr)[self.strip :],
            sample.payload.to_bytes(),
            (att.to_bytes() if att is not None else b""),
        )

    def _deliver(self) -> None:
        """On the loop: one pending batch; the next in a later turn (no wake-up needed)."""
        pending = self.pending
        batch = pending.popleft() if pending else None
        if pending:
            self.runtime.loop.call_soon(self._deliver)
        else:
            self._woken = False
            if pending:  # appended between the check and the flag: the thread saw it set
                self._woken = True
                self.runtime.loop.call_soon(self._deliver)
        if batch is None:
            return  # a second wake-up for a batch an earlier turn took
        self.taken += 1
        if self._waiting:
            self._room.set()
        self.on_rows(batch)

    def _wait_for_room(self) -> bool:
        """Block until the loop takes a batch; False once the link is closed."""
        while self.posted - self.taken >= BACKLOG:
            self._room.clear()
            self._waiting = True
            if self.posted - self.taken < BACKLOG:
                break  # taken between the check and the flag: the loop may not set the event
            self._room.wait(0.5)
            if self.stopped:
                return False
        self._waiting = False
        return True


Link = NativeLink | PythonLink


def open_link(runtime: Runtime, config: BridgeConfig, path: str) -> Link:
    use_thread_layout()  # before the session: Zenoh reads it when it starts its threads
    return NativeLink(runtime, config) if path == "native" else PythonLink(runtime, config)
