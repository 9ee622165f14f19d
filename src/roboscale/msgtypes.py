"""The user's own message types: `.msg` files loaded through rosbags' type store.

A spec (or a graph file) lists `.msg` files or folders in `message_types:`; each file
sits at `<package>/msg/<Type>.msg`, which names its type `<package>/msg/<Type>`. ROS 1
and ROS 2 syntax both load (`Header`, `time`, `duration`, bounded arrays, default
values). A file is a regular file of at most MAX_MSG_BYTES, read without blocking; its
lines are split on `\n` only (as rosbags and genpy split them: any other line break is
an error on its line). Every line is checked first, so that a problem is reported as
file:line: field: what is wrong and what is allowed; then rosbags parses it (its own
refusals are placed on their line too), and every referenced type must be a loaded
file's or one of rosbags' ROS 1 (Noetic) and ROS 2 (Humble) stores.

Nothing of a file becomes code (`backends/ros1def.py`): every parsed type's names and
constants are checked, no type contains itself, fixed arrays are bounded, and the ROS 1
text handed to genpy in ros1 agents is parsed again as genpy splits it and must hold the
same types, fields and constants as rosbags parsed.

A payload naming a loaded type becomes a `TypedPayload` (backends/base.py) carried in
the agent configuration: the ROS 1 full definition (what genpy generates the class
from), its md5sum, and one sample message filled deterministically with content,
serialized for ROS 1 and as CDR (`msgsamples.py`). Lab side only (rosbags lives here,
never in agents).
"""

from __future__ import annotations

import base64
import difflib
import functools
import json
import keyword
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from roboscale.backends import ros1def
from roboscale.backends.base import MessageKind, TypedPayload
from roboscale.errors import SpecError, UserError
from roboscale.msgsamples import Filler, cdr_sample, sequence_count
from roboscale.yamlfile import read_text

if TYPE_CHECKING:
    from rosbags.interfaces.typing import FieldDesc, Typesdict
    from rosbags.typesys.store import Typestore

MAX_FILES = 1000
MAX_MSG_BYTES = 256 * 1024  # the biggest .msg of ROS's own packages is a few KB
MAX_TOTAL_BYTES = 4 * 1024 * 1024  # all files together: seconds of parsing, not hours
MAX_SCANNED = 20_000  # folder entries looked at when a folder is searched for .msg files
INSTALL_HINT = "pip install 'roboscale[data]' (rosbags and mcap)"
BASE_TYPES = (
    "bool", "byte", "char", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
    "uint64", "float32", "float64", "string", "time", "duration",
)  # fmt: skip
NUMBERS = frozenset(BASE_TYPES) - {"bool", "string", "time", "duration"}
ROS2_ONLY = ("wstring",)
ALLOWED_LINE = (
    "a field 'TYPE name' (ROS 2 may add a default value), a constant 'TYPE NAME=value', a "
    "comment after '#'; TYPE is a built-in type (" + ", ".join(BASE_TYPES) + "), 'string<=N', "
    "or a message type (Type, package/Type, package/msg/Type), each optionally followed by "
    "[] (any length), [N] (fixed) or [<=N] (bounded)"
)
ALLOWED_LAYOUT = "a file at <package>/msg/<Type>.msg, or a folder holding such files"
_TYPE = re.compile(
    r"^(?P<base>[A-Za-z][A-Za-z0-9_]*(?:/[A-Za-z][A-Za-z0-9_]*){0,2}|string<=\d+)"
    r"(?P<array>\[(?:\d+|<=\d+)?\])?$"
)
_NAME = ros1def.NAME
_PACKAGE = re.compile(r"^[a-z][a-z0-9_]*$")
_MSGNAME = re.compile(r"^[A-Z][A-Za-z0-9_]*$")
_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|0x[0-9a-fA-F]+)$")
_BOOL = frozenset({"true", "false", "True", "False", "0", "1"})
SEQUENCE_DEFAULT = 16  # elements of each variable-length array when no size is asked


