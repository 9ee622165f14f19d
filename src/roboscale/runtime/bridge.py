"""The Zenoh bridge: topics between processes and hosts (eclipse-zenoh 1.x).

A process lists the topics it exports (local publishes go out on Zenoh key
`<prefix>/<topic>`, prefix `rs` by default) and imports (samples from other
processes are injected into the local bus). Durable exports keep their last
`retain` messages and answer the queryable `<prefix>/@retain/<topic>?after=<seq>`;
durable imports resume from a `CursorLog` and deliver each message once, in
order (see runtime/durable.py).

Threads: ONE data subscriber per session (`<prefix>/**`, remote origin only,
FIFO channel handler), drained by ONE thread that hands batches of samples to
the loop with `call_soon_threadsafe`; imports are picked out by key on the loop.
The retention queryable and the liveliness watcher use one callback each per
session (rare events). Peer mode on explicit endpoints, multicast and gossip
scouting off; `mode: client` and `connect` endpoints reach routers across hosts.

Serialization (runtime/wire.py): bytes as is, plain data as msgpack, objects with
`to_bytes()`/`from_bytes()` and rosbags messages (CDR) checked against the importing
topic's type. Nothing is ever unpickled: an object without a safe codec is refused
at publish time. Malformed samples (bad header, retired or unknown codec, wrong type,
undecodable payload) are counted and dropped.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from roboscale.errors import UserError
from roboscale.runtime.bridgeconfig import (
    BridgeConfig,
    bridge_config,
    bridge_settings,
    session_config,
)
from roboscale.runtime.bus import Inbox, Topic
from roboscale.runtime.durable import CursorLog, Resequencer, Retention, publisher_of
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.names import check_name
from roboscale.runtime.security import check_reach
from roboscale.runtime.wire import Malformed, WireCodec, pack_header, unpack_header

__all__ = ["Bridge", "BridgeConfig", "bridge_config", "bridge_settings", "session_config"]

BATCH = 256  # samples handed to the loop per wake-up at most
BACKLOG = 64  # batches waiting for the loop at most
CHANNEL = 100_000  # FIFO channel capacity; when full, Zenoh applies back-pressure
_log = logging.getLogger("roboscale.runtime")


class _Export:
    """A local topic published on Zenoh; durable ones retain what they sent."""

    def __init__(self, bridge: Bridge, topic: Topic, retention: Retention | None) -> None:
        import zenoh

        self.bridge, self.topic, self.retention = bridge, topic, retention
        self.seq = 0
        self.pub = bridge.session.declare_publisher(
            bridge.key(topic.name),
            congestion_control=zenoh.CongestionControl.BLOCK,
            express=bridge.config.express,
        )

    def __call__(self, msg: Any) -> None:
        codec, tag, data = self.bridge.codec.encode(msg)
        self.seq += 1
        attachment = pack_header(codec, tag, self.bridge.publisher_id, self.seq)
        if self.retention is not None:  # retained before sent: a query never misses it
            self.retention.add(self.seq, data, attachment)
        self.pub.put(data, attachment=attachment)


class _DurableImport:
    """Resequences one durable imported topic and commits its cursor at hand-over, or once
    the callback returned (`delivery: at_least_once`)."""

    def __init__(self, bridge: Bridge, topic: Topic, inbox: Inbox, cursor: CursorLog) -> None:
        self.bridge, self.topic, self.cursor = bridge, topic, cursor
        self.inflight: deque[tuple[int, int, int]] = deque()  # (local seq, publisher, seq)
        self.seq = Resequencer(
            cursor.cursors,
            fresh=cursor.fresh,
            deliver=self._deliver,
            gap=self._gap,
            window=bridge.config.retain,
        )
        self.querying = False
        self.forged = 0  # backlog replies of a publisher id not the replier's own
        self.queries = 0  # backlog queries sent
        self.flooded = 0  # backlog replies past `retain` from one session: dropped
        if bridge.config.delivery == "at_least_once":
            inbox.on_done = self._commit
        else:
            inbox.on_handover = self._commit

    def _deliver(self, publisher: int, seq: int, msg: Any) -> None:
        self.inflight.append((self.topic.inject(msg), publisher, seq))

    def _commit(self, local_seq: int) -> None:
        inflight, commit = self.inflight, self.cursor.commit
        while inflight and inflight[0][0] <= local_seq:
            _, publisher, seq = inflight.popleft()
            commit(publisher, seq)

    def _gap(self, publisher: int, first: int, count: int) -> None:
        self.bridge.emit(
            "gap",
            f"{self.topic.name}: {count} messages from publisher {publisher:x} lost "
            f"(seq {first}..{first + count - 1}, no longer retained)",
        )

    def offer(self, publisher: int, seq: int, msg: Any) -> None:
        if self.seq.offer(publisher, seq, msg) and not self.querying:
            self.query()

    def offer_backlog(self, owner: int, publisher: int, seq: int, msg: Any) -> None:
        """A backlog reply of the session whose publisher id is `owner`: only its own
        messages are taken (a peer answering for another publisher is refused)."""
        if publisher != owner:
            self.forged += 1
            return
        self.seq.offer(publisher, seq, msg, owned=True)

    def query(self) -> None:
        """Ask the publishers for what they retained after our cursors (in a thread)."""
        self.querying = True
        self.queries += 1
        self.seq.begin_sync()
        after = self.seq.after()
        self.bridge.runtime.loop.run_in_executor(None, self.bridge.fetch, self, after)

    def backlog(self, replies: list[tuple[bytes, bytes, int]]) -> None:
        """On the loop: the replies of one query (payload, attachment, the publisher id
        of the session that answered), then resume in-order delivery."""
        if self.bridge.session is None:
            return  # closed while the query ran: its cursor is closed too
        for payload, attachment, owner in replies:
            self.bridge.take(self.topic, payload, attachment, self, owner=owner)
        self.querying = False
        self.seq.backlog_done()


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
    ) -> None:
        self.runtime = runtime
        self.config = config
        self.codec = WireCodec(typestore)  # typestore: rosbags', for CDR messages
        self.cursor_paths = dict(cursors or {})
        self.query_timeout_s = query_timeout_s
        self.publisher_id = 0  # of the session's id, once open (durable.publisher_of)
        self.session: Any = None
        self.malformed = 0
        self.ignored = 0  # samples of topics this process does not import
        self.admitted = 0  # Zenoh peers admitted to this session (authenticated, if secured)
        self.left = 0  # ... and those that left it
        self.connected: set[int] = set()  # publisher ids of the peers' sessions now admitted
        self.imported: dict[str, _DurableImport | None] = {}
        self.payload_limits = config.payload_limits()  # topic -> largest payload taken
        self._entities: list[Any] = []
        self._retained: dict[str, Retention] = {}
        self._exports: list[_Export] = []
        self._thread: threading.Thread | None = None
        # Batches handed to the loop and taken by it: plain counters, each written by one
        # thread only, so neither thread takes a lock per batch as a semaphore made both do.
        self._posted = 0
        self._taken = 0
        self._waiting = False  # the drain thread waits for room: the loop sets _room
        self._room = threading.Event()
        missing = [t for t in config.durable if t in config.imports and t not in self.cursor_paths]
        if missing:
            raise UserError(f"bridge: durable import {missing[0]} needs a cursor file")

    def key(self, topic: str) -> str:
        return f"{self.config.prefix}{topic}"

    # -- lifecycle (call from outside the loop; the tree's nodes must already subscribe) -----
    def open(self) -> Bridge:
        cfg = self.config
        insecure = check_reach(cfg.listen, cfg.connect, cfg.security, "bridge")
        if insecure:
            self.runtime.call(self._warn_insecure, insecure)
        self.session = self._open_session()
        self.publisher_id = publisher_of(str(self.session.zid()))
        try:
            self._watch_peers()
            self.runtime.call(self._declare)
        except BaseException:
            self.close()  # never leave a half-declared session open
            raise
        return self

    def _open_session(self) -> Any:
        import zenoh

        try:
            return zenoh.open(session_config(self.config))
        except zenoh.ZError as e:
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

    def _watch_peers(self) -> None:
        """Count the peers Zenoh admits to this session (one callback, rare events)."""
        self._entities.append(
            self.session.info.declare_transport_events_listener(self._on_transport)
        )

    def _on_transport(self, event: Any) -> None:
        """On a Zenoh thread (rare): a peer's transport opened (admitted) or closed."""
        import zenoh

        opened = event.kind == zenoh.SampleKind.PUT
        peer = publisher_of(str(event.transport.zid))
        if opened:
            self.admitted += 1
            self.connected.add(peer)
        else:
            self.left += 1
            self.connected.discard(peer)
        detail = f"{'admitted' if opened else 'left'}: {event.transport.zid}"
        with contextlib.suppress(RuntimeError):  # a closed loop: the process is ending
            self.runtime.loop.call_soon_threadsafe(self.emit, "peer", detail)

    def _declare(self) -> None:
        cfg, bus = self.config, self.runtime.bus
        for name in cfg.exports:
            retention = None
            if name in cfg.durable:
                retention = self._retained[name] = Retention(cfg.retain)
            self._export(name, retention)
        if self._retained:
            self._entities.append(
                self.session.declare_queryable(f"{cfg.prefix}/@retain/**", self._answer)
            )
        durables: list[_DurableImport] = []
        for name in cfg.imports:
            topic = bus.topic(name)
            if name in cfg.durable:
                durables.append(self._durable_import(topic))
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

    def _subscribe(self) -> None:
        """The one data subscriber of this session, and its drain thread."""
        import zenoh

        sub = self.session.declare_subscriber(
            f"{self.config.prefix}/**",
            zenoh.handlers.FifoChannel(CHANNEL),
            allowed_origin=zenoh.Locality.REMOTE,
        )
        self._entities.append(sub)
        self._thread = threading.Thread(
            target=self._drain, args=(sub,), name="roboscale-bridge", daemon=True
        )
        self._thread.start()

    def _durable_import(self, topic: Topic) -> _DurableImport:
        inboxes = [i for i in topic.inboxes if i.durable_key is not None]
        if not inboxes:
            raise UserError(
                f"bridge: no durable subscription of {topic.name} in this process: "
                "start the nodes before opening the bridge"
            )
        cursor = CursorLog(self.cursor_paths[topic.name], keep=self.connected)
        return _DurableImport(self, topic, inboxes[0], cursor)

    def close(self) -> None:
        """Undeclare everything and close the session (idempotent)."""
        if self.session is None:
            return
        session, self.session = self.session, None
        for export in self._exports:
            if export in export.topic.taps:
                export.topic.taps.remove(export)
        for entity in self._entities + [e.pub for e in self._exports]:
            # The session may already be gone; closing it below is what matters.
            with contextlib.suppress(Exception):
                entity.undeclare()
        session.close()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        for durable in self.imported.values():
            if durable is not None:
                durable.cursor.close()

    def __enter__(self) -> Bridge:
        return self.open()

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- receiving ----------------------------------------------------------------------------
    def _drain(self, sub: Any) -> None:
        """The one thread of this session: batches of samples to the loop."""
        loop, prefix = self.runtime.loop, len(self.config.prefix)
        sample: Any = None
        while True:
            if sample is None:
                try:
                    sample = sub.recv()
                except Exception:
                    return  # the channel closed with the subscriber
            batch: list[tuple[str, bytes, bytes]] = []
            closed = False
            while sample is not None and len(batch) < BATCH:
                batch.append(self._row(sample, prefix))
                try:
                    sample = sub.try_recv()  # a full batch leaves this one for the next
                except Exception:  # the channel closed with the subscriber, mid-batch
                    sample, closed = None, True
            # At most BACKLOG batches wait for the loop: past that this thread waits, the
            # channel fills, and Zenoh applies back-pressure to the publishers.
            if self._posted - self._taken >= BACKLOG and not self._wait_for_room():
                return
            self._posted += 1
            try:
                loop.call_soon_threadsafe(self._on_samples, batch)
            except RuntimeError:
                return  # the loop is closed: the process is ending
            if closed:
                return

    def _wait_for_room(self) -> bool:
        """Block until the loop takes a batch; False once the bridge is closed."""
        while self._posted - self._taken >= BACKLOG:
            self._room.clear()
            self._waiting = True
            if self._posted - self._taken < BACKLOG:
                break  # taken between the check and the flag: the loop may not set the event
            self._room.wait(0.5)
            if self.session is None:
                return False
        self._waiting = False
        return True

    @staticmethod
    def _row(sample: Any, prefix: int) -> tuple[str, bytes, bytes]:
        att = sample.attachment
        return (
            str(sample.key_expr)[prefix:],
            sample.payload.to_bytes(),
            (att.to_bytes() if att is not None else b""),
        )

    def _on_samples(self, batch: list[tuple[str, bytes, bytes]]) -> None:
        self._taken += 1
        if self._waiting:
            self._room.set()
        bus, imported = self.runtime.bus, self.imported
        ready: list[Inbox] = []
        try:
            for name, payload, attachment in batch:
                if name not in imported:
                    self.ignored += 1
                    continue
                self.take(bus.topic(name), payload, attachment, imported[name], ready)
        finally:
            self._drain_now(ready)

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
        durable: _DurableImport | None,
        ready: list[Inbox] | None = None,
        owner: int | None = None,
    ) -> None:
        """Decode one sample and hand it on; a malformed one is counted and dropped.
        `owner`: the sample is a backlog reply of the session of that publisher id."""
        try:
            codec, tag, publisher, seq = unpack_header(attachment)
            limit = self.payload_limits.get(topic.name, self.config.max_payload)
            msg = self.codec.decode(codec, tag, payload, topic.msg_type, limit)
        except Malformed as e:
            self.malformed += 1
            if self.malformed & (self.malformed - 1) == 0:  # 1st, 2nd, 4th...: never a flood
                self.emit("malformed", f"{topic.name}: {self.malformed} dropped, last: {e}")
            return
        if durable is None:
            topic.inject(msg, ready)
        elif owner is None:
            durable.offer(publisher, seq, msg)
        else:
            durable.offer_backlog(owner, publisher, seq, msg)

    # -- retention and backlog queries -------------------------------------------------------
    def _answer(self, query: Any) -> None:
        """On a Zenoh thread: reply with the retained messages after the asked seq."""
        key = str(query.key_expr)
        topic = "/" + key.split("/@retain/", 1)[-1]
        retention = self._retained.get(topic)
        if retention is None:
            return
        cursors = _cursors(query.payload.to_bytes() if query.payload is not None else b"")
        try:
            after = cursors.get(self.publisher_id, int(query.parameters.get("after") or 0))
        except ValueError:
            return  # a malformed query: nothing to answer
        for _, payload, attachment in retention.after(after):
            query.reply(key, payload, attachment=attachment)

    def fetch(self, durable: _DurableImport, after: dict[int, int]) -> None:
        """In a worker thread: query the backlog, then hand the replies to the loop."""
        import zenoh

        replies: list[tuple[bytes, bytes, int]] = []
        session = self.session
        try:
            if session is not None:
                selector = f"{self.config.prefix}/@retain{durable.topic.name}?after=0"
                handler = session.get(
                    selector,
                    payload=_pack_cursors(after),
                    target=zenoh.QueryTarget.ALL,
                    consolidation=zenoh.ConsolidationMode.NONE,
                    timeout=self.query_timeout_s,
                )
                replies = self._collect(handler, durable)
        except Exception as e:  # whatever failed, delivery must resume
            # Go on with what came: holes left are counted and reported as gaps, not hidden.
            with contextlib.suppress(RuntimeError):
                self.runtime.loop.call_soon_threadsafe(
                    self.emit, "gap", f"backlog query failed: {type(e).__name__}: {e}"
                )
        finally:
            with contextlib.suppress(RuntimeError):  # a closed loop: the process is ending
                self.runtime.loop.call_soon_threadsafe(durable.backlog, replies)

    def _collect(self, handler: Any, durable: _DurableImport) -> list[tuple[bytes, bytes, int]]:
        """The replies of one backlog query, with the publisher id of the session that
        sent each; at most `retain` per session (what one retention holds): a peer that
        floods replies is cut off there, counted in `durable.flooded`."""
        replies: list[tuple[bytes, bytes, int]] = []
        per_owner: dict[int, int] = {}
        for reply in handler:
            ok, replier = reply.ok, reply.replier_id
            if ok is None:
                continue
            owner = publisher_of(str(replier.zid)) if replier is not None else 0
            per_owner[owner] = per_owner.get(owner, 0) + 1
            if per_owner[owner] > self.config.retain:
                durable.flooded += 1  # an int store from this thread: read by stats() only
                continue
            att = ok.attachment
            replies.append((ok.payload.to_bytes(), att.to_bytes() if att else b"", owner))
        return replies

    def emit(self, kind: str, detail: str) -> None:
        self.runtime.emit(SupervisionEvent(kind, "bridge", "", "", detail))

    def stats(self) -> dict[str, Any]:
        durable = {
            name: {
                "duplicates": d.seq.duplicates,
                "lost": d.seq.lost,
                "cursor": d.cursor.last_seq(),
                "unsaved": d.cursor.unsaved,
                "queries": d.queries,
                "refused": {
                    "jumps": d.seq.refused.jumps,
                    "unconfirmed": d.seq.refused.unconfirmed,
                    "expired": d.seq.refused.expired,
                    "forged_replies": d.forged,
                    "flooded_replies": d.flooded,
                },
            }
            for name, d in self.imported.items()
            if d is not None
        }
        evicted = {name: r.evicted for name, r in self._retained.items()}
        return {
            "malformed": self.malformed,
            "ignored": self.ignored,
            "peers": {"admitted": self.admitted, "left": self.left},
            "durable": durable,
            "evicted": evicted,
        }


def _pack_cursors(after: Mapping[int, int]) -> bytes:
    return b"".join(p.to_bytes(8, "little") + s.to_bytes(8, "little") for p, s in after.items())


def _cursors(data: bytes) -> dict[int, int]:
    out: dict[int, int] = {}
    for i in range(0, len(data) - len(data) % 16, 16):
        out[int.from_bytes(data[i : i + 8], "little")] = int.from_bytes(
            data[i + 8 : i + 16], "little"
        )
    return out
