"""The ROS 1 message text that genpy is given, proven to be data first.

genpy (what ros1 agents build message classes with) writes a definition into Python
source and imports it: a constant's name is written as it is (`<name> = <value>`), a
string constant's value between quotes, and the text is split into lines on `\\n` only.
A constant named with code, or a string value holding a line break, is code in the
agent. So before any text reaches genpy it is parsed here exactly as genpy splits it
(`genmsg.msg_loader`: the `MSG:` separator, then `\\n`, then `#` and `=`), and refused
unless every line is a field or a constant that is data:

- type, field and constant names are `[A-Za-z][A-Za-z0-9_]*` in full, never a Python
  keyword; message types are `package/Type`;
- a string constant holds printable characters only (no line break of any kind, no
  control character), and the Python line genpy writes of it (`NAME = 'value'`, quoted
  as genpy quotes it) parses as one assignment of that very string; so does the
  `_full_text = \"\"\"...\"\"\"` line genpy writes of the whole text;
- a numeric constant is a decimal literal within its type's range (floats finite), a
  boolean one `True`, `False`, `1` or `0`.

The lab (`roboscale.msgtypes`) checks every type after rosbags parses it and compares
this parse of the text it hands on with rosbags' own; ros1 agents parse it again before
genpy sees it. Stdlib only: agents run in Debian's system Python.
"""

from __future__ import annotations

import ast
import keyword
import math
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

