"""The wire decoder, fuzzed (#23 item 8): whatever arrives is refused cleanly (Malformed)
or decoded, and what decodes is what was sent. A fixed, small budget for CI."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roboscale.runtime.wire import (
    HEADER,
    Codec,
    Malformed,
    WireCodec,
    pack_header,
    unpack_header,
)

from .test_wire import Point

FUZZ = settings(max_examples=300, deadline=None)
TOPIC_TYPES = (object, bytes, int, str, dict, list, tuple, Point)

plain = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
    | st.binary(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(max_size=5) | st.integers(-(2**63), 2**64 - 1), inner, max_size=5)
    ),
    max_leaves=30,
)


@FUZZ
@given(st.binary(max_size=40))
def test_any_attachment_is_a_header_or_malformed(raw: bytes) -> None:
    try:
        codec, tag, publisher, seq = unpack_header(raw)
    except Malformed:
        return
    assert len(raw) == HEADER.size and seq >= 1 and publisher >= 1
    assert raw == pack_header(codec, tag, publisher, seq)  # type: ignore[arg-type]


@FUZZ
@given(
    st.integers(min_value=0, max_value=255),
    st.integers(min_value=0, max_value=2**32 - 1),
    st.binary(max_size=200),
    st.sampled_from(TOPIC_TYPES),
)
def test_any_payload_is_refused_cleanly_or_decodes_stably(
    codec: int, tag: int, data: bytes, msg_type: type
) -> None:
    wire = WireCodec()
    try:
        msg = wire.decode(codec, tag, data, msg_type, 150)
    except Malformed:
        return
    assert len(data) <= 150
    if msg_type is not object:  # a typed topic gets its type, or its plain base type
        assert isinstance(msg, msg_type) or (msg_type is bytes and isinstance(msg, bytes))
    again, again_tag, encoded = wire.encode(msg)
    assert wire.decode(again, again_tag, encoded, msg_type) == msg or isinstance(msg, Point)


def as_sent(value: Any) -> Any:
    """What msgpack delivers for `value`: tuples as lists."""
    if isinstance(value, list | tuple):
        return [as_sent(v) for v in value]
    if isinstance(value, dict):
        return {k: as_sent(v) for k, v in value.items()}
    return value


@FUZZ
@given(plain)
def test_plain_data_crosses_unchanged(value: Any) -> None:
    wire = WireCodec()
    codec, tag, data = wire.encode(value)
    assert wire.decode(codec, tag, data, object) == as_sent(value)


@FUZZ
@given(plain, st.binary(max_size=8), st.integers(min_value=0, max_value=10))
def test_damaged_msgpack_is_refused_cleanly_or_decodes(value: Any, junk: bytes, cut: int) -> None:
    data = msgpack.packb(value, use_bin_type=True)
    damaged = data[: max(0, len(data) - cut)] + junk
    wire = WireCodec()
    try:
        msg = wire.decode(Codec.MSGPACK, 0, damaged, object)
    except Malformed:
        return
    codec, tag, data = wire.encode(msg)  # what decodes is plain data, and stays the same
    # (compared as encoded bytes: a NaN that decodes is the same NaN, yet not == itself)
    assert wire.encode(wire.decode(codec, tag, data, object)) == (codec, tag, data)


@pytest.mark.parametrize("depth", [10, 2000])
def test_deep_msgpack_nesting_is_refused_or_decoded_without_a_crash(depth: int) -> None:
    data = b"\x91" * depth + b"\xc0"
    try:
        WireCodec().decode(Codec.MSGPACK, 0, data, object)
    except Malformed:
        assert depth > 10
