"""TCPROS framing read from however the bytes are cut, with its bounds."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roboscale.runtime.tcpros import (
    MAX_FRAME,
    MAX_HEADER,
    FrameReader,
    encode_header,
    frame,
    parse_header,
)

HEADER = {"callerid": "/talker", "type": "std_msgs/String"}


def stream(payloads: list[bytes]) -> bytes:
    return encode_header(HEADER) + b"".join(frame(p) for p in payloads)


def read_in_cuts(reader: FrameReader, data: bytes, cuts: list[int]) -> list[bytes]:
    out, pos, i = [], 0, 0
    while pos < len(data):
        step = cuts[i % len(cuts)]
        out += reader.feed(data[pos : pos + step])
        pos, i = pos + step, i + 1
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=50), max_size=20), st.lists(st.integers(1, 64), min_size=1))
def test_messages_and_header_come_out_whole_however_the_bytes_are_cut(
    payloads: list[bytes], cuts: list[int]
) -> None:
    reader = FrameReader()
    assert read_in_cuts(reader, stream(payloads), cuts) == payloads
    assert reader.header == HEADER
    counter = FrameReader(keep=False)
    assert len(read_in_cuts(counter, stream(payloads), cuts)) == len(payloads)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_a_malformed_header_is_a_value_error_never_a_crash(body: bytes) -> None:
    with contextlib.suppress(ValueError):
        parse_header(body)


def test_an_oversized_header_or_kept_message_is_refused_before_it_is_buffered() -> None:
    with pytest.raises(ValueError, match="header too large"):
        FrameReader().feed(struct.pack("<I", MAX_HEADER + 1))
    reader = FrameReader()
    reader.feed(encode_header(HEADER))
    with pytest.raises(ValueError, match="over"):
        reader.feed(struct.pack("<I", MAX_FRAME + 1))
    counter = FrameReader(keep=False)  # counting skips bodies: any size, nothing held
    counter.feed(encode_header(HEADER))
    assert counter.feed(struct.pack("<I", MAX_FRAME + 1) + b"x" * 1000) == [b""]
    assert len(counter._buf) == 0
