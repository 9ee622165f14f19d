"""Cross-process durable topics: the wire header, retention, cursors and the resequencer.

Pure logic, no Zenoh (runtime/bridge.py does the networking), so it is tested directly.

- Every bridged message carries a publisher id (of its bridge's Zenoh session id,
  `publisher_of`, new with each session) and the
  publisher's sequence number on that topic (1, 2, 3... per publisher) in its wire
  header (runtime/wire.py).
- `Retention`: the publisher side keeps the last K messages of a durable topic
  (bounded; evictions counted) and answers "everything after seq S".
- `CursorLog`: the subscriber side's last handed-over seq per publisher, a table of
  slots in a shared file mapping, stored before the callback runs (handed over =
  delivered, as in-process). The file lives with the supervisor (it outlives the
  process) and the next instance resumes from it.
- `Resequencer`: merges live samples with the retained backlog, per publisher, by
  sequence number: duplicates dropped and counted, delivery in order, a gap waits
  for a backlog query and, if the retention no longer has it, is counted as lost.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import threading
from collections import deque
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roboscale.errors import UserError

_RECORD = struct.Struct("<QQ")  # a cursor record: publisher id, seq
_SEQ = struct.Struct("<Q")


def publisher_of(zid: str) -> int:
    """The publisher id of a bridge whose Zenoh session is `zid` (63 bits, never 0): a
    backlog reply is its publisher's own only if the session that answered it (Zenoh's
    replier id, which the answering peer's API cannot set) has that publisher's id."""
    digest = hashlib.blake2b(zid.encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "little") >> 1) or 1


class Retention:
    """The last `limit` messages of one durable topic, as sent (payload, attachment)."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise UserError(f"retention must keep at least 1 message, got {limit}")
        self.limit = limit
        self.items: deque[tuple[int, bytes, bytes]] = deque(maxlen=limit)
        self.evicted = 0  # messages pushed out by newer ones: a slow reader may miss them
        self._lock = threading.Lock()  # queries are answered on a Zenoh thread

    def add(self, seq: int, payload: bytes, attachment: bytes) -> None:
        with self._lock:
            if len(self.items) == self.limit:
                self.evicted += 1
            self.items.append((seq, payload, attachment))

    def after(self, seq: int) -> list[tuple[int, bytes, bytes]]:
        with self._lock:
            if not self.items or self.items[-1][0] <= seq:
                return []
            return [item for item in self.items if item[0] > seq]


class CursorLog:
    """The last handed-over seq per publisher of one durable subscriber, in a mapped file.

    The file is a table of `SLOTS` (publisher id, seq) slots, mapped shared. A commit
    is a store into the mapping: no system call, so the loop thread keeps the GIL from
    the commit into the callback that follows it (an `os.write` would hand the GIL to
    the bridge thread for up to a switch interval, and a kill in that gap would lose a
    message the cursor calls delivered). The page cache keeps the store when the
    process is killed; it is not a defence against a power cut.
    """

    SLOTS = 64

    def __init__(self, path: Path, keep: Collection[int] = ()) -> None:
        self.path = path
        # Publishers whose cursor must not be evicted: those still connected, whose
        # retention could replay to the next instance (the bridge keeps this set live).
        self.keep = keep
        self.unsaved = 0  # commits of a publisher no slot could be freed for
        size = _RECORD.size * self.SLOTS
        self.cursors, slots = self._read(path, size)
        self.fresh = not self.cursors  # never handed anything over: no history to resume
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)  # no link followed
            try:
                os.ftruncate(fd, size)
                self._map = mmap.mmap(fd, size)
            finally:
                os.close(fd)
        except OSError as e:
            raise UserError(f"cannot write the durable cursor {path}: {e.strerror}") from e
        self._slot_of = {publisher: slot for slot, publisher in slots.items()}
        self._free = [i for i in range(self.SLOTS) if i not in slots]
        self._used: dict[int, int] = dict.fromkeys(slots, 0)  # slot -> commit counter
        self._commits = 0

    @classmethod
    def _read(cls, path: Path, size: int) -> tuple[dict[int, int], dict[int, int]]:
        """Cursors and the slot of each publisher."""
        try:
            with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
                data = f.read(size + 1)
        except FileNotFoundError:
            return {}, {}
        except OSError as e:
            raise UserError(f"cannot read the durable cursor {path}: {e.strerror}") from e
        if len(data) != size:
            raise UserError(
                f"{path}: {len(data)} bytes is not a cursor table of {size} bytes",
                hint="delete it to start that subscriber from the oldest retained message",
            )
        slots = {i: p for i, (p, _) in enumerate(_RECORD.iter_unpack(data)) if p}
        cursors = {p: seq for p, seq in _RECORD.iter_unpack(data) if p}
        return cursors, slots

    def commit(self, publisher: int, seq: int) -> None:
        self.cursors[publisher] = seq
        slot = self._slot_of.get(publisher)
        if slot is None:
            slot = self._claim(publisher, seq)
            if slot < 0:
                self.unsaved += 1
                return
        else:
            _SEQ.pack_into(self._map, slot * _RECORD.size + 8, seq)  # one aligned store
        self._commits += 1
        self._used[slot] = self._commits

    def _claim(self, publisher: int, seq: int) -> int:
        """A slot for a new publisher: a free one, or that of the least recent publisher
        not in `keep`; -1 if every slot holds one in `keep`."""
        if self._free:
            slot = self._free.pop(0)
        else:
            holders = {s: p for p, s in self._slot_of.items()}
            evictable = [s for s in self._used if holders.get(s) not in self.keep]
            if not evictable:
                return -1
            slot = min(evictable, key=self._used.__getitem__)
            del self._slot_of[_SEQ.unpack_from(self._map, slot * _RECORD.size)[0]]
        base = slot * _RECORD.size
        # Emptied first, so that a kill between the stores never pairs an id with a
        # seq that is not its own.
        _SEQ.pack_into(self._map, base, 0)
        _SEQ.pack_into(self._map, base + 8, seq)
        _SEQ.pack_into(self._map, base, publisher)
        self._slot_of[publisher] = slot
        return slot

    def last_seq(self) -> int:
        """The highest handed-over seq over all publishers (what status shows)."""
        return max(self.cursors.values(), default=0)

    def close(self) -> None:
        if not self._map.closed:
            self._map.close()


