"""ROS 2 message types for Cyclone DDS, defined in Python, and the octet-sequence fast path.

The types mirror ROS 2's own (builtin_interfaces/Time, std_msgs/Header and String,
sensor_msgs/LaserScan and Image) with the type names rmw_cyclonedds gives them
(`<pkg>::msg::dds_::<Type>_`), so their CDR is the real messages' CDR. A trial's
message is the thesis's stamped message in ROS 2 form: `int32 id`,
`builtin_interfaces/Time t`, then the real message (`roboscale_msgs/msg/Stamped*`,
see STAMPED_DEFINITIONS); its payload part needs no more than 4-byte alignment, so
it starts on a 4-byte boundary and reads alone as the real message's CDR.

cyclonedds 11.0.1 packs a `sequence<uint8>` one element at a time through a Python
list (about 4.7 ms for 64 KiB). `fast_octets` swaps the machine of every such
member for one that writes the length and the bytes in one copy and reads them
back as `bytes`; the declared type (and so the type information sent on
discovery) stays `sequence<uint8>`. Imported only in the venv (the dds extra).
"""

# No `from __future__ import annotations`: cyclonedds resolves the member annotations.
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from cyclonedds.idl import IdlStruct, make_idl_struct
from cyclonedds.idl import types as idl
from cyclonedds.idl._machinery import (
    KeyEnabled,
    PlainCdrV2SequenceOfPrimitiveMachine,
    StructMachine,
)
from cyclonedds.idl._support import DeserializeKind, SerializeKind
from cyclonedds.idl.types import float32, int32, sequence, uint8, uint32

from roboscale.backends.base import MessageKind, TypedPayload
from roboscale.backends.payload import TEXT, body

# `sequence[T]` spelled as what it is at run time, so that mypy sees the member's type.
Octets = Annotated[Sequence[int], sequence(uint8)]
Floats = Annotated[Sequence[float], sequence(float32)]

LASER_FIXED_BYTES = 60  # header (frame "laser"), 7 floats, 2 sequence lengths: as in ros1


class OctetSequenceMachine(PlainCdrV2SequenceOfPrimitiveMachine):
    """`sequence<uint8>` as one length and one block of bytes (CDR: uint32 count, octets).

    A subclass, so that the library's type-property scans treat it as the machine it
    replaces; the attributes are that machine's for uint8."""

    def __init__(self, max_length: int | None = None) -> None:
        self.code, self.alignment, self.size, self.max_length = "B", 1, 1, max_length

    def serialize(
        self,
        buffer: Any,
        value: bytes | bytearray | memoryview,
        serialize_kind: Any = SerializeKind.DataSample,
        key_enabled: Any = KeyEnabled.InKeylist,
    ) -> None:
        if self.max_length is not None and len(value) > self.max_length:
            raise ValueError(f"{len(value)} octets exceed the bound {self.max_length}")
        buffer.align(4)
        buffer.write("I", 4, len(value))
        buffer.write_bytes(value)

    def deserialize(
        self,
        buffer: Any,
        deserialize_kind: Any = DeserializeKind.DataSample,
        key_enabled: Any = KeyEnabled.InKeylist,
    ) -> bytes:
        buffer.align(4)
        length = buffer.read("I", 4)
        data: bytes = buffer.read_bytes(length)
        return data

    def default_initialize(self) -> bytes:
        return b""


def _is_octet_sequence(machine: Any) -> bool:
    return type(machine) is PlainCdrV2SequenceOfPrimitiveMachine and machine.code == "B"


def fast_octets(cls: type[IdlStruct]) -> type[IdlStruct]:
    """Give the type's `sequence<uint8>` members the one-copy machine (XCDR1 and 2)."""
    idl: Any = cls.__idl__
    idl.populate()
    for machine in (idl.v1_machine, idl.v2_machine):
        if not isinstance(machine, StructMachine):
            continue
        for member, sub in machine.members_machines.items():
            if _is_octet_sequence(sub):
                machine.members_machines[member] = OctetSequenceMachine(sub.max_length)
    return cls


@dataclass
class Time(IdlStruct, typename="builtin_interfaces::msg::dds_::Time_"):
    sec: int32
    nanosec: uint32


@dataclass
class Header(IdlStruct, typename="std_msgs::msg::dds_::Header_"):
    stamp: Time
    frame_id: str


