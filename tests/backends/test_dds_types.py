"""The dds backend's message types: the octet fast path writes what the library writes,
and the CDR is ROS 2's (rosbags' ROS 2 type store reads it and writes the same bytes)."""

# No `from __future__ import annotations`: cyclonedds resolves the member annotations.

import threading
import time
from dataclasses import dataclass
from typing import Any

import pytest
from tests.conftest import require_module

require_module("cyclonedds", "the dds extra")
require_module("rosbags", "the data extra")

from cyclonedds.idl import IdlStruct  # noqa: E402
from cyclonedds.idl.types import sequence, uint8, uint32  # noqa: E402
from rosbags.typesys import Stores, get_types_from_msg, get_typestore  # noqa: E402

from roboscale.backends import dds as backend  # noqa: E402
from roboscale.backends.base import MessageKind, NodeContext  # noqa: E402
from roboscale.backends.dds_cdr import Sample  # noqa: E402
from roboscale.backends.dds_types import (  # noqa: E402
    STAMPED_DEFINITIONS,
    Header,
    Image,
    LibraryStampedBytes,
    OctetSequenceMachine,
    StampedBytes,
    Time,
    build_message,
)

SIZES = [0, 1, 7, 255, 65536]


@dataclass
class LibraryImage(IdlStruct, typename="sensor_msgs::msg::dds_::Image_"):
    header: Header
    height: uint32
    width: uint32
    encoding: str
    is_bigendian: uint8
    step: uint32
    data: sequence[uint8]  # type: ignore[type-arg]


def payload(size: int) -> bytes:
    return bytes((i * 37 + 11) & 0xFF for i in range(size))


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("version2", [False, True])
def test_octets_serialize_as_the_library_does(size: int, version2: bool) -> None:
    data = payload(size)
    t = Time(sec=12, nanosec=34)
    fast = StampedBytes(id=-5, t=t, data=data).serialize(use_version_2=version2)
    library = LibraryStampedBytes(id=-5, t=t, data=list(data)).serialize(use_version_2=version2)
    assert fast == library
    back = StampedBytes.deserialize(fast)
    assert back.data == data and isinstance(back.data, bytes)


@pytest.mark.parametrize("size", SIZES)
def test_octets_after_a_string_keep_their_alignment(size: int) -> None:
    """An odd-length string before the sequence: the length must be aligned first."""
    fields: dict[str, Any] = {
        "header": Header(stamp=Time(sec=1, nanosec=2), frame_id="cam"),
        "height": 1,
        "width": size,
        "encoding": "mono8",
        "is_bigendian": 0,
        "step": size,
    }
    fast = Image(**fields, data=payload(size)).serialize()
    assert fast == LibraryImage(**fields, data=list(payload(size))).serialize()


def test_the_declared_type_stays_an_octet_sequence() -> None:
    machine = StampedBytes.__idl__.v1_machine.members_machines["data"]
    assert isinstance(machine, OctetSequenceMachine)
    # The type information sent on discovery is that of the library's own type.
    ours = StampedBytes.__idl__.get_type_info()  # type: ignore[no-untyped-call]
    library = LibraryStampedBytes.__idl__.get_type_info()  # type: ignore[no-untyped-call]
    assert ours.serialize() == library.serialize()


def test_a_bound_is_enforced() -> None:
    from cyclonedds.idl._support import Buffer

    with pytest.raises(ValueError, match="exceed the bound"):
        OctetSequenceMachine(max_length=3).serialize(Buffer(), b"abcd")


def ros2_store() -> Any:
    store = get_typestore(Stores.ROS2_HUMBLE)
    for name, text in STAMPED_DEFINITIONS.items():
        store.register(get_types_from_msg(text, name))
    return store


@pytest.mark.parametrize(
    ("kind", "ros_type"),
    [
        ("text", "roboscale_msgs/msg/StampedString"),
        ("laserscan", "roboscale_msgs/msg/StampedLaserScan"),
        ("image", "roboscale_msgs/msg/StampedImage"),
        ("bytes", "roboscale_msgs/msg/StampedBytes"),
    ],
)
def test_rosbags_writes_the_same_cdr(kind: str, ros_type: str) -> None:
    store = ros2_store()
    raw = build_message(MessageKind(kind, 4250), seq=9, stamp_ns=3_000_000_007).serialize()
    msg = store.deserialize_cdr(raw, ros_type)
    assert (msg.id, msg.t.sec, msg.t.nanosec) == (9, 3, 7)
    assert store.serialize_cdr(msg, ros_type) == raw


