"""The durable side of the bridge (runtime/bridge.py): a durable import's resequencing,
its backlog query and the replies it takes, and the retention queryable's answer.

A durable import (`DurableImport`) resequences its topic's live samples and the backlog
replies (runtime/durable.py `Resequencer`), and commits its cursor at hand-over, or once
the callback returned (`delivery: at_least_once`). Its backlog query asks every retention
queryable `<prefix>/@retain<topic>` for what it retained after our cursor of its
publisher (`pack_cursors`: 16 B per publisher in the query's payload; on the lowlatency
transport at most `BridgeConfig.query_cursors()`, `fewer_cursors`); each retained message
comes back as one reply (`answer_backlog`), taken only from the session that published it.
"""

from __future__ import annotations

import contextlib
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from roboscale.errors import UserError
from roboscale.runtime.bus import Inbox, Topic
from roboscale.runtime.durable import CursorLog, Resequencer, Retention, publisher_of

if TYPE_CHECKING:
    from roboscale.runtime.bridge import Bridge

QUERY_RETRY_S = 1.0  # after a backlog query that left messages held, ask again this late
QUERY_RETRIES = 10  # ... at most this many times in a row without live traffic


class DurableImport:
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
        self.retries = 0  # queries asked again since live traffic last asked one
        self.forged = 0  # backlog replies of a publisher id not the replier's own
        self.queries = 0  # backlog queries sent
        self.flooded = 0  # backlog replies past `retain` from one session: dropped
        self.trimmed = 0  # queries that left cursors out to fit the transport (lowlatency)
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
            self.retries = 0
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
        most = self.bridge.config.query_cursors()
        if most is not None and len(after) > most:
            after = fewer_cursors(after, self.bridge.connected, most)
            self.trimmed += 1
        self.bridge.runtime.loop.run_in_executor(None, self.fetch, after)

    def backlog(self, replies: list[tuple[bytes, bytes, int]]) -> None:
        """On the loop: the replies of one query (payload, attachment, the publisher id
        of the session that answered), then resume in-order delivery."""
        if self.bridge.link is None:
            return  # closed while the query ran: its cursor is closed too
        for payload, attachment, owner in replies:
            self.bridge.take(self.topic, payload, attachment, self, owner=owner)
        self.querying = False
        self.seq.backlog_done()
        if self.seq.ahead and self.retries < QUERY_RETRIES:
            # A live message too far ahead was refused while the query was out: the reply
            # came from before it was sent. Its owner retains it: ask again at once.
            self.bridge.runtime.loop.call_soon(self._retry)
        elif self.seq.holding() and self.retries < QUERY_RETRIES:
            # Messages are held behind a hole or an unconfirmed id, and the query's replies
            # were lost or late (a timeout on a loaded machine): the publisher may have gone
            # quiet, so no live message would ask again. Ask again, a bounded number of times.
            self.bridge.runtime.loop.call_later(QUERY_RETRY_S, self._retry)

    def _retry(self) -> None:
        if self.bridge.link is not None and not self.querying and self.seq.wants_query():
            self.retries += 1
            self.query()

    def stats(self) -> dict[str, Any]:
        """What Bridge.stats() shows of this import."""
        seq = self.seq
        return {
            "duplicates": seq.duplicates,
            "lost": seq.lost,
            "cursor": self.cursor.last_seq(),
            "unsaved": self.cursor.unsaved,
            "queries": self.queries,
            "refused": {
                "jumps": seq.refused.jumps,
                "unconfirmed": seq.refused.unconfirmed,
                "expired": seq.refused.expired,
                "forged_replies": self.forged,
                "flooded_replies": self.flooded,
            },
            "trimmed_queries": self.trimmed,
        }

    def fetch(self, after: dict[int, int]) -> None:
        """In a worker thread: query the backlog, then hand the replies to the loop."""
        bridge = self.bridge
        replies: list[tuple[bytes, bytes, int]] = []
        link = bridge.link
        try:
            if link is not None:
                selector = f"{bridge.retention_key(self.topic.name)}?after=0"
                got = link.get(selector, pack_cursors(after), bridge.query_timeout_s)
                replies = self._collect(got)
        except Exception as e:  # whatever failed, delivery must resume
            # Go on with what came: holes left are counted and reported as gaps, not hidden.
            with contextlib.suppress(RuntimeError):
                bridge.runtime.loop.call_soon_threadsafe(
                    bridge.emit, "gap", f"backlog query failed: {type(e).__name__}: {e}"
                )
        finally:
            with contextlib.suppress(RuntimeError):  # a closed loop: the process is ending
                bridge.runtime.loop.call_soon_threadsafe(self.backlog, replies)

    def _collect(self, got: list[tuple[bytes, bytes, str]]) -> list[tuple[bytes, bytes, int]]:
        """The replies of one backlog query, with the publisher id of the session that
        sent each; at most `retain` per session (what one retention holds): a peer that
        floods replies is cut off there, counted in `flooded`."""
        replies: list[tuple[bytes, bytes, int]] = []
        per_owner: dict[int, int] = {}
        for payload, attachment, replier in got:
            owner = publisher_of(replier) if replier else 0
            per_owner[owner] = per_owner.get(owner, 0) + 1
            if per_owner[owner] > self.bridge.config.retain:
                self.flooded += 1  # an int store from this thread: read by stats() only
                continue
            replies.append((payload, attachment, owner))
        return replies


