"""The cursor a rospy subscriber behind the durable relay commits to (runtime/roscursor.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.runtime.roscursor import Cursor, read_cursor


class Msg:
    """A message as rospy hands it over: its connection's header attached."""

    def __init__(self, header: dict[str, str]) -> None:
        self._connection_header = header


def test_the_cursor_numbers_each_connection_on_its_own(tmp_path: Path) -> None:
    """Messages of an old connection still queued after a reconnection, interleaved with
    the new one's: each is committed with its own connection's number."""
    path = tmp_path / "sub.cursor"
    cursor = Cursor(str(path))
    old = {"callerid": "/relay", "durable_epoch": "7", "durable_first": "1"}
    new = {**old, "durable_first": "3"}
    cursor.handled(Msg(old))  # 1
    assert read_cursor(str(path)) == (7, 1)
    cursor.handled(Msg(new))  # 3
    cursor.handled(Msg(old))  # 2, queued before the reconnection
    assert read_cursor(str(path)) == (7, 2)
    cursor.handled(Msg(new))  # 4
    assert read_cursor(str(path)) == (7, 4)
    cursor.handled(Msg({"callerid": "/talker"}))  # not through a relay: left alone
    assert read_cursor(str(path)) == (7, 4)
    cursor.close()
    path.write_bytes(b"short")
    with pytest.raises(ValueError, match="not a cursor"):
        read_cursor(str(path))
