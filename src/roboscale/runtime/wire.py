"""What a bridged message looks like on the wire: the header and the codecs.

Nothing that arrives is ever unpickled, evaluated or imported: a sample is bytes, or
data in a format whose decoder builds values and never runs code named by the data.

- Every bridged message carries `HEADER` as its Zenoh attachment: format version,
  codec, type tag, publisher id (random per bridge instance) and the publisher's
  sequence number on that topic (1, 2, 3... per publisher).
- Codecs, picked by the sender from the message, checked by the receiver against the
  type its topic declares:
  - RAW: bytes, bytearray, memoryview, as is;
  - MSGPACK: plain data (None, bool, int, float, str, bytes, lists, tuples, dicts of
    these); lists and tuples both arrive as lists, as in JSON;
  - TYPED: an object whose class has `to_bytes()` and `from_bytes()`; the importing
    topic must be typed with a class of the same name, whose `from_bytes` decodes it;
  - CDR: a rosbags message (`__msgtype__`), serialized by a rosbags typestore (the
    bridge's, or rosbags' latest ROS 2 store); the importing topic must be typed with
    the class of that ROS type.
  The type tag is the CRC-32 of the type's name (TYPED: class name, CDR: ROS type), so
  a sample of another type is refused rather than decoded into the wrong class.
- Anything else is refused at publish time (`Unencodable`), never pickled.
- A typed topic takes only its type's codec (`codecs_of`): a topic of bytes RAW, of a
  plain type MSGPACK (decoded to that type), of a class with `from_bytes` TYPED, of a
  rosbags class CDR; an untyped topic (`object`) takes RAW and MSGPACK.
- Limits, checked before decoding: a payload of at most the imported topic's maximum
  (`check_size`); msgpack with per-item limits (`MSGPACK_LIMITS`) and at most
  `MSGPACK_CONTAINERS` lists and maps in one message, so that a small payload never
  becomes millions of objects.
- A received payload is bytes, or (native link, large payloads) a read-only buffer over
  the sample's own bytes (`_zbridge.Payload`, no copy). A topic typed `memoryview` gets
  a read-only memoryview of it, with no copy (on the python link, a view of the bytes);
  msgpack decodes from the buffer in place; every other topic gets bytes, as before.
- A sample that does not decode (`Malformed`: short or foreign header, the retired
  pickle codec, a codec or type its topic does not take, a payload over its limit, a
  decoder error) is counted and dropped by the bridge.
"""

from __future__ import annotations

import enum
import struct
import zlib
from typing import Any, Protocol

import msgpack

from roboscale.errors import UserError

# version (u8), codec (u8), type tag (u32), publisher id (u64), seq (u64), little-endian.
HEADER = struct.Struct("<BBIQQ")
VERSION = 2  # 1 carried pickles; its samples are refused by the version check
PLAIN = (type(None), bool, int, float, str, list, tuple, dict)
RAW_TYPES = (bytes, bytearray, memoryview)
DEFAULT_MAX_PAYLOAD = 16 * 1024 * 1024  # per imported topic, unless its bridge says otherwise
MAX_PAYLOAD_LIMIT = 1024 * 1024 * 1024  # the most a bridge may allow (Zenoh's own default)
# msgpack: no string or bytes over 4 MiB, no list over 1 Mi items or map over 256 Ki
# pairs, and at most 64 Ki lists and maps in all (an empty list is 1 byte on the wire
# and 56 in memory: without a total, 2 MB became 2,000,000 lists and 139 MB).
MSGPACK_LIMITS = {
    "max_str_len": 4 * 1024 * 1024,
    "max_bin_len": 4 * 1024 * 1024,
    "max_array_len": 1024 * 1024,
    "max_map_len": 256 * 1024,
    "max_ext_len": 4 * 1024 * 1024,  # refused anyway, by _no_extensions
}
MSGPACK_CONTAINERS = 64 * 1024
ALLOWED = (
    "bytes; plain data (None, bool, int, float, str, bytes, list, tuple, dict); "
    "an object whose class has to_bytes() and from_bytes(); a rosbags message (CDR)"
)


class Received(Protocol):
    """A received payload: bytes, or a read-only buffer over the sample (`_zbridge.Payload`)."""

    def __len__(self) -> int: ...
    def __buffer__(self, flags: int, /) -> memoryview: ...


def as_bytes(data: Received) -> bytes:
    """The payload as bytes: itself, or one copy of a lent buffer."""
    return data if type(data) is bytes else bytes(data)


class Codec(enum.IntEnum):
    """How a message crosses processes (1 was pickle, retired: never decoded)."""

    RAW = 0
    TYPED = 2
    MSGPACK = 3
    CDR = 4


class Malformed(Exception):
    """A sample on the wire that cannot be decoded: counted and dropped by the bridge."""