# A type of the user's (.msg files, roboscale/msgtypes.py): package/msg/Type, or the ROS 1
# spelling package/Type, optionally with the size its variable-length arrays fill
# (package/msg/Type@64KB; the mapping {type: ..., size: ...} says the same).
TYPE_NAME = re.compile(r"^([a-z][a-z0-9_]*)/(?:msg/)?([A-Za-z][A-Za-z0-9_]*)(?:@(.+))?$")
TYPE_FIELDS = ("type", "size")
_UNITS = {"B": 1, "KB": 1024, "MB": 1024 * 1024}


def custom_type(name: str) -> tuple[str, int]:
    """(package/msg/Type, the bytes asked for or 0) of a payload naming a type of the user's,
    as spec.payloads writes it: package/msg/Type, or package/msg/Type@64KB."""
    m = TYPE_NAME.fullmatch(name)
    if m is None:
        raise ValueError(f"{name!r} is not a message type; allowed: package/msg/Type")
    size = 0
    if m.group(3):
        written = re.fullmatch(r"(\d+)(B|KB|MB)", m.group(3))
        if written is None:
            raise ValueError(f"{name!r}: a size after @ is written 256B, 64KB or 1MB")
        size = int(written.group(1)) * _UNITS[written.group(2)]
    return f"{m.group(1)}/msg/{m.group(2)}", size


@dataclass(frozen=True)
class MsgFile:
    path: Path
    name: str  # package/msg/Type
    text: str

    def line_of(self, field: str) -> int | None:
        """The line that declares `field`."""
        for number, line in enumerate(self.text.split("\n"), 1):
            words = line.split("#", 1)[0].replace("=", " = ").split()
            if len(words) >= 2 and words[1] == field:
                return number
        return None


@dataclass
class TypeSet:
    """The loaded files, and rosbags' ROS 1 and ROS 2 stores with their types added."""

    files: dict[str, MsgFile]
    ros1: Typestore
    ros2: Typestore


def type_name_of(path: Path) -> str:
    """`<package>/msg/<Type>.msg` -> `package/msg/Type`; a SpecError for another layout."""
    package, folder = path.parent.parent.name, path.parent.name
    if folder != "msg" or not _PACKAGE.fullmatch(package) or not _MSGNAME.fullmatch(path.stem):
        raise SpecError(
            str(path), None, "", f"cannot tell the message type from its path; allowed: "
            f"{ALLOWED_LAYOUT} (package: lower case letters, digits, _; Type: CamelCase)",
        )  # fmt: skip
    return f"{package}/msg/{path.stem}"


def msg_files(paths: Sequence[Path]) -> list[Path]:
    """The .msg files of `paths` (files, or folders searched recursively without following
    links, at most MAX_SCANNED entries each), sorted."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found += sorted(_search(path))
        elif path.suffix == ".msg" and (path.exists() or path.is_symlink()):
            found.append(path)  # read_text refuses what is not a regular file
        else:
            raise SpecError(str(path), None, "", f"no such .msg file or folder; {ALLOWED_LAYOUT}")
        if len(found) > MAX_FILES:
            raise UserError(f"more than {MAX_FILES} .msg files; at most {MAX_FILES} are loaded")
    return found


def _search(folder: Path) -> list[Path]:
    """The .msg files under `folder`; a SpecError once MAX_SCANNED entries were looked at
    (a folder such as / or a home folder, not a package's)."""
    found: list[Path] = []
    pending, scanned = [folder], 0
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except OSError:
            continue  # a folder it may not read holds no file it could load
        for entry in sorted(entries, key=lambda e: e.name):
            scanned += 1
            if scanned > MAX_SCANNED:
                raise SpecError(str(folder), None, "", f"more than {MAX_SCANNED} files and "
                                f"folders searched for .msg files; {ALLOWED_LAYOUT} (name the "
                                "package folder or its msg folder)")  # fmt: skip
            if entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))
            elif entry.name.endswith(".msg"):
                found.append(Path(entry.path))
    return found


