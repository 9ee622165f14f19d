"""The wire format of bridged messages: header and codecs, no pickle anywhere."""

from __future__ import annotations

import contextlib
import pickle
from dataclasses import dataclass
from typing import Any

import msgpack
import pytest

from roboscale.runtime.wire import (
    HEADER,
    Codec,
    Malformed,
    Unencodable,
    WireCodec,
    pack_header,
    type_tag,
    unpack_header,
)


class Point:
    def __init__(self, x: int) -> None:
        self.x = x

    def to_bytes(self) -> bytes:
        return self.x.to_bytes(4, "little")

    @classmethod
    def from_bytes(cls, data: bytes) -> Point:
        return cls(int.from_bytes(data, "little"))


class Other(Point):
    pass


@dataclass
class Opaque:
    value: int


def round_trip(msg: Any, msg_type: type = object) -> tuple[Codec, Any]:
    codec = WireCodec()
    kind, tag, data = codec.encode(msg)
    return kind, codec.decode(kind, tag, data, msg_type)


def test_bytes_pass_as_is_and_plain_data_goes_as_msgpack() -> None:
    assert round_trip(b"abc") == (Codec.RAW, b"abc")
    assert round_trip(bytearray(b"ab")) == (Codec.RAW, b"ab")
    kind, msg = round_trip({"a": [1, 2.5, None, True], 3: b"\x00", "t": (1, "x")})
    assert kind is Codec.MSGPACK
    assert msg == {"a": [1, 2.5, None, True], 3: b"\x00", "t": [1, "x"]}  # tuples as lists


def test_typed_messages_use_their_own_codec_checked_against_the_topic_type() -> None:
    kind, point = round_trip(Point(7), Point)
    assert kind is Codec.TYPED and isinstance(point, Point) and point.x == 7
    codec = WireCodec()
    kind, tag, data = codec.encode(Other(1))
    with pytest.raises(Malformed, match="not of this topic's Point"):
        codec.decode(kind, tag, data, Point)
    with pytest.raises(Malformed, match="not a codec of this topic's object"):
        codec.decode(kind, tag, data, object)


def test_rosbags_messages_go_as_cdr() -> None:
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.LATEST)
    vector = store.types["geometry_msgs/msg/Vector3"]
    codec = WireCodec(store)
    kind, tag, data = codec.encode(vector(1.0, 2.0, 3.0))
    assert kind is Codec.CDR and tag == type_tag("geometry_msgs/msg/Vector3")
    assert codec.decode(kind, tag, data, vector) == vector(1.0, 2.0, 3.0)
    with pytest.raises(Malformed, match="CDR message, not of this topic's"):
        codec.decode(kind, tag, data, store.types["geometry_msgs/msg/Point"])
    with pytest.raises(Malformed, match="cannot decode"):
        codec.decode(kind, tag, data[:5], vector)


@pytest.mark.parametrize("msg", [Opaque(1), {"k": Opaque(2)}, object(), {1, 2}])
def test_an_object_without_a_safe_codec_is_refused_at_publish_time(msg: Any) -> None:
    with pytest.raises(Unencodable, match=r"over the bridge.*plain data"):
        WireCodec().encode(msg)


def test_a_pickle_is_never_loaded_whatever_codec_it_claims(tmp_path: Any) -> None:
    class Boom:
        def __reduce__(self) -> tuple[Any, ...]:
            return (open, (str(tmp_path / "pwned"), "w"))

    evil = pickle.dumps(Boom())
    codec = WireCodec()
    for kind in (1, Codec.RAW, Codec.MSGPACK, Codec.TYPED, Codec.CDR, 9):
        with contextlib.suppress(Malformed):
            codec.decode(kind, 0, evil, object)
    assert not (tmp_path / "pwned").exists()
    with pytest.raises(Malformed, match="codec 1 is not accepted"):
        codec.decode(1, 0, evil, object)


def test_msgpack_extension_types_are_refused() -> None:
    data = msgpack.packb(msgpack.ExtType(5, b"x"))
    with pytest.raises(Malformed, match="extension type 5"):
        WireCodec().decode(Codec.MSGPACK, 0, data, object)


def test_header_round_trip_and_malformed_headers() -> None:
    assert unpack_header(pack_header(Codec.TYPED, 5, 42, 7)) == (Codec.TYPED, 5, 42, 7)
    with pytest.raises(Malformed, match="attachment of 3 bytes"):
        unpack_header(b"abc")
    with pytest.raises(Malformed, match="version 1"):  # the pickle era's header
        unpack_header(b"\x01" + pack_header(Codec.RAW, 0, 1, 1)[1:])
    with pytest.raises(Malformed, match="sequence number 0"):
        unpack_header(pack_header(Codec.RAW, 0, 1, 0))
    assert HEADER.size == 22


@pytest.mark.parametrize(
    ("codec", "data", "msg_type"),
    [
        (Codec.RAW, b"\x07\x00\x00\x00", Point),
        (Codec.MSGPACK, msgpack.packb({"x": 7}), Point),
        (Codec.MSGPACK, msgpack.packb(7), bytes),
        (Codec.RAW, b"7", int),
        (Codec.MSGPACK, msgpack.packb("7"), int),  # msgpack, but not the topic's plain type
        (Codec.TYPED, b"\x07\x00\x00\x00", int),
        (Codec.RAW, b"x", Opaque),  # a class with no codec takes nothing
    ],
)
def test_a_typed_topic_takes_only_its_types_codec(
    codec: Codec, data: bytes, msg_type: type
) -> None:
    with pytest.raises(Malformed, match=r"not a codec of this topic's|cannot decode"):
        WireCodec().decode(codec, type_tag(msg_type.__name__), data, msg_type)


def test_plain_typed_topics_get_their_plain_type() -> None:
    codec = WireCodec()
    assert codec.decode(Codec.MSGPACK, 0, msgpack.packb([1, 2]), tuple) == (1, 2)
    assert codec.decode(Codec.MSGPACK, 0, msgpack.packb({"a": 1}), dict) == {"a": 1}
    assert codec.decode(Codec.RAW, 0, b"ab", bytes) == b"ab"


@pytest.mark.parametrize(
    "data",
    [
        b"\xdd\x00\x1e\x84\x80" + b"\x90" * 2_000_000,  # 2,000,000 empty lists (the review's)
        b"\x91" * 100_000,  # nested 100,000 deep
        b"\xdb\xff\xff\xff\xff",  # a string of 4 GiB announced
        b"\xc6\x00\x50\x00\x01" + b"x" * 5_242_881,  # a 5 MiB byte string
        b"\xdf\x00\x10\x00\x00" + b"\x00\x00" * 0x100000,  # a map of 1 Mi pairs
    ],
)
def test_msgpack_decoding_is_bounded(data: bytes) -> None:
    with pytest.raises(Malformed, match="cannot decode"):
        WireCodec().decode(Codec.MSGPACK, 0, data, object)


def test_a_payload_over_the_limit_is_malformed_before_decoding() -> None:
    with pytest.raises(Malformed, match="payload of 11 bytes, over this topic's maximum of 10"):
        WireCodec().decode(Codec.RAW, 0, b"x" * 11, object, 10)