@dataclass
class String(IdlStruct, typename="std_msgs::msg::dds_::String_"):
    data: str


@dataclass
class LaserScan(IdlStruct, typename="sensor_msgs::msg::dds_::LaserScan_"):
    header: Header
    angle_min: float32
    angle_max: float32
    angle_increment: float32
    time_increment: float32
    scan_time: float32
    range_min: float32
    range_max: float32
    ranges: Floats
    intensities: Floats


@dataclass
class Image(IdlStruct, typename="sensor_msgs::msg::dds_::Image_"):
    header: Header
    height: uint32
    width: uint32
    encoding: str
    is_bigendian: uint8
    step: uint32
    data: Octets


@dataclass
class StampedString(IdlStruct, typename="roboscale_msgs::msg::dds_::StampedString_"):
    id: int32
    t: Time
    message: String


@dataclass
class StampedLaserScan(IdlStruct, typename="roboscale_msgs::msg::dds_::StampedLaserScan_"):
    id: int32
    t: Time
    scan: LaserScan


@dataclass
class StampedImage(IdlStruct, typename="roboscale_msgs::msg::dds_::StampedImage_"):
    id: int32
    t: Time
    image: Image


@dataclass
class StampedBytes(IdlStruct, typename="roboscale_msgs::msg::dds_::StampedBytes_"):
    id: int32
    t: Time
    data: Octets


@dataclass
class LibraryStampedBytes(IdlStruct, typename="roboscale_msgs::msg::dds_::StampedBytes_"):
    """StampedBytes left to the library's own machinery (one element at a time): the
    reference the fast path is tested and measured against, never sent."""

    id: int32
    t: Time
    data: Octets


for _type in (Image, StampedBytes):
    fast_octets(_type)

STAMPED: dict[str, type[IdlStruct]] = {
    "text": StampedString,
    "laserscan": StampedLaserScan,
    "image": StampedImage,
    "bytes": StampedBytes,
}

# The ROS 2 .msg definitions of the stamped types: a ROS 2 node builds these
# (package roboscale_msgs) to subscribe; rosbags' type store reads them too.
STAMPED_DEFINITIONS = {
    "roboscale_msgs/msg/StampedString": "int32 id\nbuiltin_interfaces/Time t\n"
    "std_msgs/String message\n",
    "roboscale_msgs/msg/StampedLaserScan": "int32 id\nbuiltin_interfaces/Time t\n"
    "sensor_msgs/LaserScan scan\n",
    "roboscale_msgs/msg/StampedImage": "int32 id\nbuiltin_interfaces/Time t\n"
    "sensor_msgs/Image image\n",
    "roboscale_msgs/msg/StampedBytes": "int32 id\nbuiltin_interfaces/Time t\nuint8[] data\n",
}


def type_of(kind: MessageKind) -> type[IdlStruct]:
    """The stamped type of a message kind; any sized payload is `bytes`."""
    if kind.typed is not None:
        return typed_stamped(kind.typed)
    return STAMPED.get(kind.kind, StampedBytes)


# Types of the user's (.msg files, TypedPayload.ros2_fields), built once per process as
# rmw_cyclonedds names them; the hand-written ROS 2 types above are reused.
_BUILT: dict[str, Any] = {
    "builtin_interfaces/msg/Time": Time,
    "std_msgs/msg/Header": Header,
    "std_msgs/msg/String": String,
    "sensor_msgs/msg/LaserScan": LaserScan,
    "sensor_msgs/msg/Image": Image,
}
_INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64")
_BASE = {"bool": bool, "byte": uint8, "char": uint8, "string": str, "float32": float32,
         "float64": idl.float64, **{n: getattr(idl, n) for n in _INTS}}  # fmt: skip
_BASE_KIND, _NAME_KIND, _ARRAY_KIND = 1, 2, 3  # rosbags' Nodetype (4: SEQUENCE)


def _dds_name(ros_name: str) -> str:
    package, _, typ = ros_name.split("/")
    return f"{package}::msg::dds_::{typ}_"


def _member(desc: list[Any], fields: dict[str, Any]) -> Any:
    """The cyclonedds annotation of one field (rosbags' [nodetype, detail])."""
    kind, detail = desc
    if kind == _BASE_KIND:
        typ, bound = detail
        return idl.bounded_str(bound) if typ == "string" and bound else _BASE[typ]
    if kind == _NAME_KIND:
        return _struct(detail, fields)
    inner, length = detail
    if kind == _ARRAY_KIND:
        return idl.array(_member(inner, fields), length)
    return idl.sequence(_member(inner, fields), length or None)