def read_msg(path: Path) -> str:
    """A .msg file's text: a regular file, read without blocking, at most MAX_MSG_BYTES;
    Windows line ends become `\n`, any other line break but `\n` is an error on its line
    (rosbags and genpy split on `\n` only)."""
    text = read_text(path, ".msg file", MAX_MSG_BYTES).replace("\r\n", "\n")
    for number, line in enumerate(text.split("\n"), 1):
        bad = next((c for c in line if c in ros1def.LINE_BREAKS), None)
        if bad is not None:
            raise SpecError(str(path), number, "", f"a line break U+{ord(bad):04X} inside the "
                            "line; allowed: lines ended by \\n (or \\r\\n) only")  # fmt: skip
    return text


def check_lines(file: MsgFile) -> None:
    """Each line on its own, so that a problem names its line and field."""
    declared: dict[str, int] = {}
    for number, raw in enumerate(file.text.split("\n"), 1):
        problem = _line_problem(raw)
        if problem is not None:
            field, what = problem
            raise SpecError(str(file.path), number, field, f"{what}; allowed: {ALLOWED_LINE}")
        words = raw.split("#", 1)[0].replace("=", " = ").split()
        if len(words) >= 2:
            name = words[1]
            if name in declared:
                raise SpecError(str(file.path), number, name, f"declared twice (first on line "
                                f"{declared[name]}); each field and constant once")  # fmt: skip
            declared[name] = number


def _is_constant(line: str) -> bool:
    """`TYPE NAME=value` (or `NAME = value`), not a field whose default holds '='."""
    words = line.split("#", 1)[0].split()
    return len(words) >= 2 and ("=" in words[1] or (len(words) > 2 and words[2][0] == "="))


def _line_problem(raw: str) -> tuple[str, str] | None:
    line = raw.strip()
    typ, _, rest = line.partition(" ")
    if _is_constant(line):  # its value may hold '#'
        name, value = (part.strip() for part in rest.split("=", 1))
        if typ not in BASE_TYPES or not _NAME.fullmatch(name):
            return name, f"{line!r} is not a constant of a built-in type"
        shown = value if typ == "string" else value.split("#", 1)[0].strip()
        if not _default_ok(typ, False, shown):
            return name, f"constant value {value!r} does not fit {typ}"
        if typ == "string" and value.endswith("\\"):  # genpy writes it into Python source
            return name, "a string constant ending in a backslash, which genpy (ros1) cannot build"
        return None
    words = line.split("#", 1)[0].split()
    if not words:
        return None
    if len(words) == 1:
        return "", f"{line!r} has a type but no field name"
    typ, name, default = words[0], words[1], words[2:]
    if typ.split("[")[0].split("<")[0] in ROS2_ONLY:
        return name, f"{typ} has no ROS 1 equivalent (ros1 could not carry it)"
    if not (m := _TYPE.fullmatch(typ)):
        return name, f"{typ!r} is not a type"
    if not _NAME.fullmatch(name):
        return name, f"{name!r} is not a field name (a letter, then letters, digits or _)"
    if keyword.iskeyword(name):
        return name, f"{name!r} is a Python keyword, which ros1 (genpy) cannot name a field"
    if default and not _default_ok(m.group("base"), bool(m.group("array")), " ".join(default)):
        return name, f"default value {' '.join(default)!r} does not fit {typ}"
    return None


def _default_ok(base: str, array: bool, value: str) -> bool:
    if base not in BASE_TYPES and not base.startswith("string<="):
        return False  # only built-in types have default values
    items = [v.strip() for v in value.strip("[]").split(",")] if array else [value]
    if array and not (value.startswith("[") and value.endswith("]")):
        return False
    if base in NUMBERS:
        return all(_NUMBER.fullmatch(v) for v in items if v)
    if base == "bool":
        return all(v in _BOOL for v in items if v)
    return base not in ("time", "duration")


def _parse_error_line(file: MsgFile, message: str) -> int | None:
    """rosbags says 'Could not parse:', the text, then the position it stopped at."""
    parts = message.split("\n")
    if len(parts) < 3 or not parts[2].strip().isdigit():
        return None
    offset = int(parts[2]) - len(f"MSG: {file.name}\n")
    return file.text[: max(0, offset)].count("\n") + 1