class Unencodable(UserError):
    """A message the bridge cannot send safely: raised to its publisher."""


def type_tag(name: str) -> int:
    return zlib.crc32(name.encode())


def pack_header(codec: Codec, tag: int, publisher: int, seq: int) -> bytes:
    return HEADER.pack(VERSION, codec, tag, publisher, seq)


def unpack_header(raw: bytes) -> tuple[int, int, int, int]:
    """(codec, type tag, publisher id, seq) of an attachment; Malformed if it is not ours."""
    if len(raw) != HEADER.size:
        raise Malformed(f"attachment of {len(raw)} bytes, expected {HEADER.size}")
    version, codec, tag, publisher, seq = HEADER.unpack(raw)
    if version != VERSION:
        raise Malformed(f"header version {version}, expected {VERSION}")
    if seq < 1:
        raise Malformed(f"sequence number {seq}")
    if publisher < 1:
        raise Malformed("publisher id 0")
    return codec, tag, publisher, seq


def _no_extensions(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack extension type {code} is not accepted")


def check_size(data: Received, limit: int) -> None:
    """Malformed if a payload is longer than its topic's maximum."""
    if len(data) > limit:
        raise Malformed(f"payload of {len(data)} bytes, over this topic's maximum of {limit}")


def codecs_of(msg_type: type) -> tuple[Codec, ...]:
    """The codecs a topic of `msg_type` takes: its type's own (in the order in which
    `WireCodec.encode` picks one for a message of that class), nothing else."""
    if msg_type is object:
        return (Codec.RAW, Codec.MSGPACK)
    if issubclass(msg_type, RAW_TYPES):
        return (Codec.RAW,)
    if msg_type in PLAIN:
        return (Codec.MSGPACK,)
    if isinstance(getattr(msg_type, "__msgtype__", None), str):
        return (Codec.CDR,)
    if callable(getattr(msg_type, "to_bytes", None)) and callable(
        getattr(msg_type, "from_bytes", None)
    ):
        return (Codec.TYPED,)
    if issubclass(msg_type, PLAIN):
        return (Codec.MSGPACK,)
    return ()


_TAKES: dict[type, frozenset[int]] = {}  # codecs_of per topic type, for the data path


def check_codec(codec: int, msg_type: type) -> None:
    """Malformed unless `codec` is one a topic of `msg_type` takes."""
    if codec == 1:
        raise Malformed("codec 1 is not accepted (1 was pickle: never decoded)")
    if codec not in codecs_of(msg_type):
        name = Codec(codec).name if codec in Codec.__members__.values() else str(codec)
        raise Malformed(f"{name} sample: not a codec of this topic's {msg_type.__name__}")


class _ContainerBudget:
    """Counts the lists and maps of one msgpack message; ValueError past the budget."""

    __slots__ = ("left",)

    def __init__(self, budget: int) -> None:
        self.left = budget

    def take(self, value: Any) -> Any:
        self.left -= 1
        if self.left < 0:
            raise ValueError(f"more than {MSGPACK_CONTAINERS} lists and maps in one message")
        return value


def unpack_plain(data: Received) -> Any:
    """Plain data of a msgpack payload, within MSGPACK_LIMITS; ValueError (or another
    msgpack error) if it is not plain data or too big. (Keywords spelled out: a `**`
    mapping costs msgpack's call 0.5 µs.)"""
    if len(data) <= MSGPACK_CONTAINERS:  # each list or map takes a byte: none to count
        return msgpack.unpackb(
            data, raw=False, strict_map_key=False, ext_hook=_no_extensions,
            max_str_len=_MAX_STR, max_bin_len=_MAX_BIN, max_array_len=_MAX_ARRAY,
            max_map_len=_MAX_MAP, max_ext_len=_MAX_EXT,
        )  # fmt: skip
    take = _ContainerBudget(MSGPACK_CONTAINERS).take
    return msgpack.unpackb(
        data, raw=False, strict_map_key=False, ext_hook=_no_extensions,
        max_str_len=_MAX_STR, max_bin_len=_MAX_BIN, max_array_len=_MAX_ARRAY,
        max_map_len=_MAX_MAP, max_ext_len=_MAX_EXT, list_hook=take, object_hook=take,
    )  # fmt: skip


_MAX_STR, _MAX_BIN, _MAX_ARRAY, _MAX_MAP, _MAX_EXT = (
    MSGPACK_LIMITS[k]
    for k in ("max_str_len", "max_bin_len", "max_array_len", "max_map_len", "max_ext_len")
)


def _as_plain(value: Any, msg_type: type) -> Any:
    """The decoded value, if it is of its topic's plain type (as its base plain type, as
    it was sent; tuples arrive as lists); ValueError if it is another one."""
    if msg_type is object:
        return value
    base = next(t for t in PLAIN if issubclass(msg_type, t))
    if base is tuple and isinstance(value, list):
        return tuple(value)
    if not isinstance(value, base):
        raise ValueError(f"a {type(value).__name__}, not a {msg_type.__name__}")
    return value


class WireCodec:
    """Encodes and decodes the messages of one bridge.

    `typestore`: a rosbags typestore for CDR messages (user types registered in it);
    None takes rosbags' latest ROS 2 store when the first CDR message needs it.
    """

    def __init__(self, typestore: Any = None) -> None:
        self.typestore = typestore
        self._tags: dict[type, tuple[Codec, int]] = {}  # class -> its codec and tag

    def encode(self, msg: Any) -> tuple[Codec, int, bytes | memoryview]:
        """(codec, type tag, payload) of a message; Unencodable if no safe codec fits. A
        read-only contiguous memoryview goes as is (the native link lends it to Zenoh when
        its base object is immutable, `_zbridge`'s lend_any); other payloads are bytes."""
        if isinstance(msg, bytes):
            return Codec.RAW, 0, msg
        cls = type(msg)
        known = self._tags.get(cls)
        if known is None:
            known = self._tags[cls] = self._classify(msg)
        codec, tag = known
        if codec is Codec.RAW:
            if cls is memoryview and msg.readonly and msg.c_contiguous:
                return codec, 0, msg
            return codec, 0, bytes(msg)
        if codec is Codec.TYPED:
            return codec, tag, bytes(msg.to_bytes())
        if codec is Codec.CDR:
            return codec, tag, bytes(self._store().serialize_cdr(msg, msg.__msgtype__))
        try:
            return codec, 0, msgpack.packb(msg, use_bin_type=True)
        except (TypeError, ValueError, OverflowError) as e:
            raise Unencodable(f"cannot send {cls.__name__} over the bridge: {e}: {ALLOWED}") from e

    @staticmethod
    def _classify(msg: Any) -> tuple[Codec, int]:
        cls = type(msg)
        if isinstance(msg, bytearray | memoryview):
            return Codec.RAW, 0
        if cls in PLAIN:
            return Codec.MSGPACK, 0
        msgtype = getattr(cls, "__msgtype__", None)
        if isinstance(msgtype, str):
            return Codec.CDR, type_tag(msgtype)
        if callable(getattr(msg, "to_bytes", None)) and callable(getattr(cls, "from_bytes", None)):
            return Codec.TYPED, type_tag(cls.__name__)
        if isinstance(msg, PLAIN):  # a subclass of plain data: sent as its base type
            return Codec.MSGPACK, 0
        raise Unencodable(
            f"cannot send a {cls.__module__}.{cls.__name__} over the bridge "
            f"(pickle is never used): send {ALLOWED}"
        )

    def decode(
        self, codec: int, tag: int, data: Received, msg_type: type, limit: int = DEFAULT_MAX_PAYLOAD
    ) -> Any:
        """The message of one sample on a topic of `msg_type` whose payloads are at most
        `limit` bytes; raise Malformed if it cannot be decoded."""
        if len(data) > limit:
            check_size(data, limit)
        takes = _TAKES.get(msg_type)
        if takes is None:
            takes = _TAKES[msg_type] = frozenset(int(c) for c in codecs_of(msg_type))
        if codec not in takes:
            check_codec(codec, msg_type)
        try:
            if codec == Codec.RAW:
                if msg_type is memoryview:  # the node asked for a view: no copy
                    return memoryview(data).toreadonly()
                return as_bytes(data)
            if codec == Codec.MSGPACK:
                return _as_plain(unpack_plain(data), msg_type)
            if codec == Codec.TYPED:
                from_bytes = getattr(msg_type, "from_bytes", None)
                if from_bytes is None or tag != type_tag(msg_type.__name__):
                    raise Malformed(f"typed message, not of this topic's {msg_type.__name__}")
                return from_bytes(as_bytes(data))
            if codec == Codec.CDR:
                msgtype = getattr(msg_type, "__msgtype__", None)
                if not isinstance(msgtype, str) or tag != type_tag(msgtype):
                    raise Malformed(f"CDR message, not of this topic's {msg_type.__name__}")
                return self._store().deserialize_cdr(as_bytes(data), msgtype)
        except Malformed:
            raise
        except Exception as e:
            name = Codec(codec).name
            raise Malformed(f"cannot decode ({name}): {type(e).__name__}: {e}") from e
        raise Malformed(f"codec {codec} is not accepted (1 was pickle: never decoded)")

    def _store(self) -> Any:
        if self.typestore is None:
            from rosbags.typesys import Stores, get_typestore

            self.typestore = get_typestore(Stores.LATEST)
        return self.typestore
