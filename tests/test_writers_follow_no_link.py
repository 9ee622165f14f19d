"""Writers that follow no link (#23 item 6): streams (logs, event records) refuse a link at
their name, the durable cursor refuses one, and whole files replace it (safewrite)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from roboscale.errors import UserError
from roboscale.runtime.durable import CursorLog
from roboscale.runtime.events import JsonLinesRecorder
from roboscale.safewrite import open_stream


@pytest.fixture
def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A link `name` -> `victim`, as someone else could plant it in a folder."""
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    name = tmp_path / "name"
    name.symlink_to(victim)
    return name, victim


@pytest.mark.parametrize("append", [False, True])
def test_a_stream_is_never_opened_through_a_link(planted: tuple[Path, Path], append: bool) -> None:
    name, victim = planted
    with pytest.raises(OSError):
        os.close(open_stream(name, append=append))
    assert victim.read_bytes() == b"precious\n"


def test_event_records_and_cursors_refuse_a_link(planted: tuple[Path, Path]) -> None:
    name, victim = planted
    with pytest.raises(UserError, match="cannot write events"):
        JsonLinesRecorder(name)
    with pytest.raises(UserError, match="durable cursor"):
        CursorLog(name)
    assert victim.read_bytes() == b"precious\n"


def test_a_stream_to_a_new_name_is_created(tmp_path: Path) -> None:
    fd = open_stream(tmp_path / "log", append=True)
    os.write(fd, b"one\n")
    os.close(fd)
    fd = open_stream(tmp_path / "log", append=True)
    os.write(fd, b"two\n")
    os.close(fd)
    assert (tmp_path / "log").read_bytes() == b"one\ntwo\n"