# Every character Python's str.splitlines() breaks on, but `\n`: genpy and rosbags split on
# `\n` only, so a line holding one of these is one line to them and several to a reader.
LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
SEPARATOR = "\n" + "=" * 80 + "\n"  # genpy's, between a type and each dependency
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
TYPE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*/[A-Za-z][A-Za-z0-9_]*")
FIELD_TYPE = re.compile(r"(?:[A-Za-z][A-Za-z0-9_]*/)?[A-Za-z][A-Za-z0-9_]*(?:\[\d{0,10}\])?")
_INT = re.compile(r"[-+]?[0-9]{1,20}")
_FLOAT = re.compile(r"[-+]?(?:[0-9]{1,40}\.?[0-9]{0,40}|\.[0-9]{1,40})(?:[eE][-+]?[0-9]{1,3})?")
BOOL_VALUES = {"True": True, "False": False, "1": True, "0": False}
INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "uint8": (0, 2**8 - 1),
    "byte": (0, 2**8 - 1),
    "char": (0, 2**8 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "uint16": (0, 2**16 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint32": (0, 2**32 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint64": (0, 2**64 - 1),
}
FLOATS = ("float32", "float64")
FLOAT32_MAX = 3.4028235677973366e38  # beyond it a float32 is infinite (FLT_MAX rounds below)
CONSTANT_TYPES = (*INT_RANGES, *FLOATS, "bool", "string")
ALLOWED_NAME = "a letter, then letters, digits or _ (not a Python keyword)"
ALLOWED_STRING = (
    "printable characters, without a line break or control character, that genpy can quote "
    "(no backslash at the end)"
)

Value = int | float | bool | str


class DefinitionError(ValueError):
    """A definition that is not proven data: its type, the line (of that type's text, or
    None), the field or constant, and what is wrong and allowed."""

    def __init__(self, msgtype: str, line: int | None, field: str, what: str) -> None:
        super().__init__(
            f"{msgtype}"
            + (f" line {line}" if line else "")
            + ": "
            + (f"{field}: " if field else "")
            + what
        )
        self.msgtype = msgtype
        self.line = line
        self.field = field
        self.what = what


@dataclass(frozen=True)
class Constant:
    type: str
    name: str
    value: Value


@dataclass(frozen=True)
class Definition:
    """One type as genpy reads it: its fields (type as written, name) and constants."""

    fields: tuple[tuple[str, str], ...]
    constants: tuple[Constant, ...]


def name_problem(name: str) -> str | None:
    if not NAME.fullmatch(name):
        return f"{name!r} is not a name; allowed: {ALLOWED_NAME}"
    if keyword.iskeyword(name):  # soft ones (type, match) are names genpy may use
        return f"{name!r} is a Python keyword; allowed: {ALLOWED_NAME}"
    return None


def string_problem(value: str) -> str | None:
    bad = next((c for c in value if not c.isprintable()), None)
    if bad is not None:
        what = "a line break" if bad in LINE_BREAKS + "\n" else f"character {bad!r}"
        return f"a string constant holding {what}; allowed: {ALLOWED_STRING}"
    if _python_string(genpy_constant(value)) != value.strip():
        return f"a string constant that genpy cannot quote; allowed: {ALLOWED_STRING}"
    return None


def genpy_constant(value: str) -> str:
    """The Python literal genpy writes of a string constant (genpy.generator, 0.6)."""
    val = value.strip()
    if '"' in val and "'" in val:
        escaped = val.replace("\\", "\\\\").replace('"', '\\"')
        return '"' + escaped + '"'
    if '"' in val:
        return "r'" + val + "'"
    if "'" in val:
        return 'r"' + val + '"'
    return "'" + val + "'"


def genpy_full_text(text: str) -> str:
    """The literal genpy writes of a full text (`compute_full_text_escaped`, 0.6)."""
    escaped = text.replace('"' * 3, r"\"" * 3)
    if escaped.endswith('"') and not escaped.endswith(r"\""):
        escaped = escaped[:-1] + r"\""
    return '"' * 3 + escaped + '"' * 3


def _python_string(literal: str) -> str | None:
    """The string `X = literal` assigns, if that is one assignment of one string constant
    (parsed, never run); None otherwise."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an invalid escape: an error in future Pythons
            tree = ast.parse(f"X = {literal}\n")
    except (SyntaxError, ValueError, Warning):
        return None
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.Assign):
        return None
    value = tree.body[0].value
    return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) else None


def constant_problem(typ: str, value: object) -> str | None:
    """Whether a constant's value (as rosbags or genpy holds it) is data of its type."""
    if typ == "string":
        return string_problem(value) if isinstance(value, str) else "not a string"
    if typ == "bool":  # rosbags keeps `1` and `0` as integers
        return None if value in (True, False) else f"{value!r} is not true or false"
    if typ in INT_RANGES:
        low, high = INT_RANGES[typ]
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{value!r} is not an integer; allowed: an integer from {low} to {high}"
        if not low <= value <= high:
            return f"{value} is out of range; allowed: an integer from {low} to {high}"
        return None
    if typ in FLOATS:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return f"{value!r} is not a number; allowed: a finite decimal number"
        limit = FLOAT32_MAX if typ == "float32" else math.inf
        if not math.isfinite(value) or abs(value) >= limit:
            return f"{value!r} is out of range of {typ}; allowed: a finite number of {typ}"
        return None
    return f"{typ} constants do not exist; allowed: constants of {', '.join(CONSTANT_TYPES)}"


def parse_full_text(core_type: str, text: str) -> dict[str, Definition]:
    """Each type of a genpy full text (`core_type`'s, then each dependency after the
    separator and a `MSG: package/Type` line), split as genpy splits it; a
    DefinitionError unless every line is proven data."""
    if not TYPE_NAME.fullmatch(core_type):
        raise DefinitionError(core_type, None, "", "not a message type; allowed: package/Type")
    if _python_string(genpy_full_text(text)) != text:
        raise DefinitionError(core_type, None, "", "a text that genpy cannot quote as it is")
    parts = text.split(SEPARATOR)
    out = {core_type: parse_definition(core_type, parts[0])}
    for part in parts[1:]:
        header, _, body = part.partition("\n")
        dep = header[len("MSG: ") :]
        if not header.startswith("MSG: ") or not TYPE_NAME.fullmatch(dep):
            raise DefinitionError(
                core_type, None, "", f"{header!r} after a separator; allowed: 'MSG: package/Type'"
            )
        if dep in out:
            raise DefinitionError(dep, None, "", "defined twice in one text")
        out[dep] = parse_definition(dep, body)
    for typ, definition in out.items():  # genpy finds every type a field uses in the text
        for field_type, name in definition.fields:
            ref = _resolved(typ, field_type)
            if ref is not None and ref not in out:
                raise DefinitionError(typ, None, name, f"type {ref} is not in the text")
    return out


ROS1_BASE = frozenset((*INT_RANGES, *FLOATS, "bool", "string", "time", "duration"))


def _resolved(msgtype: str, field_type: str) -> str | None:
    """The message type a field of `msgtype` uses, as genmsg resolves it (a bare name is
    of the same package, Header is std_msgs'); None for a built-in."""
    base = field_type.split("[")[0]
    if base in ROS1_BASE:
        return None
    if base == "Header":
        return "std_msgs/Header"
    return base if "/" in base else f"{msgtype.split('/')[0]}/{base}"


def parse_definition(msgtype: str, text: str) -> Definition:
    """One type's text, line by line as genmsg reads it (`load_msg_from_string`)."""
    fields: list[tuple[str, str]] = []
    constants: list[Constant] = []
    seen: set[str] = set()
    for number, line in enumerate(text.split("\n"), 1):
        bad = next((c for c in line if not c.isprintable()), None)
        if bad is not None:
            what = "a line break" if bad in LINE_BREAKS else f"character {bad!r}"
            raise DefinitionError(
                msgtype, number, "", f"a line holding {what}; allowed: {ALLOWED_STRING}"
            )
        clean = line.split("#")[0].strip()
        if not clean:
            continue
        if "=" in clean:
            constant = _constant(msgtype, number, line, clean)
            name = constant.name
            constants.append(constant)
        else:
            typ, name = _field(msgtype, number, clean)
            fields.append((typ, name))
        if name in seen:
            raise DefinitionError(msgtype, number, name, "declared twice; each name once")
        seen.add(name)
    return Definition(tuple(fields), tuple(constants))


def _constant(msgtype: str, number: int, line: str, clean: str) -> Constant:
    words = [w for w in (x.strip() for x in clean.split(" ")) if w]
    typ = words[0]
    if typ == "string":  # genmsg: the name is what lies between the first ' ' and '='
        idx = line.find("=")
        name, text = line[line.find(" ") + 1 : idx], line[idx + 1 :].strip()
    else:
        pieces = [x.strip() for x in " ".join(words[1:]).split("=")]
        if len(pieces) != 2:
            raise DefinitionError(msgtype, number, "", f"{clean!r} is not 'TYPE NAME=value'")
        name, text = pieces
    problem = name_problem(name)
    if problem is not None:
        raise DefinitionError(msgtype, number, name, f"constant name: {problem}")
    value = _value(typ, text)
    problem = constant_problem(typ, value)
    if problem is not None:
        raise DefinitionError(msgtype, number, name, problem)
    assert isinstance(value, int | float | str)  # constant_problem proved it
    return Constant(typ, name, value)


def _value(typ: str, text: str) -> object:
    """The value genpy would take from `text`, or `text` itself when it is not a literal
    of the type (constant_problem then refuses it)."""
    if typ in INT_RANGES and _INT.fullmatch(text):
        return int(text)
    if typ in FLOATS and _FLOAT.fullmatch(text):
        return float(text)
    if typ == "bool":
        return BOOL_VALUES.get(text, text)
    return text


def _field(msgtype: str, number: int, clean: str) -> tuple[str, str]:
    words = [w for w in (x.strip() for x in clean.split(" ")) if w]
    if len(words) != 2:
        raise DefinitionError(msgtype, number, "", f"{clean!r} is not 'TYPE name'")
    typ, name = words
    if not FIELD_TYPE.fullmatch(typ):
        raise DefinitionError(
            msgtype,
            number,
            name,
            f"{typ!r} is not a type; allowed: "
            "Type, package/Type, each optionally followed by [] or [N]",
        )
    problem = name_problem(name)
    if problem is not None:
        raise DefinitionError(msgtype, number, name, f"field name: {problem}")
    return typ, name


# --- a type store's types (rosbags' fielddefs, as plain data), checked and compared -------

# rosbags' Nodetype values: a field is (kind, detail); BASE (type, string bound), NAME
# (type), ARRAY ((inner, length)), SEQUENCE ((inner, bound)).
BASE, NAMED, ARRAY, SEQUENCE = 1, 2, 3, 4
ROS1_BUILTINS = {
    "builtin_interfaces/msg/Time": "time",
    "builtin_interfaces/msg/Duration": "duration",
}
EMPTY_MEMBER = "structure_needs_at_least_one_member"  # rosbags' field of an empty type
MAX_NESTING = 64  # types inside types: ROS's deepest are under ten
MAX_FIXED_ELEMENTS = 1 << 24  # in a message's fixed arrays, all nested ones multiplied

FieldDefs = Mapping[str, tuple[Sequence[Any], Sequence[tuple[str, Any]]]]


def ros1_name(msgtype: str) -> str:
    """`package/msg/Type` -> `package/Type`, as ROS 1 text names it."""
    parts = msgtype.split("/")
    return f"{parts[0]}/{parts[-1]}"


def referenced(desc: Any) -> str | None:
    """The message type a field refers to (through arrays), or None for a built-in."""
    kind, detail = desc
    if kind == NAMED:
        return str(detail)
    if kind in (ARRAY, SEQUENCE):
        return referenced(detail[0])
    return None


def check_type(fielddefs: FieldDefs, name: str) -> None:
    """The names of a type's fields and constants, and its constants' values."""
    consts, fields = fielddefs[name]
    for cname, ctype, value in consts:
        problem = name_problem(cname)
        if problem is not None:
            raise DefinitionError(name, None, cname, f"constant name: {problem}")
        problem = constant_problem(ctype, value)
        if problem is not None:
            raise DefinitionError(name, None, cname, problem)
    for fname, _ in fields:
        problem = name_problem(fname)
        if problem is not None:
            raise DefinitionError(name, None, fname, f"field name: {problem}")


def closure(fielddefs: FieldDefs, name: str, ros1: bool = True) -> list[str]:
    """`name` and every type it uses, each once; a DefinitionError for a type that contains
    itself (directly or through others: no message of it could ever end), or that uses a
    type without a definition."""
    order: list[str] = []
    path: list[str] = []

    def visit(typ: str) -> None:
        path.append(typ)
        if len(path) > MAX_NESTING:
            raise DefinitionError(typ, None, "", f"types nested more than {MAX_NESTING} levels "
                                  f"deep; allowed: at most {MAX_NESTING}")  # fmt: skip
        for fname, desc in fielddefs[typ][1]:
            ref = referenced(desc)
            if ref is None or ref in order or (ros1 and ref in ROS1_BUILTINS):
                continue
            if ref in path:
                loop = " -> ".join([*path[path.index(ref) :], ref])
                raise DefinitionError(
                    typ,
                    None,
                    fname,
                    f"a type that contains itself ({loop});"
                    " allowed: a type without cycles (use an array of ids)",
                )
            if ref not in fielddefs:
                raise DefinitionError(typ, None, fname, f"type {ref} has no definition")
            visit(ref)
        path.pop()
        order.append(typ)

    visit(name)
    return order[::-1]


def fixed_elements(fielddefs: FieldDefs, name: str) -> int:
    """The elements of a type's fixed arrays, nested ones multiplied (variable-length
    arrays count one element); a DefinitionError above MAX_FIXED_ELEMENTS, before any
    message of it is built. Call on a type `closure` accepted (no cycle)."""

    def size(desc: Any) -> int:
        kind, detail = desc
        if kind == NAMED:
            return of_type(detail) if detail in fielddefs else 1
        if kind in (ARRAY, SEQUENCE):
            return (detail[1] if kind == ARRAY else 1) * size(detail[0])
        return 1

    def of_type(typ: str) -> int:
        total = 0
        for fname, desc in fielddefs[typ][1]:
            total += size(desc)
            if total > MAX_FIXED_ELEMENTS:
                raise DefinitionError(
                    typ,
                    None,
                    fname,
                    f"fixed arrays of more than "
                    f"{MAX_FIXED_ELEMENTS} elements; allowed: at most "
                    f"{MAX_FIXED_ELEMENTS} (use a variable-length array)",
                )
        return total

    return of_type(name)


def _token(desc: Any) -> str:
    """A field's type as ROS 1 text writes it (bounds dropped: ROS 1 has none)."""
    kind, detail = desc
    if kind == BASE:
        return str(detail[0])
    if kind == NAMED:
        return ROS1_BUILTINS.get(detail) or ros1_name(detail)
    return _token(detail[0]) + (f"[{detail[1]}]" if kind == ARRAY else "[]")


def expected(fielddefs: FieldDefs, name: str) -> dict[str, Definition]:
    """What genpy must read from `name`'s ROS 1 full text: each type of its closure."""
    out = {}
    for typ in closure(fielddefs, name):
        check_type(fielddefs, typ)
        consts, fields = fielddefs[typ]
        if [name for name, _ in fields] == [EMPTY_MEMBER]:
            fields = []  # rosbags' stand-in member of an empty type; ROS 1 text has none
        out[ros1_name(typ)] = Definition(
            tuple((_token(desc), fname) for fname, desc in fields),
            tuple(Constant(ctype, cname, value) for cname, ctype, value in consts),
        )
    return out


def check_text(fielddefs: FieldDefs, name: str, text: str) -> None:
    """That `text` (`name`'s ROS 1 full text, as genpy will read it) is proven data and
    holds exactly the types, fields and constants of `fielddefs`; a DefinitionError
    naming the first difference otherwise."""
    want = expected(fielddefs, name)
    got = parse_full_text(ros1_name(name), text)
    for typ in sorted(set(want) | set(got)):
        if typ not in got or typ not in want:
            where = "missing from" if typ not in got else "not a type of"
            raise DefinitionError(typ, None, "", f"{where} the definition's ROS 1 text")
        mine, theirs = want[typ], got[typ]
        pairs: list[tuple[str, object, object]] = [
            (n, (t, n), g) for (t, n), g in zip(mine.fields, theirs.fields, strict=False)
        ]
        pairs += [(c.name, c, g) for c, g in zip(mine.constants, theirs.constants, strict=False)]
        for field, a, b in pairs:
            if a != b:
                raise DefinitionError(
                    typ,
                    None,
                    field,
                    f"its ROS 1 text reads {b!r} where the definition has {a!r}; refused",
                )
        if mine != theirs:
            raise DefinitionError(
                typ,
                None,
                "",
                "its ROS 1 text holds other fields or constants than the definition; refused",
            )