def parse(file: MsgFile) -> Typesdict:
    from rosbags.typesys import TypesysError, get_types_from_msg

    check_lines(file)
    try:
        parsed = dict(get_types_from_msg(file.text, file.name))
    except TypesysError as e:
        line = _parse_error_line(file, str(e))
        shown = file.text.split("\n")[line - 1].strip() if line else ""
        words = shown.split("#", 1)[0].replace("=", " = ").split()
        field = words[1] if len(words) > 1 else ""
        raise SpecError(str(file.path), line, field, f"does not parse at {shown!r}; allowed: "
                        f"{ALLOWED_LINE}") from None  # fmt: skip
    for name in parsed:
        try:
            ros1def.check_type(parsed, name)
        except ros1def.DefinitionError as e:
            raise definition_error(file, e) from None
    return parsed


def definition_error(file: MsgFile, e: ros1def.DefinitionError) -> SpecError:
    """A refused definition, placed on its line of the file."""
    return SpecError(str(file.path), file.line_of(e.field) if e.field else None, e.field, e.what)


def load(paths: Sequence[Path]) -> TypeSet:
    """Load every .msg file of `paths` into rosbags' ROS 1 and ROS 2 stores, checked."""
    try:
        from rosbags.typesys import Stores, TypesysError, get_typestore
    except ImportError:
        raise UserError("message types of .msg files need rosbags", hint=INSTALL_HINT) from None

    files: dict[str, MsgFile] = {}
    parsed: Typesdict = {}
    total = 0
    for path in msg_files(paths):
        name = type_name_of(path)
        if name in files:
            raise SpecError(str(path), None, "", f"type {name} is also defined by "
                            f"{files[name].path}; one file per type")  # fmt: skip
        files[name] = MsgFile(path, name, read_msg(path))
        total += len(files[name].text)
        if total > MAX_TOTAL_BYTES:  # rosbags parses about 100 KB/s of fields
            raise SpecError(str(path), None, "", f".msg files of more than {MAX_TOTAL_BYTES} "
                            "bytes in all; name the packages the spec uses")  # fmt: skip
        parsed.update(parse(files[name]))
    types = TypeSet(files, get_typestore(Stores.ROS1_NOETIC), get_typestore(Stores.ROS2_HUMBLE))
    for store in (types.ros1, types.ros2):
        _check_references(types, store, parsed)
        _check_shapes(types, {**store.fielddefs, **parsed}, store is types.ros1)
        try:
            store.register(parsed)
        except TypesysError as e:
            names = [n for n in parsed if n in store.fielddefs]
            file = files[names[0]] if names else next(iter(files.values()))
            raise SpecError(str(file.path), None, "", f"{e} (a loaded file redefines a type "
                            "of rosbags' store; rename the package)") from None  # fmt: skip
    for name, file in files.items():  # what ros1 agents hand genpy, proven data now
        try:
            ros1_text(types.ros1, name)
        except ros1def.DefinitionError as e:
            raise definition_error(files.get(normalize(e.msgtype), file), e) from None
    return types


def _check_shapes(types: TypeSet, fielddefs: Typesdict, ros1: bool) -> None:
    """No loaded type contains itself; its fixed arrays are bounded (never allocated)."""
    for name, file in types.files.items():
        try:
            ros1def.closure(fielddefs, name, ros1)
            ros1def.fixed_elements(fielddefs, name)
        except ros1def.DefinitionError as e:
            raise definition_error(types.files.get(e.msgtype, file), e) from None


_referenced = ros1def.referenced


def _check_references(types: TypeSet, store: Typestore, parsed: Typesdict) -> None:
    known = sorted(set(store.fielddefs) | set(parsed))
    which = "ROS 1 (Noetic)" if store is types.ros1 else "ROS 2 (Humble)"
    for name, (_, fields) in parsed.items():
        file = types.files[name]
        for field, desc in fields:
            ref = _referenced(desc)
            if ref is None or ref in known:
                continue
            close = difflib.get_close_matches(ref, known, n=1, cutoff=0.6)
            guess = f"did you mean {close[0]!r}? " if close else ""
            raise SpecError(
                str(file.path), file.line_of(field), field,
                f"unknown type {ref!r}; {guess}allowed: a type of a loaded .msg file or of "
                f"rosbags' {which} store (std_msgs, geometry_msgs, sensor_msgs, ...)",
            )  # fmt: skip


