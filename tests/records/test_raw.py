from __future__ import annotations

from array import array
from pathlib import Path

import pytest

from roboscale.records.raw import new_column, read_raw, write_raw


def test_round_trip(tmp_path: Path) -> None:
    cols = {"seq": array("q", [0, 1, 2]), "t_sent": array("q", [5, -6, 2**62])}
    write_raw(tmp_path / "n.raw", {"node": "sender_0", "counters": {"received": 2}}, cols)
    header, back = read_raw(tmp_path / "n.raw")
    assert header["node"] == "sender_0"
    assert header["count"] == 3
    assert header["columns"] == ["seq", "t_sent"]
    assert back == cols
    assert not (tmp_path / "n.raw.part").exists()


def test_new_column_is_zeroed() -> None:
    assert list(new_column(4)) == [0, 0, 0, 0]


def test_rejects_ragged_columns(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="differ in length"):
        write_raw(tmp_path / "x.raw", {}, {"a": array("q", [1]), "b": array("q", [])})


def test_rejects_foreign_file(tmp_path: Path) -> None:
    (tmp_path / "x.raw").write_bytes(b"hello")
    with pytest.raises(ValueError, match="not a roboscale raw record file"):
        read_raw(tmp_path / "x.raw")
