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


def test_an_mcap_recording_is_never_written_through_a_link(tmp_path: Path) -> None:
    from roboscale.bags import write_mcap
    from roboscale.cli import _check_record

    target = tmp_path / "authorized_keys"  # absent: a dangling link "does not exist"
    record = tmp_path / "trial.mcap"
    record.symlink_to(target)
    with pytest.raises(UserError, match="exists already"):
        _check_record(record, "stata")
    with pytest.raises(OSError):
        write_mcap(record, [], "stata")
    assert not target.exists()


def test_raw_records_follow_no_link(tmp_path: Path) -> None:
    # They were written through "<name>.part": a link planted there was followed.
    from roboscale.records.raw import new_column, read_raw, write_raw

    victim = tmp_path / "victim"
    victim.write_bytes(b"precious\n")
    name = tmp_path / "agent.raw"
    (tmp_path / "agent.raw.part").symlink_to(victim)
    column = new_column(3)
    column[2] = 7
    write_raw(name, {"node": "n"}, {"seq": column})
    assert victim.read_bytes() == b"precious\n"
    header, columns = read_raw(name)
    assert header["node"] == "n" and list(columns["seq"]) == [0, 0, 7]


def test_a_stream_file_is_never_written_through_a_link(planted: tuple[Path, Path]) -> None:
    from roboscale.workloads.replay import write_stream_file

    name, victim = planted
    with pytest.raises(OSError):
        write_stream_file(name, [], [])
    assert victim.read_bytes() == b"precious\n"