@functools.lru_cache(maxsize=16)
def load_cached(paths: tuple[str, ...]) -> TypeSet:
    return load([Path(p) for p in paths])


def normalize(name: str) -> str:
    """`pkg/Type` (ROS 1 spelling) or `pkg/msg/Type` -> `pkg/msg/Type`."""
    parts = name.split("/")
    return f"{parts[0]}/msg/{parts[-1]}" if len(parts) == 2 else name


def resolve(types: TypeSet, name: str) -> str:
    """The loaded type a payload names; a UserError naming the nearest one otherwise."""
    full = normalize(name)
    if full in types.files:
        return full
    known = sorted(types.files)
    close = difflib.get_close_matches(full, known, n=1, cutoff=0.5)
    guess = f"did you mean {close[0]!r}? " if close else ""
    loaded = ", ".join(known) or "none"
    raise UserError(f"no loaded .msg file defines {name!r}; {guess}loaded types: {loaded}")


def ros1_definition(types: TypeSet, name: str) -> str:
    return ros1_text(types.ros1, name)


def ros1_text(store: Typestore, name: str) -> str:
    """The ROS 1 full text (genpy's `_full_text`: the type, then each dependency after a
    separator) of a type of `store`, bounds dropped: ROS 1 has none, and they change no
    byte on the wire. Proven data (`ros1def.check_text`: what genpy will read is what
    `store` holds, and every name and constant is data), or a DefinitionError."""
    ros1def.closure(store.fielddefs, name)  # no type that contains itself: text ends
    text, _ = store.generate_msgdef(name, ros_version=1)
    text = re.sub(r"(string)<=\d+|\[<=\d+\]", lambda m: m.group(1) or "[]", text)
    ros1def.check_text(store.fielddefs, name, text)
    return text


def typed_payload(types: TypeSet, name: str, size: int = 0) -> TypedPayload:
    """A loaded type as agents carry it: its ROS 1 definition and one sample message in
    both serializations, variable-length arrays sized to `size` bytes of CDR (0: each
    of SEQUENCE_DEFAULT elements)."""
    count = sequence_count(types, name, size) if size else SEQUENCE_DEFAULT
    ros1 = types.ros1.serialize_ros1(Filler(types.ros1, count).message(name), name)
    return TypedPayload(
        msgtype=name,
        ros1_definition=ros1_definition(types, name),
        ros1_sample=base64.b64encode(ros1).decode(),
        cdr_sample=base64.b64encode(cdr_sample(types, name, count)).decode(),
        ros2_fields=json.dumps(ros2_fields(types.ros2, name)),
    )


def ros2_fields(store: Typestore, name: str) -> dict[str, list[tuple[str, FieldDesc]]]:
    """The ROS 2 field definitions (of `store`, a ROS 2 one) of `name` and of every type it
    uses, dependencies first."""
    out: dict[str, list[tuple[str, FieldDesc]]] = {}

    def visit(typename: str) -> None:
        fields = store.fielddefs[typename][1]
        for _, desc in fields:
            ref = _referenced(desc)
            if ref is not None and ref not in out:
                visit(ref)
        out[typename] = fields

    visit(name)
    return out


@functools.lru_cache(maxsize=32)
def message_kind(paths: tuple[str, ...], payload: str) -> MessageKind:
    """The message kind of a payload naming a loaded type (`pkg/msg/Type` or
    `pkg/msg/Type@64KB`, as spec.payloads names it)."""
    name, size = custom_type(payload)
    types = load_cached(paths)
    typed = typed_payload(types, resolve(types, name), size)
    return MessageKind("custom", len(typed.sample("cdr")), typed)
