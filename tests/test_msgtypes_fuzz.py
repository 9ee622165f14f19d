"""Property-based tests of the .msg checker (roboscale.msgtypes with backends/ros1def):
generated files, valid and hostile, are refused with a clear error naming the file, or
loaded to the same value, and the ROS 1 text genpy would get is data."""

from __future__ import annotations

import keyword
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tests.conftest import require_module

require_module("rosbags", "the data extra")

from roboscale import msgtypes  # noqa: E402
from roboscale.backends import ros1def  # noqa: E402
from roboscale.errors import UserError  # noqa: E402

NAME = "fuzz_msgs/msg/Fuzz"
TYPES = ["bool", "int8", "uint8", "int32", "uint64", "float32", "float64", "string", "char",
         "byte", "time", "uint8[]", "float64[3]", "string<=4", "Header", "geometry_msgs/Point",
         "in t32", "int32[", "x/y/z/w", "wstring", ""]  # fmt: skip
VALID_NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,8}", fullmatch=True)
NAMES = st.one_of(
    VALID_NAMES,
    st.sampled_from(["class", "import", "None", "__import__('os')", "a b", "9x", "x\u00e9", ""]),
)
# Characters of every kind that matters: line breaks of each sort, control characters,
# quotes, backslashes, comment and constant marks, non-ASCII.
ODD = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00\x07\t\"'\\#=[]<> é"
VALUES = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["true", "false", "True", "1", "0", "nan", "0x10", "1e400", "-0"]),
    st.text(alphabet=st.sampled_from(ODD + "abc01"), max_size=12),
)


@st.composite
def lines(draw: st.DrawFn) -> tuple[str, str, str, str | None]:
    """(type, name, separator-and-value text, the constant's value or None)."""
    typ, name = draw(st.sampled_from(TYPES)), draw(NAMES)
    kind = draw(st.sampled_from(["field", "constant", "default", "comment", "raw", "typed"]))
    if kind == "typed":  # a constant of a constant type, under a valid name
        typ, name, value = (
            draw(st.sampled_from(ros1def.CONSTANT_TYPES)),
            draw(VALID_NAMES),
            draw(VALUES),
        )
        return typ, name, f"={value}", value
    if kind == "constant":
        value = draw(VALUES)
        return typ, name, f"={value}", value
    if kind == "default":
        return typ, name, f" {draw(VALUES)}", None
    if kind == "comment":
        return typ, name, f" # {draw(VALUES)}", None
    if kind == "raw":
        return draw(st.text(alphabet=st.sampled_from(ODD + "ab int32"), max_size=20)), "", "", None
    return typ, name, "", None


def load(text: str) -> tuple[Path, msgtypes.TypeSet | UserError]:
    root = Path(tempfile.mkdtemp(prefix="msgfuzz-"))
    path = root / "fuzz_msgs" / "msg" / "Fuzz.msg"
    path.parent.mkdir(parents=True)
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    try:
        return path, msgtypes.load([root])
    except UserError as e:
        return path, e
    finally:
        shutil.rmtree(root)


def same_value(typ: str, written: str, loaded: object) -> bool:
    if typ == "string":
        return loaded == written.strip().strip('"')  # rosbags drops enclosing quotes
    text = written.strip().split("#")[0].strip()
    if typ in ros1def.INT_RANGES:  # rosbags reads 0x10 as 16
        return int(text, 0 if text.lstrip("+-").startswith("0x") else 10) == loaded
    if typ in ros1def.FLOATS:  # rosbags reads 0x10 as 16.0 here too
        hexadecimal = text.lstrip("+-").startswith("0x")
        return (int(text, 0) if hexadecimal else float(text)) == loaded
    return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lines(), min_size=1, max_size=6))
def test_a_msg_file_is_refused_cleanly_or_loaded_to_the_same_value(
    drawn: list[tuple[str, str, str, str | None]],
) -> None:
    text = "".join(f"{typ} {name}{rest}\n" if name else f"{typ}\n" for typ, name, rest, _ in drawn)
    path, result = load(text)
    event("refused" if isinstance(result, UserError) else "loaded")
    if isinstance(result, UserError):
        message = str(result)
        assert str(path) in message and "Traceback" not in message
        assert "\n" not in message.split("\n  hint:")[0], message
        return
    consts, fields = result.ros1.fielddefs[NAME]
    ros1 = msgtypes.ros1_definition(result, NAME)  # proven data, or it would raise
    parsed = ros1def.parse_full_text("fuzz_msgs/Fuzz", ros1)["fuzz_msgs/Fuzz"]
    assert [(c.name, c.value) for c in parsed.constants] == [(n, v) for n, _, v in consts]
    stored = [name for name, _ in fields if name != ros1def.EMPTY_MEMBER]  # rosbags' stand-in
    assert [name for _, name in parsed.fields] == stored
    for cname, ctype, value in consts:
        assert ros1def.NAME.fullmatch(cname) and not keyword.iskeyword(cname)
        assert ros1def.constant_problem(ctype, value) is None
        written = next(v for t, n, _, v in drawn if n == cname and v is not None)
        assert same_value(ctype, written, value), (cname, written, value)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(ros1def.CONSTANT_TYPES), VALID_NAMES, VALUES)
def test_one_constant_is_refused_cleanly_or_loaded_to_the_same_value(
    typ: str, name: str, value: str
) -> None:
    path, result = load(f"int32 data\n{typ} {name}={value}\n")
    event("refused" if isinstance(result, UserError) else "loaded")
    if isinstance(result, UserError):
        assert str(path) in str(result)
        return
    ros1 = msgtypes.ros1_definition(result, NAME)
    (constant,) = ros1def.parse_full_text("fuzz_msgs/Fuzz", ros1)["fuzz_msgs/Fuzz"].constants
    assert constant.name == name and same_value(typ, value, constant.value)
    assert ros1def.constant_problem(typ, constant.value) is None
