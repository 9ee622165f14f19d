"""The harness link's framing and process events (no stack needed)."""

from __future__ import annotations

import os
import socket

import pytest

from roboscale.facetrack.stacks.link import (
    LENGTH,
    MAX_MESSAGE,
    Link,
    LinkClosed,
    Listener,
    ProcessEvent,
    Role,
    read_packet,
    write_packet,
)


def test_packets_cross_a_pipe_framed_as_erlang_packet_4() -> None:
    r, w = os.pipe()
    try:
        write_packet(w, b"Y")
        write_packet(w, b"")
        write_packet(w, b"O" + bytes(range(256)) * 100)
        os.close(w)
        assert read_packet(r) == b"Y"
        assert read_packet(r) == b""
        assert read_packet(r) == b"O" + bytes(range(256)) * 100
        assert read_packet(r) is None  # end of input between messages
    finally:
        os.close(r)


def test_end_of_input_inside_a_message_is_an_error() -> None:
    r, w = os.pipe()
    os.write(w, LENGTH.pack(10) + b"abc")
    os.close(w)
    with pytest.raises(ValueError, match="inside a message"):
        read_packet(r)
    os.close(r)


def loopback_pair(peer: str) -> tuple[Link, socket.socket]:
    """A harness link accepted by `Listener` and the stack's end of it, on 127.0.0.1."""
    listener = Listener()
    try:
        stack_end = socket.create_connection(("127.0.0.1", listener.port))
        return listener.accept(peer, 5.0, lambda: True), stack_end
    finally:
        listener.close()


def test_a_link_reassembles_messages_split_across_reads() -> None:
    link, b = loopback_pair("test peer")
    try:
        data = LENGTH.pack(5) + b"hello" + LENGTH.pack(3) + b"abc"
        b.sendall(data[:3])
        assert link.receive(0.05) is None
        b.sendall(data[3:])
        assert link.receive(1.0) == b"hello"
        assert link.receive(1.0) == b"abc"
        b.sendall(LENGTH.pack(MAX_MESSAGE + 1))
        with pytest.raises(LinkClosed, match="test peer"):
            link.receive(1.0)
    finally:
        link.close()
        b.close()


def test_a_closed_link_is_an_error_naming_the_peer() -> None:
    link, b = loopback_pair("the Erlang VM")
    b.close()
    with pytest.raises(LinkClosed, match="the Erlang VM closed the link"):
        link.receive(1.0)
    link.close()


def test_process_events_round_trip_and_reject_garbage() -> None:
    event = ProcessEvent(Role.WORKER, 7, 4242, True, 123_456_789, 250_000)
    encoded = event.encode()
    assert encoded[:1] == b"U"
    assert ProcessEvent.decode(encoded[1:]) == event
    unknown = ProcessEvent(Role.CAMERA, 0, 1, False, -5, None)
    assert ProcessEvent.decode(unknown.encode()[1:]) == unknown
    with pytest.raises(ValueError, match="malformed process event"):
        ProcessEvent.decode(b"\x00\x01")
    with pytest.raises(ValueError, match="malformed process event"):
        ProcessEvent.decode(b"\x63" + encoded[2:])  # role 99 does not exist
