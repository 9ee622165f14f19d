"""The user's own message types: .msg files loaded through rosbags' stores, checked line by
line, and the typed payloads (ROS 1 definition, samples) built from them."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest
from tests.conftest import REPO, require_module

require_module("rosbags", "the data extra")

from roboscale import msgtypes  # noqa: E402
from roboscale.errors import SpecError, UserError  # noqa: E402

EXAMPLES = REPO / "examples" / "msgs"
WHEEL = "robot_msgs/msg/WheelState"
ODOM = "legacy_msgs/msg/Odometry2D"


@pytest.fixture(scope="module")
def types() -> msgtypes.TypeSet:
    return msgtypes.load([EXAMPLES])


def write(root: Path, name: str, text: str) -> Path:
    """`name` is package/Type: the file goes to root/package/msg/Type.msg."""
    package, typ = name.split("/")
    path = root / package / "msg" / f"{typ}.msg"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_both_syntaxes_load_from_folders(types: msgtypes.TypeSet) -> None:
    assert sorted(types.files) == [ODOM, "robot_msgs/msg/WheelSample", WHEEL]
    fields = dict(types.ros2.fielddefs[ODOM][1])
    # ROS 1 spelling: Header, time and duration are the standard types.
    assert fields["header"][1] == "std_msgs/msg/Header"
    assert fields["measured_at"][1] == "builtin_interfaces/msg/Time"
    assert fields["period"][1] == "builtin_interfaces/msg/Duration"
    # ROS 2 syntax: a type of the same package, bounded string, default values.
    wheel = dict(types.ros2.fielddefs[WHEEL][1])
    assert wheel["samples"][1][0][1] == "robot_msgs/msg/WheelSample"
    assert wheel["controller"][1] == ("string", 32)


def test_one_file_loads_with_its_package_from_the_path(tmp_path: Path) -> None:
    path = write(tmp_path, "arm_msgs/Joint", "float64 angle\n")
    assert sorted(msgtypes.load([path]).files) == ["arm_msgs/msg/Joint"]


ALLOWED = "allowed: a field 'TYPE name'"
BAD_FILES = [
    ("float64 x\nfloat6 4 y\n", 2, "4: '4' is not a field name"),
    ("uint8[ data\n", 1, "data: 'uint8[' is not a type; " + ALLOWED),
    ("int32 speed fast\n", 1, "speed: default value 'fast' does not fit int32; " + ALLOWED),
    ("float64\n", 1, "'float64' has a type but no field name"),
    ("int32 LIMIT=high\n", 1, "LIMIT: constant value 'high' does not fit int32"),
    ("bool ok maybe\n", 1, "ok: default value 'maybe' does not fit bool"),
    ("wstring label\n", 1, "label: wstring has no ROS 1 equivalent"),
    ("int32 x\nfloat64 x\n", 2, "x: declared twice (first on line 1)"),
    # Refused by rosbags' parser after the line checks: placed on its line all the same.
    ("int32 x\nstring s 'a' 'b'\n", 2, "s: does not parse at \"string s 'a' 'b'\"; " + ALLOWED),
    ("string S=\n", 1, "S: does not parse at 'string S='"),
    ("string PATH=C:\\\n", 1, "PATH: a string constant ending in a backslash, which genpy "
     "(ros1) cannot build; " + ALLOWED),
    ("# a comment\nmy_msgs/Missing thing\n", 2, "thing: unknown type 'my_msgs/msg/Missing'"),
    ("geometry_msgs/Twits cmd\n", 1, "cmd: unknown type 'geometry_msgs/msg/Twits'; did you "
     "mean 'geometry_msgs/msg/Twist'?"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "line", "expected"), BAD_FILES)
def test_a_bad_file_is_named_with_its_line_and_field(
    tmp_path: Path, text: str, line: int, expected: str
) -> None:
    path = write(tmp_path, "robot_msgs/Bad", text)
    with pytest.raises(SpecError) as e:
        msgtypes.load([tmp_path])
    assert str(e.value).startswith(f"{path}:{line}: {expected}")


def test_layout_duplicates_and_missing_files(tmp_path: Path) -> None:
    loose = tmp_path / "Loose.msg"
    loose.write_text("int32 x\n")
    layout = "cannot tell the message type from its path; allowed: a file at <package>/msg/"
    with pytest.raises(SpecError, match=re.escape(layout)):
        msgtypes.load([loose])
    with pytest.raises(SpecError, match=re.escape("no such .msg file or folder")):
        msgtypes.load([tmp_path / "none"])
    write(tmp_path / "a", "pkg/T", "int32 x\n")
    second = write(tmp_path / "b", "pkg/T", "int32 x\n")
    with pytest.raises(SpecError) as e:
        msgtypes.load([tmp_path / "a", tmp_path / "b"])
    assert str(e.value).startswith(f"{second}: type pkg/msg/T is also defined by")


def test_a_file_that_redefines_a_standard_type_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "std_msgs/Header", "int64 stamp\n")
    with pytest.raises(SpecError) as e:
        msgtypes.load([tmp_path])
    assert str(e.value).startswith(f"{path}: Type 'std_msgs/msg/Header' is already present")


def test_a_payload_naming_no_loaded_type_gets_the_nearest(types: msgtypes.TypeSet) -> None:
    assert msgtypes.resolve(types, "robot_msgs/WheelState") == WHEEL
    with pytest.raises(UserError) as e:
        msgtypes.resolve(types, "robot_msgs/WheelStat")
    assert str(e.value) == (
        "no loaded .msg file defines 'robot_msgs/WheelStat'; did you mean "
        f"'{WHEEL}'? loaded types: {ODOM}, robot_msgs/msg/WheelSample, {WHEEL}"
    )


@pytest.mark.parametrize("name", [WHEEL, ODOM, "robot_msgs/msg/WheelSample"])
def test_samples_are_rosbags_own_serializations(types: msgtypes.TypeSet, name: str) -> None:
    typed = msgtypes.typed_payload(types, name)
    ros1, cdr = typed.sample("ros1"), typed.sample("cdr")
    decoded1 = types.ros1.deserialize_ros1(ros1, name)
    decoded2 = types.ros2.deserialize_cdr(cdr, name)
    assert bytes(types.ros1.serialize_ros1(decoded1, name)) == ros1
    assert bytes(types.ros2.serialize_cdr(decoded2, name)) == cdr
    assert ros1.count(0) < len(ros1) * 0.6  # content, not zeros
    assert typed.ros1_definition.startswith(types.ros1.generate_msgdef(name, 1)[0][:20])


def test_variable_arrays_fill_the_asked_size(types: msgtypes.TypeSet) -> None:
    default = msgtypes.typed_payload(types, WHEEL)
    wheel = types.ros2.deserialize_cdr(default.sample("cdr"), WHEEL)
    assert len(wheel.samples) == len(wheel.motor_currents) == msgtypes.SEQUENCE_DEFAULT
    assert len(set(wheel.motor_currents.tolist())) > 1
    for size in (4096, 65536, 1 << 20):
        cdr = msgtypes.typed_payload(types, WHEEL, size).sample("cdr")
        assert size - 64 <= len(cdr) <= size  # one sample element and one float short at most


def test_sizes_a_type_cannot_have(types: msgtypes.TypeSet, tmp_path: Path) -> None:
    with pytest.raises(UserError, match="robot_msgs/msg/WheelSample has a fixed size of 29 B"):
        msgtypes.typed_payload(types, "robot_msgs/msg/WheelSample", 4096)
    with pytest.raises(UserError, match=f"{WHEEL} is at least .* B; allowed: a size from"):
        msgtypes.typed_payload(types, WHEEL, 16)
    write(tmp_path, "pkg/Small", "uint8[<=8] data\n")
    small = msgtypes.load([tmp_path])
    with pytest.raises(
        UserError, match=r"pkg/msg/Small is at most 16 B \(its arrays are bounded\)"
    ):
        msgtypes.typed_payload(small, "pkg/msg/Small", 4096)


def test_message_kind_carries_the_type(types: msgtypes.TypeSet) -> None:
    kind = msgtypes.message_kind((str(EXAMPLES),), f"{WHEEL}@4KB")
    assert kind.kind == "custom" and kind.typed is not None
    assert kind.size == len(kind.typed.sample("cdr"))
    assert kind.typed.msgtype == WHEEL


@pytest.mark.ros1
def test_genpy_builds_the_same_type_from_the_definition(
    types: msgtypes.TypeSet, ros1: None
) -> None:
    """The wrapper's inner class has the md5sum rosbags gives the type (what a ROS 1 node
    built from the same .msg has), and reads the ROS 1 sample back to the same bytes."""
    from roboscale.lab.nodes import package_path

    typed = msgtypes.typed_payload(types, ODOM, 1000)
    code = (
        "import io, json, sys; sys.path.insert(0, sys.argv[1])\n"
        "from roboscale.backends.base import MessageKind, TypedPayload\n"
        "from roboscale.backends.ros1 import build_message\n"
        "msg = build_message(MessageKind('custom', 0, TypedPayload(**json.loads(sys.argv[2]))))\n"
        "out = io.BytesIO(); msg.msg.serialize(out)\n"
        "print(type(msg.msg)._md5sum, type(msg)._type, out.getvalue().hex())"
    )
    argv = ["/usr/bin/python3", "-c", code, str(package_path()), json.dumps(asdict(typed))]
    res = subprocess.run(argv, capture_output=True, text=True, check=True)
    md5, wrapper, hexed = res.stdout.split()
    assert md5 == types.ros1.generate_msgdef(ODOM, ros_version=1)[1]
    assert wrapper == "roboscale_msgs/StampedOdometry2D"
    assert bytes.fromhex(hexed) == typed.sample("ros1")


@pytest.mark.ros1
def test_constants_that_look_like_code_stay_strings_in_genpy(tmp_path: Path, ros1: None) -> None:
    """genpy writes a definition into Python source and runs it: constants that try to
    leave their string literal (quotes of both kinds, an escaped triple quote) are loaded,
    become the wrapper's type on ros1, and run nothing."""
    from roboscale.lab.nodes import package_path

    marker = tmp_path / "ran"
    text = (
        f"string A=x'\"; __import__('os').system('touch {marker}a')\n"
        f'string B=\\"""; __import__("os").system("touch {marker}b")\n'
        "int32 data\n"
    )
    write(tmp_path / "msgs", "evil_msgs/Evil", text)
    kind = msgtypes.message_kind((str(tmp_path / "msgs"),), "evil_msgs/msg/Evil")
    assert kind.typed is not None
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1])\n"
        "from roboscale.backends.base import MessageKind, TypedPayload\n"
        "from roboscale.backends.ros1 import build_message\n"
        "msg = build_message(MessageKind('custom', 0, TypedPayload(**json.loads(sys.argv[2]))))\n"
        "print(type(msg)._type, type(msg.msg).A, type(msg.msg).B)"
    )
    argv = ["/usr/bin/python3", "-c", code, str(package_path()), json.dumps(asdict(kind.typed))]
    res = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert res.stdout.startswith("roboscale_msgs/StampedEvil x'\"; __import__")
    assert not list(tmp_path.glob("ran*"))