@dataclass(slots=True)
class _Stream:
    """One publisher's messages on one topic, as seen by one subscriber."""

    next: int  # the seq to deliver next; 0 = not known yet (take the first one available)
    pending: dict[int, Any] = field(default_factory=dict)
    # Confirmed: its owner showed it in a backlog reply (or a cursor holds it). Only
    # confirmed streams are delivered and get a cursor: an id nobody's backlog ever
    # showed can neither deliver nor evict a real publisher's cursor.
    confirmed: bool = True
    syncs: int = 0  # backlog queries this unconfirmed stream has waited through
    top: int = 0  # the highest seq its owner's backlog showed in the current sync


Deliver = Callable[[int, int, Any], None]  # (publisher id, seq, message)
GapReport = Callable[[int, int, int], None]  # (publisher id, first missing, count)

MAX_UNCONFIRMED = 16  # publisher ids waiting for their owner's backlog, at most
UNCONFIRMED_SYNCS = 2  # backlog queries an unconfirmed id may wait through, then expires
UNCONFIRMED_PENDING = 1024  # messages held for one unconfirmed id, at most


def within_window(seq: int, next_seq: int, window: int) -> bool:
    """A live seq may lead the next expected one by at most `window` (what a retention
    could hold): a seq of 2**64-1 would otherwise make every later message a duplicate."""
    return next_seq == 0 or seq < next_seq + window


@dataclass(slots=True)
class Refusals:
    """What the resequencer refused, by kind (Bridge.stats() shows them)."""

    jumps: int = 0  # live seqs further ahead than the window
    unconfirmed: int = 0  # messages of ids no owner confirmed (held past the bound, expired)
    expired: int = 0  # ids dropped unconfirmed (too many, or waited too many queries)