def _struct(name: str, fields: dict[str, Any]) -> Any:
    if name not in _BUILT:
        members = {f: _member(d, fields) for f, d in fields[name]}
        _BUILT[name] = make_idl_struct(name.split("/")[-1], _dds_name(name), members)
    return _BUILT[name]


def typed_stamped(typed: TypedPayload) -> type[IdlStruct]:
    """`roboscale_msgs/msg/Stamped<Type>`: `int32 id`, `builtin_interfaces/Time t`, then
    the user's type as `msg`, declared as rmw_cyclonedds declares ROS 2 types. A type
    with 8-byte fields gets `uint32 align8` before `msg`, so that `msg` starts 8-aligned
    (byte 16 of the CDR's body, as in a message of its own): its CDR is then the real
    message's CDR as it is, which is what lets a replayed message be sent as recorded."""
    import json

    name = f"roboscale_msgs/msg/Stamped{typed.type_name}"
    if name not in _BUILT:
        fields = json.loads(typed.ros2_fields)
        inner = _struct(typed.msgtype, fields)
        pad = {"align8": uint32} if _aligns_to_8(typed.msgtype, fields) else {}
        members = {"id": int32, "t": Time, **pad, "msg": inner}
        _BUILT[name] = make_idl_struct(f"Stamped{typed.type_name}", _dds_name(name), members)
    built: type[IdlStruct] = _BUILT[name]
    return built


_WIDE = ("float64", "int64", "uint64")


def _aligns_to_8(name: str, fields: dict[str, Any]) -> bool:
    """Whether a type holds an 8-byte number (XCDR1 aligns it to 8), at any depth."""

    def wide(desc: list[Any]) -> bool:
        kind, detail = desc
        if kind == _BASE_KIND:
            return bool(detail[0] in _WIDE)
        if kind == _NAME_KIND:
            return _aligns_to_8(detail, fields)
        return wide(detail[0])

    return any(wide(d) for _, d in fields.get(name, ()))


def payload_offset(kind: MessageKind) -> int:
    """Where a stamped message's payload part starts in its CDR (after the 4-byte
    encapsulation header, the id and the stamp, and `align8` when there is one)."""
    stamped = type_of(kind)
    return 16 + 4 * ("align8" in stamped.__annotations__)


def stamp_time(stamp_ns: int) -> Time:
    return Time(sec=stamp_ns // 1_000_000_000, nanosec=stamp_ns % 1_000_000_000)


def build_message(kind: MessageKind, seq: int = 0, stamp_ns: int = 0) -> IdlStruct:
    """A stamped message whose payload part serializes to about `kind.size` bytes."""
    t = stamp_time(stamp_ns)
    if kind.typed is not None:
        stamped: Any = typed_stamped(kind.typed)
        inner = stamped.__annotations__["msg"].deserialize(kind.typed.sample("cdr"))
        pad = {"align8": 0} if "align8" in stamped.__annotations__ else {}
        return stamped(id=seq, t=t, **pad, msg=inner)  # type: ignore[no-any-return]
    if kind.kind == "text":
        return StampedString(id=seq, t=t, message=String(data=TEXT.decode()))
    if kind.kind == "laserscan":
        scan = LaserScan(
            header=Header(stamp=t, frame_id="laser"),
            angle_min=-2.35,
            angle_max=2.35,
            angle_increment=0.0,
            time_increment=0.0,
            scan_time=0.0,
            range_min=0.0,
            range_max=30.0,
            ranges=[1.5] * max(0, (kind.size - LASER_FIXED_BYTES) // 4),
            intensities=[],
        )
        return StampedLaserScan(id=seq, t=t, scan=scan)
    if kind.kind == "image":
        image = Image(
            header=Header(stamp=t, frame_id="camera"),
            height=480,
            width=640,
            encoding="mono8",
            is_bigendian=0,
            step=640,
            data=body(kind.size, "bytes"),
        )
        return StampedImage(id=seq, t=t, image=image)
    return StampedBytes(id=seq, t=t, data=body(kind.size, "bytes"))
