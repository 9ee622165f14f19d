"""The Zenoh bridge: topics between processes and hosts (eclipse-zenoh 1.x).

A process lists the topics it exports (local publishes go out on Zenoh key
`<prefix>/<topic>`, prefix `rs` by default) and imports (samples from other
processes are injected into the local bus). Durable exports keep their last
`retain` messages and answer the queryable `<prefix>/@retain/<topic>?after=<seq>`;
durable imports resume from a `CursorLog` and deliver each message once, in
order (runtime/durable.py; the import and its backlog query: runtime/backlog.py).
Each bridge says its transport to its peers (runtime/peertransport.py).

Per-message path (runtime/zlink.py): native where the extension `_zbridge` was built
(`make native`): Zenoh's thread checks the header and queues the sample in Rust, and an
eventfd wakes the loop; else zenoh-python, with ONE data subscriber per session
(`<prefix>/**`, remote origin only, FIFO channel handler) drained by ONE thread that hands
batches to the loop. On the loop, samples are decoded and injected into the local bus.
The retention queryable and the liveliness watcher use one callback each per session
(rare events). Peer mode on explicit endpoints, multicast and gossip scouting off;
`mode: client` and `connect` endpoints reach routers across hosts.

Serialization (runtime/wire.py): bytes as is, plain data as msgpack, objects with
`to_bytes()`/`from_bytes()` and rosbags messages (CDR) checked against the importing
topic's type. Nothing is ever unpickled: an object without a safe codec is refused
at publish time. Malformed samples (bad header, retired or unknown codec, wrong type,
undecodable payload) are counted and dropped.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from roboscale.errors import UserError
from roboscale.runtime import zlink
from roboscale.runtime.backlog import (
    QUERY_RETRIES,
    QUERY_RETRY_S,
    DurableImport,
    answer_backlog,
    durable_import,
)
from roboscale.runtime.bridgeconfig import (
    BridgeConfig,
    bridge_config,
    bridge_settings,
    session_config,
)
from roboscale.runtime.bus import Inbox, Topic
from roboscale.runtime.durable import Retention, publisher_of
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.names import check_name
from roboscale.runtime.peertransport import PeerTransports
from roboscale.runtime.security import check_reach
from roboscale.runtime.wire import (
    Codec,
    Malformed,
    Received,
    Unencodable,
    WireCodec,
    as_bytes,
    pack_header,
    unpack_header,
)
from roboscale.runtime.zenoh_config import LOWLATENCY_MAX_PAYLOAD, shared_memory_blocked

__all__ = [
    "QUERY_RETRIES",
    "QUERY_RETRY_S",
    "Bridge",
    "BridgeConfig",
    "DurableImport",
    "bridge_config",
    "bridge_settings",
    "session_config",
]

_log = logging.getLogger("roboscale.runtime")


class _Export:
    """A local topic published on Zenoh; durable ones retain what they sent."""

    def __init__(self, bridge: Bridge, topic: Topic, retention: Retention | None) -> None:
        self.bridge, self.topic, self.retention = bridge, topic, retention
        self.seq = 0  # durable topics only: the link numbers the others itself
        self.encode = bridge.codec.encode
        # None: the transport fragments any size. A durable export's messages are also
        # backlog replies, which carry the retention key (bridgeconfig.REPLY_KEY_ALLOWANCE).
        reply_key = bridge.retention_key(topic.name) if retention is not None else None
        self.limit = bridge.config.send_limit(reply_key)
        self.pub = bridge._link().publisher(
            bridge.key(topic.name), bridge.publisher_id, bridge.config.express
        )

    def __call__(self, msg: Any) -> None:
        codec, tag, data = self.encode(msg)
        if self.limit is not None:  # no call on the publish path without a cap
            self._check_size(len(data))
        if self.retention is None:
            self.pub.send(data, codec, tag)
            return
        self.seq += 1
        attachment = pack_header(codec, tag, self.bridge.publisher_id, self.seq)
        data = as_bytes(data)  # retained: its own bytes, not a view of the sender's
        self.retention.add(self.seq, data, attachment)  # retained before sent: never missed
        self.pub.put(data, attachment)

    def _check_size(self, size: int) -> None:
        """Refuse (and raise) a payload over the transport's cap (`limit` is set)."""
        if self.limit is not None and size > self.limit:
            self.bridge.refuse(self.topic.name, size, self.limit)

    def send_parts(self, parts: Sequence[bytes | memoryview]) -> None:
        """A raw message given as parts (the lab's frame: its header, then its body): on the
        native link each part is copied once, a large message straight into the shared
        memory pool, instead of a concatenation copied again by Zenoh. Plain exports only
        (a durable one retains its own bytes: concatenated, then published as usual)."""
        if self.retention is None:
            if self.limit is not None:  # the same cap as a message published whole
                self._check_size(sum(len(part) for part in parts))
            self.pub.send_parts(parts, Codec.RAW, 0)
        else:
            self(b"".join(parts))


