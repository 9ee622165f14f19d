"""The pure logic of cross-process durable topics: retention, cursor, resequencer."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest

from roboscale.errors import UserError
from roboscale.runtime.durable import CursorLog, Resequencer, Retention


def test_retention_keeps_the_last_k_and_counts_evictions() -> None:
    retention = Retention(3)
    for seq in range(1, 6):
        retention.add(seq, b"%d" % seq, b"")
    assert [s for s, _, _ in retention.after(0)] == [3, 4, 5]
    assert [s for s, _, _ in retention.after(4)] == [5]
    assert retention.after(5) == [] and retention.evicted == 2
    with pytest.raises(UserError, match="at least 1"):
        Retention(0)


def test_cursor_table_survives_reopening_and_a_kill(tmp_path: Path) -> None:
    """Commits are stores into a shared mapping: the file holds them with no close."""
    path = tmp_path / "cursor"
    log = CursorLog(path)
    assert log.fresh
    for seq in range(1, 40):
        log.commit(1, seq)
        log.commit(2, seq * 10)
    assert path.stat().st_size == 16 * CursorLog.SLOTS  # a fixed table, not a growing log
    again = CursorLog(path)  # read while the first is still open, as after a SIGKILL
    assert not again.fresh and again.cursors == {1: 39, 2: 390} and again.last_seq() == 390
    log.close()
    again.close()


def test_cursor_table_evicts_the_least_recent_publisher(tmp_path: Path) -> None:
    path = tmp_path / "cursor"
    log = CursorLog(path)
    for publisher in range(1, CursorLog.SLOTS + 1):
        log.commit(publisher, 5)
    log.commit(1, 6)  # publisher 2 is now the least recently committed
    log.commit(999, 1)
    log.close()
    assert set(CursorLog(path).cursors) == set(range(1, CursorLog.SLOTS + 1)) - {2} | {999}


def test_a_file_that_is_not_a_cursor_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "cursor"
    path.write_bytes(struct.pack("<QQ", 1, 3))
    with pytest.raises(UserError, match="16 bytes is not a cursor table"):
        CursorLog(path)


class Collector:
    def __init__(self) -> None:
        self.out: list[tuple[int, int, Any]] = []
        self.gaps: list[tuple[int, int, int]] = []

    def resequencer(self, cursors: dict[int, int], fresh: bool) -> Resequencer:
        return Resequencer(
            cursors,
            fresh=fresh,
            deliver=lambda p, s, m: self.out.append((p, s, m)),
            gap=lambda p, f, n: self.gaps.append((p, f, n)),
        )


def test_live_and_backlog_merge_in_order_once() -> None:
    c = Collector()
    r = c.resequencer({1: 3}, fresh=False)
    r.offer(1, 7, "g")  # live, while the backlog query is out
    r.offer(1, 8, "h")
    for seq, msg in ((2, "b"), (4, "d"), (5, "e"), (6, "f"), (7, "g")):  # the backlog
        r.offer(1, seq, msg, owned=True)
    r.backlog_done()
    assert [s for _, s, _ in c.out] == [4, 5, 6, 7, 8]
    assert r.duplicates == 2 and r.lost == 0 and not c.gaps
    assert not r.offer(1, 9, "i") and c.out[-1][1] == 9


def test_a_hole_asks_for_the_backlog_and_an_unfillable_one_is_a_reported_gap() -> None:
    c = Collector()
    r = c.resequencer({1: 0}, fresh=False)
    r.backlog_done()
    r.offer(1, 1, "a")
    assert r.offer(1, 4, "d")  # 2 and 3 missing: query the backlog
    r.begin_sync()
    r.offer(1, 3, "c", owned=True)  # the backlog only still had 3
    r.backlog_done()
    assert [s for _, s, _ in c.out] == [1, 3, 4]
    assert c.gaps == [(1, 2, 1)] and r.lost == 1


def test_a_fresh_subscriber_starts_at_what_is_available() -> None:
    c = Collector()
    r = c.resequencer({}, fresh=True)
    r.offer(9, 500, "x", owned=True)  # its owner's backlog
    r.offer(9, 501, "y")  # live
    r.backlog_done()
    assert [s for _, s, _ in c.out] == [500, 501] and r.lost == 0
    assert r.offer(5, 1, "new publisher")  # appears later, live: held, query its owner
    r.begin_sync()
    r.offer(5, 1, "new publisher", owned=True)  # the owner's backlog confirms it
    r.backlog_done()
    assert c.out[-1] == (5, 1, "new publisher") and r.duplicates == 1


def test_a_connected_publishers_cursor_is_never_evicted(tmp_path: Path) -> None:
    """Its retention could replay to the next instance: a 65th publisher goes unsaved
    (counted) rather than evict it; publishers gone give their slots."""
    path = tmp_path / "cursor"
    connected = set(range(1, CursorLog.SLOTS + 1))
    log = CursorLog(path, keep=connected)
    for publisher in range(1, CursorLog.SLOTS + 1):
        log.commit(publisher, 5)
    log.commit(999, 1)
    assert log.unsaved == 1 and 999 not in CursorLog(path).cursors
    connected.discard(7)  # its session left
    log.commit(999, 2)
    log.close()
    assert set(CursorLog(path).cursors) == set(range(1, CursorLog.SLOTS + 1)) - {7} | {999}


def test_a_query_whose_replies_were_lost_leaves_the_stream_holding() -> None:
    """What the bridge asks the backlog again for (`backlog.DurableImport._retry`): messages held
    behind a hole after a query that brought nothing, until a later one fills or ends it."""
    c = Collector()
    r = c.resequencer({1: 0}, fresh=False)
    r.backlog_done()
    r.offer(1, 1, "a")
    assert r.offer(1, 3, "c") and r.holding()  # 2 missing: held
    r.begin_sync()
    r.backlog_done()  # the query timed out: no reply, the hole may still come
    assert r.holding() and [s for _, s, _ in c.out] == [1]
    r.begin_sync()
    r.offer(1, 2, "b", owned=True)  # the next query's reply
    r.backlog_done()
    assert not r.holding() and [s for _, s, _ in c.out] == [1, 2, 3]


def test_a_jump_refused_while_a_query_is_out_asks_for_another() -> None:
    """CI's rare hang in test_durable_poison (the last command never delivered): a
    publisher 200 messages on when the import first hears it, live, with its place not yet
    known (next expected 1, window 100). Its live messages are refused as too far ahead
    while the backlog query is out; the reply, answered before the last ones were sent,
    cannot hold them, and nothing is held to ask again. `ahead` tells the bridge to ask."""
    c = Collector()
    r = Resequencer(
        {},
        fresh=True,
        deliver=lambda p, s, m: c.out.append((p, s, m)),
        gap=lambda p, f, n: c.gaps.append((p, f, n)),
        window=100,
    )
    r.backlog_done()  # the first query: the publisher was not connected yet
    assert r.offer(7, 200, "live") and r.ahead  # too far ahead of 1: refused, query
    r.begin_sync()
    assert not r.ahead
    for seq in range(201, 220):  # live, while the query is out: refused too
        r.offer(7, seq, "live")
    for seq in range(106, 206):  # the owner's retention (100) when it answered
        r.offer(7, seq, "backlog", owned=True)
    r.backlog_done()
    assert c.out[-1][1] == 205 and not r.holding()
    assert r.ahead and r.wants_query()  # 206..219 exist, only another query brings them
    r.begin_sync()
    for seq in range(120, 220):
        r.offer(7, seq, "backlog", owned=True)
    r.backlog_done()
    assert [s for _, s, _ in c.out] == list(range(106, 220)) and not r.wants_query()