class Resequencer:
    """Live samples and backlog replies in, each message out once, in order per publisher.

    While `syncing` (a backlog query is out) everything is buffered; `backlog_done()`
    delivers what can be delivered and counts as lost any hole the backlog showed
    (below the newest seq its owner retained). Outside a sync, a message ahead of the
    next expected one is buffered and `offer` returns True: the caller must query the
    backlog to fill the hole.

    Defences against a peer that may publish (docs/security.md): a live seq further
    than `window` ahead is refused (`within_window`); backlog messages count only when
    `owned` (the replier's session is the publisher id's own: runtime/bridge.py checks
    it); an id seen live is held, unconfirmed, until its owner's backlog shows it, and
    at most MAX_UNCONFIRMED such ids wait, each through UNCONFIRMED_SYNCS queries.
    """

    def __init__(
        self,
        cursors: dict[int, int],
        *,
        fresh: bool,
        deliver: Deliver,
        gap: GapReport,
        max_pending: int = 100_000,
        window: int = 10_000,
    ) -> None:
        self.streams = {p: _Stream(s + 1) for p, s in cursors.items()}
        self.fresh = fresh  # a first start: unknown publishers start at what is available
        self.deliver = deliver
        self.gap = gap
        self.max_pending = max_pending
        self.window = window
        self.syncing = True  # the first backlog query comes right after subscribing
        self.duplicates = 0
        self.lost = 0
        self.refused = Refusals()
        # A live message was refused as too far ahead since the last query began: its
        # publisher is further on than that query may show (it was answered before the
        # message was sent), so the caller must ask again, or a publisher that then goes
        # quiet leaves its last messages undelivered for good (nothing held asks for them).
        self.ahead = False

    def offer(self, publisher: int, seq: int, msg: Any, owned: bool = False) -> bool:
        """Take one message (`owned`: from its owner's backlog reply); True when the
        backlog should be queried (a hole, an unconfirmed id, a refused jump)."""
        stream = self.streams.get(publisher)
        if stream is None:
            stream = self._new_stream(publisher, owned)
        if owned:
            stream.top = max(stream.top, seq)
            if not stream.confirmed:
                stream.confirmed, stream.syncs = True, 0
        elif not within_window(seq, stream.next, self.window):
            self.refused.jumps += 1
            self.ahead = True
            return True  # a real publisher far ahead: its backlog shows where it is
        if seq < stream.next or seq in stream.pending:
            self.duplicates += 1
            return False
        if not stream.confirmed:
            if len(stream.pending) >= UNCONFIRMED_PENDING:
                self.refused.unconfirmed += 1
                return False
            stream.pending[seq] = msg
            return True
        stream.pending[seq] = msg
        if self.syncing:
            if len(stream.pending) > self.max_pending:  # the backlog never came: bound it
                self._skip_hole(publisher, stream)
            return False
        self._flush(publisher, stream)
        if not stream.pending:
            return False
        if len(stream.pending) > self.max_pending:  # no fill is coming: bound the memory
            self._skip_hole(publisher, stream)
            return False
        return True

    def _new_stream(self, publisher: int, owned: bool) -> _Stream:
        """A publisher seen for the first time: on a first start it begins at what is
        available, else at 1; unconfirmed unless its owner's backlog shows it."""
        if not owned:
            waiting = [p for p, s in self.streams.items() if not s.confirmed]
            if len(waiting) >= MAX_UNCONFIRMED:
                self._expire(waiting[0])  # the oldest waiting id (dicts keep order)
        start = 0 if self.fresh and self.syncing else 1
        stream = self.streams[publisher] = _Stream(start, confirmed=owned)
        return stream

    def _expire(self, publisher: int) -> None:
        stream = self.streams.pop(publisher)
        self.refused.expired += 1
        self.refused.unconfirmed += len(stream.pending)

    def begin_sync(self) -> None:
        self.syncing = True
        self.ahead = False
        for stream in self.streams.values():
            stream.top = 0

    def backlog_done(self) -> None:
        """The backlog query finished: deliver in order; holes its owner's backlog showed
        are lost for good; unconfirmed ids wait one more query or expire."""
        self.syncing = False
        self.fresh = False
        for publisher, stream in list(self.streams.items()):
            if not stream.confirmed:
                stream.syncs += 1
                if stream.syncs >= UNCONFIRMED_SYNCS:
                    self._expire(publisher)
                continue
            self._settle(publisher, stream)

    def _settle(self, publisher: int, stream: _Stream) -> None:
        if stream.next == 0 and stream.pending:
            stream.next = min(stream.pending)
        self._flush(publisher, stream)
        # A hole below what the owner retained is lost; one above it may still come live.
        while stream.pending and min(stream.pending) <= stream.top:
            self._skip_hole(publisher, stream)
        for seq in [s for s in stream.pending if not within_window(s, stream.next, self.window)]:
            del stream.pending[seq]  # live, held while the stream's place was unknown: too far
            self.refused.jumps += 1
            self.ahead = True
        if len(stream.pending) > self.max_pending:
            self._skip_hole(publisher, stream)

    def _skip_hole(self, publisher: int, stream: _Stream) -> None:
        first = min(stream.pending)
        if stream.next:  # 0: a first start, which begins at what is there, loses nothing
            missing = first - stream.next
            self.lost += missing
            self.gap(publisher, stream.next, missing)
        stream.next = first
        self._flush(publisher, stream)

    def _flush(self, publisher: int, stream: _Stream) -> None:
        pending, deliver = stream.pending, self.deliver
        if stream.next == 0:
            return
        while stream.next in pending:
            seq = stream.next
            stream.next = seq + 1
            deliver(publisher, seq, pending.pop(seq))

    def holding(self) -> bool:
        """Whether messages wait: behind a hole, or of a publisher id not yet confirmed."""
        return any(stream.pending for stream in self.streams.values())

    def wants_query(self) -> bool:
        """Whether a backlog query should follow the one just done: messages are held, or
        one was refused as too far ahead while it was out (`ahead`)."""
        return self.ahead or self.holding()

    def after(self) -> dict[int, int]:
        """The last delivered seq per known publisher (what a backlog query asks after)."""
        return {p: s.next - 1 for p, s in self.streams.items() if s.next > 0 and s.confirmed}