class Bridge:
    """One Zenoh session of this process, carrying its exported and imported topics."""

    def __init__(
        self,
        runtime: Runtime,
        config: BridgeConfig,
        *,
        cursors: Mapping[str, Path] | None = None,
        query_timeout_s: float = 5.0,
        typestore: Any = None,
        liveliness: bool = False,
    ) -> None:
        """`liveliness`: the session also watches liveliness tokens (remote children), which
        needs zenoh-python's session (`session`)."""
        self.runtime = runtime
        self.config = config
        self.codec = WireCodec(typestore)  # typestore: rosbags', for CDR messages
        self.cursor_paths = dict(cursors or {})
        self.query_timeout_s = query_timeout_s
        self.publisher_id = 0  # of the session's id, once open (durable.publisher_of)
        self.path, self.path_reason = zlink.link_path(config, liveliness=liveliness)
        self.link: zlink.Link | None = None
        self.malformed = 0
        self.refused = 0  # payloads over the transport's cap, refused at publish (not sent)
        self.ignored = 0  # samples of topics this process does not import
        self.admitted = 0  # Zenoh peers admitted to this session (authenticated, if secured)
        self.left = 0  # ... and those that left it
        self.connected: set[int] = set()  # publisher ids of the peers' sessions now admitted
        self.transports = PeerTransports(self)  # says when a peer is on the other transport
        self.payload_limits = config.payload_limits()  # topic -> largest payload taken
        self.imported: dict[str, DurableImport | None] = {}
        # Native link: imported topics by the index its rows carry.
        self._by_index: list[tuple[Topic, DurableImport | None]] = []
        self._native_counts = (0, 0)  # (malformed, ignored) the native link counted
        self._retained: dict[str, Retention] = {}
        self._exports: list[_Export] = []
        missing = [t for t in config.durable if t in config.imports and t not in self.cursor_paths]
        if missing:
            raise UserError(f"bridge: durable import {missing[0]} needs a cursor file")

    def key(self, topic: str) -> str:
        return f"{self.config.prefix}{topic}"

    def retention_key(self, topic: str) -> str:
        """The key of a durable topic's backlog query, and of each of its replies."""
        return f"{self.config.prefix}/@retain{topic}"

    @property
    def session(self) -> Any:
        """The zenoh-python session, for liveliness; None when closed or on the native link."""
        return self.link.session if isinstance(self.link, zlink.PythonLink) else None

    # -- lifecycle (call from outside the loop; the tree's nodes must already subscribe) -----
    def open(self) -> Bridge:
        cfg = self.config
        insecure = check_reach(cfg.listen, cfg.connect, cfg.security, "bridge")
        if insecure:
            self.runtime.call(self._warn_insecure, insecure)
        blocked = shared_memory_blocked() if cfg.shared_memory else None
        if blocked:
            _log.warning("bridge: %s", blocked)
            self.runtime.call(self.emit, "shared_memory_blocked", blocked)
        self.link = self._open_link()
        self.publisher_id = publisher_of(self.link.zid())
        try:
            self.link.watch_peers(self._on_peer)
            self.runtime.call(self._declare)
        except BaseException:
            self.close()  # never leave a half-declared session open
            raise
        return self

    def _open_link(self) -> zlink.Link:
        try:
            return zlink.open_link(self.runtime, self.config, self.path)
        except zlink.OpenFailed as e:
            hint = None
            if self.config.connect:  # a refused handshake looks like an unreachable peer
                hint = (
                    f"is {', '.join(self.config.connect)} listening, and does it accept this "
                    "bridge's user, password or certificate? (docs/security.md)"
                )
            raise UserError(f"bridge: cannot open a Zenoh session: {e}", hint=hint) from e

    def _warn_insecure(self, endpoints: list[str]) -> None:
        detail = (
            f"INSECURE: {', '.join(endpoints)} beyond loopback without authentication "
            "(security.insecure: true): any peer that reaches it can read and write its topics"
        )
        _log.warning("bridge: %s", detail)
        self.emit("insecure", detail)

    def _on_peer(self, opened: bool, zid: str) -> None:
        """On a Zenoh thread (rare): a peer's transport opened (admitted) or closed."""
        peer = publisher_of(zid)
        if opened:
            self.admitted += 1
            self.connected.add(peer)
        else:
            self.left += 1
            self.connected.discard(peer)
        detail = f"{'admitted' if opened else 'left'}: {zid}"
        with contextlib.suppress(RuntimeError):  # a closed loop: the process is ending
            self.runtime.loop.call_soon_threadsafe(self.emit, "peer", detail)
            if opened:
                self.runtime.loop.call_soon_threadsafe(self.transports.admitted, zid)

    def _declare(self) -> None:
        cfg, bus = self.config, self.runtime.bus
        self.transports.declare(self._link().zid())
        for name in cfg.exports:
            retention = None
            if name in cfg.durable:
                retention = self._retained[name] = Retention(cfg.retain)
            self._export(name, retention)
        if self._retained:
            self._link().queryable(f"{cfg.prefix}/@retain/**", self._answer)
        durables: list[DurableImport] = []
        for name in cfg.imports:
            topic = bus.topic(name)
            if name in cfg.durable:
                durables.append(durable_import(self, topic))
                self.imported[name] = durables[-1]
            else:
                self.imported[name] = None
        if cfg.imports:
            self._subscribe()
        for durable in durables:  # subscribed live first, then the backlog
            durable.query()

    def _export(self, name: str, retention: Retention | None) -> None:
        export = _Export(self, self.runtime.bus.topic(name), retention)
        self._exports.append(export)
        self.runtime.bus.topic(name).taps.append(export)

    def add_topics(self, exports: Sequence[str] = (), imports: Sequence[str] = ()) -> None:
        """Export and import more topics, not durable, on the open bridge (on the loop):
        a process that declares its topics one by one after opening it."""
        names = [check_name(n) for n in (*exports, *imports)]
        for name in names[: len(exports)]:
            self._export(name, None)
        subscribed = bool(self.imported)
        for name in names[len(exports) :]:
            self.imported[name] = None
        if self.imported and not subscribed:
            self._subscribe()
        elif subscribed:
            self._import_native(names[len(exports) :])

    def _link(self) -> zlink.Link:
        if self.link is None:
            raise RuntimeError("bridge: not open")
        return self.link

    def _subscribe(self) -> None:
        """The one data subscriber of this session (and the python link's drain thread)."""
        link = self._link()
        if isinstance(link, zlink.NativeLink):
            link.subscribe(self.config.prefix, self._on_native)
            self._import_native(list(self.imported))
        else:
            link.subscribe(self.config.prefix, self._on_samples, self._on_link_error)

    def _import_native(self, names: Sequence[str]) -> None:
        link = self.link
        if not isinstance(link, zlink.NativeLink):
            return
        bus = self.runtime.bus
        for name in names:
            link.import_topic(name, len(self._by_index))
            self._by_index.append((bus.topic(name), self.imported[name]))

    def _on_link_error(self, detail: str) -> None:
        _log.error("bridge: %s", detail)
        self.emit("thread_failed", detail)

    def close(self) -> None:
        """Undeclare everything and close the session (idempotent)."""
        if self.link is None:
            return
        self.transports.close()  # before the session: no query of it in flight
        link, self.link = self.link, None
        for export in self._exports:
            if export in export.topic.taps:
                export.topic.taps.remove(export)
            # The session may already be gone; closing it below is what matters.
            with contextlib.suppress(Exception):
                export.pub.undeclare()
        link.close()  # joins the python link's drain thread
        for durable in self.imported.values():
            if durable is not None:
                durable.cursor.close()

    def __enter__(self) -> Bridge:
        return self.open()

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- receiving ----------------------------------------------------------------------------
    def _on_samples(self, batch: list[tuple[str, bytes, bytes]], start: int = 0) -> None:
        """On the loop (python link): a batch of samples, headers not checked yet."""
        bus, imported = self.runtime.bus, self.imported
        ready: list[Inbox] = []
        n = start
        try:
            for n, (name, payload, attachment) in enumerate(  # noqa: B007  (n: for except)
                batch[start:] if start else batch, start
            ):
                if name not in imported:
                    self.ignored += 1
                    continue
                self.take(bus.topic(name), payload, attachment, imported[name], ready)
        except BaseException:
            self._later(self._on_samples, batch, n + 1)
            raise
        finally:
            self._drain_now(ready)

    def _later(self, fn: Any, rows: Any, start: int) -> None:
        """An exception no callback guard stops (a late CallbackHung, just after a callback
        that was handed its sample at once, `Inbox.hand_now`) struck while the sample
        `start - 1` was handed on: the samples after it go on in a later loop turn (as
        `Inbox.drain` leaves what it had not handed over queued)."""
        if start < len(rows):
            self.runtime.loop.call_soon(fn, rows, start)

    def _drain_now(self, ready: list[Inbox]) -> None:
        """Deliver in this loop turn, not the next (no publisher is on this stack)."""
        for n, inbox in enumerate(ready):
            try:
                inbox.drain()
            except BaseException:
                # An exception no callback guard stops (a late CallbackHung): the inboxes
                # not drained yet are scheduled as usual, or they would wait forever.
                for rest in ready[n + 1 :]:
                    self.runtime.loop.call_soon(rest.drain)
                raise

    def take(
        self,
        topic: Topic,
        payload: bytes,
        attachment: bytes,
        durable: DurableImport | None,
        ready: list[Inbox] | None = None,
        owner: int | None = None,
    ) -> None:
        """Check and decode one sample and hand it on; a malformed one is counted and
        dropped. `owner`: the sample is a backlog reply of the session of that publisher id."""
        try:
            codec, tag, publisher, seq = unpack_header(attachment)
        except Malformed as e:
            self._malformed(topic.name, 1, e)
            return
        self.deliver(topic, codec, tag, publisher, seq, payload, durable, ready, owner)

    def deliver(
        self,
        topic: Topic,
        codec: int,
        tag: int,
        publisher: int,
        seq: int,
        payload: Received,
        durable: DurableImport | None,
        ready: list[Inbox] | None = None,
        owner: int | None = None,
    ) -> None:
        """Decode one sample whose header passed its checks and hand it on."""
        try:
            limit = self.payload_limits.get(topic.name, self.config.max_payload)
            msg = self.codec.decode(codec, tag, payload, topic.msg_type, limit)
        except Malformed as e:
            self._malformed(topic.name, 1, e)
            return
        if durable is None:
            topic.inject(msg, ready)
        elif owner is None:
            durable.offer(publisher, seq, msg)
        else:
            durable.offer_backlog(owner, publisher, seq, msg)

    def _malformed(self, where: str, count: int, error: object) -> None:
        before, self.malformed = self.malformed, self.malformed + count
        if self.malformed.bit_length() > before.bit_length():  # 1st, 2nd, 4th...: no flood
            self.emit("malformed", f"{where}: {self.malformed} dropped, last: {error}")

    def refuse(self, topic: str, size: int, limit: int) -> None:
        """A payload of `size` bytes over the transport's cap `limit` (`transport:
        lowlatency`, which would drop it silently): counted, reported as received ones
        are, and raised to its publisher."""
        why = "transport: lowlatency does not fragment"
        if limit < LOWLATENCY_MAX_PAYLOAD:  # a durable topic's long key, in every reply
            why += f"; {LOWLATENCY_MAX_PAYLOAD} B less what its backlog replies' key takes"
        error = f"{topic}: payload of {size} bytes, over this topic's maximum of {limit} ({why})"
        if self.runtime.in_loop():
            self._count_refused(error)
        else:  # a sender thread's direct send (_Export.send_parts): counted on the loop
            self.runtime.loop.call_soon_threadsafe(self._count_refused, error)
        raise Unencodable(f"bridge: cannot send {error}")

    def _count_refused(self, error: str) -> None:
        before, self.refused = self.refused, self.refused + 1
        if self.refused.bit_length() > before.bit_length():  # 1st, 2nd, 4th...: no flood
            self.emit("refused", f"{self.refused} not sent, last: {error}")

    def _on_native(self, inbox: Any) -> None:
        """On the loop (native link): the rows waiting, their headers checked in Rust."""
        rows = inbox.take(zlink.BATCH)
        malformed, ignored, error = inbox.counters()
        if (malformed, ignored) != self._native_counts:
            self.ignored += ignored - self._native_counts[1]
            if malformed != self._native_counts[0]:
                self._malformed("bridge", malformed - self._native_counts[0], error)
            self._native_counts = (malformed, ignored)
        self._deliver_rows(rows)

    def _deliver_rows(self, rows: list[Any], start: int = 0) -> None:
        """On the loop (native link): rows from `start` on, decoded and handed on."""
        by_index, deliver = self._by_index, self.deliver
        ready: list[Inbox] = []
        n = start
        try:
            for n, (index, codec, tag, publisher, seq, payload) in enumerate(  # noqa: B007
                rows[start:] if start else rows, start
            ):
                topic, durable = by_index[index]
                deliver(topic, codec, tag, publisher, seq, payload, durable, ready)
        except BaseException:
            self._later(self._deliver_rows, rows, n + 1)
            raise
        finally:
            self._drain_now(ready)

    # -- retention and backlog queries -------------------------------------------------------
    def _answer(
        self, key: str, after_text: str | None, payload: bytes
    ) -> list[tuple[bytes, bytes]]:
        """On a Zenoh thread: the retention queryable's replies (backlog.answer_backlog)."""
        return answer_backlog(self._retained, self.publisher_id, key, after_text, payload)

    def emit(self, kind: str, detail: str) -> None:
        self.runtime.emit(SupervisionEvent(kind, "bridge", "", "", detail))

    def stats(self) -> dict[str, Any]:
        durable = {name: d.stats() for name, d in self.imported.items() if d is not None}
        evicted = {name: r.evicted for name, r in self._retained.items()}
        return {
            "path": self.path,
            "malformed": self.malformed,
            "refused": self.refused,
            "ignored": self.ignored,
            "peers": {
                "admitted": self.admitted,
                "left": self.left,
                "other_transport": self.transports.other,
            },
            "durable": durable,
            "evicted": evicted,
        }