@pytest.mark.dds
def test_an_agent_publishes_a_ros2_laserscan(dds: None) -> None:
    """What a publisher session puts on the wire, taken raw from a DDS reader, decodes with
    rosbags' ROS 2 deserializer; its payload part alone is a sensor_msgs/LaserScan."""
    lease = backend.lease_domain()
    xml = backend.cyclone_xml(lease.domain, "lo", ["127.0.0.1"], 4)
    cfg = {"domain": lease.domain, "xml": xml, "qos": {}}
    session = backend.BACKEND.open(NodeContext("scan_node", "local", cfg))
    kind = MessageKind("laserscan", 4250)
    got: list[tuple[int, bytes]] = []
    samples: list[Sample] = []
    arrived = threading.Event()

    def keep(seq: int, msg: object) -> None:
        assert isinstance(msg, Sample)  # Cyclone's serialized data, read in place
        got.append((seq, bytes(msg)))
        samples.append(msg)
        arrived.set()

    try:
        session.subscribe("/scan", kind, keep, 0)
        pub = session.publisher("/scan", kind, 10)
        deadline = time.monotonic() + 20
        while not arrived.wait(0.05) and time.monotonic() < deadline:
            pub.send(41, 5_000_000_250)
        type_name = session._topics["rt/scan"].typename
    finally:
        session.close()
        lease.release()
    assert got, "no sample came back within 20 s"
    with pytest.raises(ValueError, match="only during its callback"):
        bytes(samples[0])  # released when the callback returned: never a dangling read
    seq, raw = got[0]
    assert seq == 41
    store = ros2_store()
    msg = store.deserialize_cdr(raw, "roboscale_msgs/msg/StampedLaserScan")
    assert (msg.id, msg.t.sec, msg.t.nanosec) == (41, 5, 250)
    scan = store.deserialize_cdr(raw[:4] + raw[16:], "sensor_msgs/msg/LaserScan")
    assert scan.header.frame_id == "laser"
    assert len(scan.ranges) == (4250 - 60) // 4 and set(scan.ranges.tolist()) == {1.5}
    assert scan.range_max == pytest.approx(30.0) and len(scan.intensities) == 0
    assert backend.ros2_topic("/scan") == "rt/scan"
    assert type_name == "roboscale_msgs::msg::dds_::StampedLaserScan_"


def test_types_of_msg_files_are_declared_as_ros2_and_write_its_cdr() -> None:
    """A type of the user's (examples/msgs), built from its ROS 2 field definitions, reads
    rosbags' CDR sample and writes the same bytes; the stamped wrapper is what rosbags
    reads as roboscale_msgs/msg/Stamped<Type>, with the id and stamp in place."""
    from pathlib import Path

    from roboscale import msgtypes
    from roboscale.backends.dds_types import build_message, payload_offset, typed_stamped

    types = msgtypes.load([Path(__file__).parents[2] / "examples" / "msgs"])
    for name in types.files:
        typed = msgtypes.typed_payload(types, name, 0)
        stamped = typed_stamped(typed)
        assert stamped.__idl_typename__ == f"roboscale_msgs::msg::dds_::Stamped{typed.type_name}_"
        inner = stamped.__annotations__["msg"]
        assert inner.deserialize(typed.sample("cdr")).serialize() == typed.sample("cdr")
        kind = MessageKind("custom", 0, typed)
        cdr = build_message(kind, 7, 3_000_000_005).serialize()
        # the payload part (8-aligned after `align8` when the type has 8-byte fields) is
        # the type's own CDR, byte for byte
        sample = typed.sample("cdr")[4:]
        assert cdr[payload_offset(kind) :][: len(sample)] == sample
        wrapper = f"roboscale_msgs/msg/Stamped{typed.type_name}"
        pad = "uint32 align8\n" if "align8" in stamped.__annotations__ else ""
        definition = (
            f"int32 id\nbuiltin_interfaces/Time t\n{pad}{typed.package}/{typed.type_name} msg\n"
        )
        types.ros2.register(get_types_from_msg(definition, wrapper))
        msg: Any = types.ros2.deserialize_cdr(cdr, wrapper)
        assert (msg.id, msg.t.sec, msg.t.nanosec) == (7, 3, 5)
        assert bytes(types.ros2.serialize_cdr(msg, wrapper)) == cdr
