"""The durable relay's bookkeeping on real sockets, without ROS (its ROS 1 test is
test_rosrelay_ros1.py): replay from a subscriber's cursor, and a dead subscriber."""

from __future__ import annotations

import selectors
import socket
from pathlib import Path

import pytest

from roboscale.runtime.roscursor import Cursor
from roboscale.runtime.rosrelay import Relay, _Out, main
from roboscale.runtime.tcpros import FrameReader

NOBODY = "http://127.0.0.1:9/"  # no master: discovery fails quietly, the relay runs on
HEADER = {"type": "std_msgs/UInt64", "md5sum": "1b2a79973e8bf53d7b53acb71299cb57"}


def relay(tmp_path: Path) -> Relay:
    made = Relay(NOBODY, "/seq", "/seq_durable", tmp_path / "sub.cursor", 100, "/relay")
    made.input_header = dict(HEADER)  # as if its publisher had answered
    return made


def subscribe(made: Relay) -> tuple[int, socket.socket]:
    """A subscriber connection whose header the relay has answered; its number, our end."""
    ours, theirs = socket.socketpair()
    theirs.settimeout(5)
    made._next_out += 1
    conn = made._next_out
    made.outs[conn] = _Out(theirs)
    made.sel.register(theirs, selectors.EVENT_READ, ("out", conn))
    header = {"topic": "/seq_durable", "md5sum": "*", "callerid": "/listener"}
    made._answer(conn, made.outs[conn], header)
    return conn, ours


def read_frames(sock: socket.socket, count: int) -> tuple[dict[str, str], list[bytes]]:
    """The header and the first `count` messages the relay sent (waits for them)."""
    reader, frames = FrameReader(), []
    sock.settimeout(30)
    while reader.header is None or len(frames) < count:
        chunk = sock.recv(65536)
        assert chunk, "the relay closed the connection"
        frames += reader.feed(chunk)
    return reader.header, frames


def test_a_new_subscriber_is_replayed_what_its_cursor_did_not_handle(tmp_path: Path) -> None:
    made = relay(tmp_path)
    try:
        made.received("pub", FrameReader(), [b"m1", b"m2", b"m3", b"m4"])
        cursor = Cursor(str(tmp_path / "sub.cursor"))
        cursor.commit(made.epoch, 2)  # the last instance handled 1 and 2
        _, ours = subscribe(made)
        header, frames = read_frames(ours, 2)
        assert header["durable_first"] == "3" and header["durable_epoch"] == str(made.epoch)
        assert frames == [b"m3", b"m4"]
        made.received("pub", FrameReader(), [b"m5"])  # then live, on the same connection
        ours.settimeout(30)
        assert ours.recv(6, socket.MSG_WAITALL) == b"\x02\x00\x00\x00m5"
        assert made.stats.replayed == 2 and made.stats.gaps == 0
        ours.close()
        cursor.close()
    finally:
        made.close()


def test_a_dead_subscribers_stale_event_is_skipped(tmp_path: Path) -> None:
    """Its send fails (closing it) and its EOF comes in the same select round: the event
    finds nothing (a KeyError there ended the relay)."""
    made = relay(tmp_path)
    try:
        conn, ours = subscribe(made)
        stale = made.sel.get_key(made.outs[conn].sock)
        ours.close()
        for _ in range(50):  # until a send notices the peer is gone
            made.received("pub", FrameReader(), [b"x" * 1000])
            if conn not in made.outs:
                break
        assert conn not in made.outs
        assert made.dispatch(stale)  # handled: skipped, nothing raised
        assert made.stats.relayed >= 1
    finally:
        made.close()


RELAY_ERRORS = {
    ("--topic", "/seq"): "give --to (with --cursor), --durable, or both: where messages go",
    ("--topic", "/seq", "--to", "/out"): "--to and --cursor go together",
    ("--topic", "/seq", "--durable", "/seq"): "--durable needs --listen or --connect",
    ("--topic", "/seq", "--to", "/o", "--cursor", "c", "--listen", "tcp/127.0.0.1:1"): (
        "--listen and --connect are for --durable"
    ),
}


def test_each_wrong_set_of_options_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROS_MASTER_URI", NOBODY)
    for argv, message in RELAY_ERRORS.items():
        with pytest.raises(SystemExit) as info:
            main(list(argv))
        assert info.value.code == 2
        assert message in capsys.readouterr().err