def durable_import(bridge: Bridge, topic: Topic) -> DurableImport:
    """The import of a durable topic, on its process's first durable subscription."""
    inboxes = [i for i in topic.inboxes if i.durable_key is not None]
    if not inboxes:
        raise UserError(
            f"bridge: no durable subscription of {topic.name} in this process: "
            "start the nodes before opening the bridge"
        )
    cursor = CursorLog(bridge.cursor_paths[topic.name], keep=bridge.connected)
    return DurableImport(bridge, topic, inboxes[0], cursor)


def answer_backlog(
    retained: Mapping[str, Retention],
    publisher_id: int,
    key: str,
    after_text: str | None,
    payload: bytes,
) -> list[tuple[bytes, bytes]]:
    """On a Zenoh thread: the retention queryable's replies, one per retained message
    after the asked seq (this publisher's cursor in `payload`, else `after_text`)."""
    topic = "/" + key.split("/@retain/", 1)[-1]
    retention = retained.get(topic)
    if retention is None:
        return []
    cursors = unpack_cursors(payload)
    try:
        after = cursors.get(publisher_id, int(after_text or 0))
    except ValueError:
        return []  # a malformed query: nothing to answer
    return [(data, attachment) for _, data, attachment in retention.after(after)]


def pack_cursors(after: Mapping[int, int]) -> bytes:
    """A backlog query's payload: 16 B per publisher, its id and last seq (little-endian)."""
    return b"".join(p.to_bytes(8, "little") + s.to_bytes(8, "little") for p, s in after.items())


def fewer_cursors(after: dict[int, int], connected: set[int], most: int) -> dict[int, int]:
    """`most` of the cursors `after` (publisher id -> seq), for a query that must fit one
    lowlatency message: those of peers admitted now first, then the newest publishers
    (the resequencer's order). A publisher left out answers from the oldest message it
    retains: its replies repeat what was delivered, dropped as duplicates, none lost."""
    kept = [p for p in after if p in connected][:most]
    kept += [p for p in reversed(after) if p not in connected][: most - len(kept)]
    return {p: after[p] for p in kept}


def unpack_cursors(data: bytes) -> dict[int, int]:
    out: dict[int, int] = {}
    for i in range(0, len(data) - len(data) % 16, 16):
        out[int.from_bytes(data[i : i + 8], "little")] = int.from_bytes(
            data[i + 8 : i + 16], "little"
        )
    return out
