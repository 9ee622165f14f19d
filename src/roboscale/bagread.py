"""Reading a bag (ROS 1, rosbag2 in sqlite3 or MCAP) for `roboscale.bags`, every input
checked before it is used: the files are regular (a FIFO would hang, a link loop is
named), each connection's stored definition is parsed on its own and bounded in size, a
topic that cannot be replayed is skipped with one line, and every kept type is proven
data (`backends/ros1def.py`) before anything hands it on; an MCAP that rosbags' reader
yields nothing from is read with the `mcap` library. Lab side; rosbags imported lazily.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roboscale.backends import ros1def
from roboscale.errors import UserError
from roboscale.workloads.replay import StreamTopic

if TYPE_CHECKING:
    from rosbags.interfaces.typing import Typesdict
from roboscale.yamlfile import check_regular

MAX_DEFINITION_BYTES = 256 * 1024  # one connection's stored definition (as a .msg file)
MAX_DEFINITIONS_BYTES = 4 * 1024 * 1024  # all of a bag's: seconds of parsing, not hours
MAX_METADATA_BYTES = 16 * 1024 * 1024
MAX_BAG_FILES = 10_000  # files of a rosbag2 folder checked to be regular
TOPIC_NAME = re.compile(r"(?:/[A-Za-z_][A-Za-z0-9_]*)+")
MSGTYPE = re.compile(r"[A-Za-z][A-Za-z0-9_]*/(?:msg/)?[A-Za-z][A-Za-z0-9_]*")
BAG_FORMATS = "a ROS 1 bag (.bag), or a rosbag2 folder (sqlite3 or MCAP) or its .db3/.mcap file"


@dataclass(frozen=True)
class BagTypes:
    """A bag's types in rosbags' stores of each ROS version: the bag's own definitions,
    with std_msgs/Header as ROS 1 (with `seq`) and as ROS 2 has it."""

    ros1: Any
    ros2: Any


def bag_types(fielddefs: Typesdict) -> BagTypes:
    from rosbags.typesys import Stores, get_typestore

    stores = []
    for version in (Stores.ROS1_NOETIC, Stores.ROS2_FOXY):
        header = get_typestore(version).fielddefs["std_msgs/msg/Header"]
        store = get_typestore(Stores.EMPTY)
        store.register({**fielddefs, "std_msgs/msg/Header": header})
        stores.append(store)
    return BagTypes(*stores)


def bag_paths(path: Path) -> Path:
    """What a reader opens: a .bag file, or a rosbag2 folder (a .db3/.mcap file inside one
    stands for its folder); every file of it a regular file (a FIFO or a device would
    block or never end), checked without blocking."""
    try:
        path.lstat()
        path.stat()
    except OSError as e:  # missing, or a link to nothing or to itself
        what = "no such bag" if isinstance(e, FileNotFoundError) else e.strerror
        raise UserError(f"{path}: {what}; expected {BAG_FORMATS}") from None
    if not path.is_dir() and path.suffix in (".db3", ".mcap"):
        check_regular(path, "bag")
        if not (path.parent / "metadata.yaml").exists():
            raise UserError(f"{path}: a {path.suffix} file without the metadata.yaml of its "
                            f"rosbag2 folder beside it; expected {BAG_FORMATS}")  # fmt: skip
        path = path.parent
    if path.is_dir():
        if not (path / "metadata.yaml").exists():
            raise UserError(f"{path}: a folder without metadata.yaml is not a rosbag2")
        for entry in sorted(path.iterdir())[:MAX_BAG_FILES]:
            if entry.suffix in (".yaml", ".db3", ".mcap", ".zstd"):
                size = check_regular(entry, "bag file")
                if entry.name == "metadata.yaml" and size > MAX_METADATA_BYTES:
                    raise UserError(f"{entry}: {size} bytes; a rosbag2's metadata.yaml is "
                                    f"at most {MAX_METADATA_BYTES} bytes")  # fmt: skip
        return path
    if path.suffix != ".bag":
        raise UserError(f"{path}: unknown bag format {path.suffix or '(no suffix)'!r}; "
                        f"expected {BAG_FORMATS}")  # fmt: skip
    check_regular(path, "bag")
    return path


def _reader(path: Path) -> tuple[Any, bool]:
    """rosbags' reader of the bag's format (opened by the caller), and whether it is ROS 2."""
    if path.is_dir():
        from rosbags.rosbag2 import Reader as Reader2

        return Reader2(path), True
    from rosbags.rosbag1 import Reader as Reader1

    return Reader1(path), False


def read_bag(
    path: Path, chosen: tuple[str, ...] = ()
) -> tuple[list[tuple[int, int, bytes]], Any, BagTypes]:
    """Every message of the topics that can be replayed (offset from the first, topic
    index, raw bytes); a topic that cannot (a service's events, a type without a
    definition, a definition rosbags does not parse), or that `chosen` (the spec's
    `replay_topics`; all when empty) leaves out, is skipped with one line. Every
    kept type is proven data before anything uses it (`check_definitions`), and each
    topic's first message deserializes."""
    folder = bag_paths(path)
    try:
        reader, is2 = _reader(folder)
        with reader as bag:
            encoding = "cdr" if is2 else "ros1"
            check_chosen(bag.connections, chosen, path)
            store, conns = _replayable(bag.connections, is2, path, chosen)
            check_definitions(store, conns, path)
            names = sorted({c.topic for c in conns})
            index = {n: i for i, n in enumerate(names)}
            topics = tuple(_topic(store, conns, n, encoding) for n in names)
            frames = [(stamp, index[c.topic], bytes(raw)) for c, stamp, raw in bag.messages(conns)]
            indexed = sum(c.msgcount for c in conns)
    except UserError:
        raise
    except Exception as e:  # rosbags' errors on a truncated or corrupt bag, of any kind
        raise UserError(
            f"{path}: cannot read the bag: {type(e).__name__}: {_first_line(e)}"
        ) from None
    if not frames and indexed and is2:
        frames = _mcap_frames(folder, index, indexed, path)
    _deserialize_firsts(store, conns, frames, index, encoding, path)
    stores = bag_types(dict(store.fielddefs))
    first = min((f[0] for f in frames), default=0)
    frames.sort(key=lambda f: f[0])
    return [(s - first, t, raw) for s, t, raw in frames], topics, stores


def _shown(name: str) -> str:
    """A name from a bag as an error shows it: quoted and escaped unless printable."""
    return name if name.isprintable() and len(name) <= 200 else repr(name[:200])


def _first_line(e: Exception) -> str:
    """An error in one line of at most 200 characters: a definition is never pasted whole
    (rosbags' "Could not parse:" gets the line it stopped at)."""
    lines = [line.strip() for line in str(e).strip().split("\n") if line.strip()] or [""]
    text = lines[0] + (f" {lines[-1]!r}" if lines[0].endswith(":") and len(lines) > 1 else "")
    return text if len(text) <= 200 else text[:200] + "..."


class UnknownTopics(UserError):
    """Topics a spec chose that the bag does not have (the spec names the field)."""

    def __init__(self, path: Path, missing: list[str], names: list[str]) -> None:
        self.missing, self.names = missing, names
        super().__init__(f"{path}: the bag has no topic {', '.join(map(_shown, missing))}")


def check_chosen(connections: Any, chosen: tuple[str, ...], path: Path) -> None:
    """Every chosen topic is one of the bag's (compared in full: a name with a trailing
    newline or space is another name)."""
    names = sorted({c.topic for c in connections})
    missing = [t for t in chosen if t not in names]
    if missing:
        raise UnknownTopics(path, missing, names)


def _replayable(
    connections: Any, is2: bool, path: Path, chosen: tuple[str, ...] = ()
) -> tuple[Any, list[Any]]:
    """A store of the types of the connections that can be replayed (and are chosen, when
    topics are), and those connections; one line for each skipped topic."""
    from rosbags.typesys import Stores, get_typestore

    default = get_typestore(Stores.LATEST if is2 else Stores.ROS1_NOETIC)
    store = get_typestore(Stores.EMPTY)
    kept, skipped = [], []
    budget = MAX_DEFINITIONS_BYTES
    for conn in connections:
        why = "not among replay_topics" if chosen and conn.topic not in chosen else None
        why = why or _skip_reason(conn, is2)
        size = len(str(conn.msgdef.data))
        budget -= size if why is None else 0  # a skipped topic's definition is not parsed
        if why is None and (size > MAX_DEFINITION_BYTES or budget < 0):
            why = (f"a definition of {size} bytes (at most {MAX_DEFINITION_BYTES} each, "
                   f"{MAX_DEFINITIONS_BYTES} in all)")  # fmt: skip
        if why is None:
            try:
                types = _connection_types(conn, default)
                store.register(types)
            except Exception as e:  # rosbags refuses the definition: the topic is skipped
                why = f"its definition of {conn.msgtype} does not parse ({_first_line(e)})"
        if why is None and (missing := _missing_type(store.fielddefs, conn.msgtype)):
            why = f"type {missing} has no definition in the bag nor among ROS's standard types"
        if why is None:
            kept.append(conn)
        elif conn.topic not in skipped:
            skipped.append(conn.topic)
            print(f"roboscale: {path}: topic {_shown(conn.topic)} skipped: {why}", file=sys.stderr)
    kept = [c for c in kept if c.topic not in skipped]
    if not kept:
        which = "chosen topic" if chosen else "topic"
        raise UserError(f"{path}: no {which} of the bag can be replayed (each was skipped: "
                        "service events, or a type without a definition)")  # fmt: skip
    return store, kept


def _missing_type(fielddefs: Any, name: str) -> str | None:
    """The first type `name` uses (or itself) that has no definition, if any."""
    pending, seen = [name], {name}
    while pending:
        typ = pending.pop()
        if typ not in fielddefs:
            return typ
        for _, desc in fielddefs[typ][1]:
            ref = ros1def.referenced(desc)
            if ref is not None and ref not in seen:
                seen.add(ref)
                pending.append(ref)
    return None


def _skip_reason(conn: Any, is2: bool) -> str | None:
    if conn.topic.endswith("/_service_event") or "/srv/" in conn.msgtype:
        return "a service's events, not a topic's messages"
    if not TOPIC_NAME.fullmatch(conn.topic):
        return "not a ROS topic name; allowed: /name/name..., letters, digits and _"
    if not MSGTYPE.fullmatch(conn.msgtype):
        return f"type {_shown(conn.msgtype)} is not a message type; allowed: package/msg/Type"
    fmt = getattr(conn.ext, "serialization_format", "cdr")
    if is2 and fmt != "cdr":
        return f"serialization {fmt!r}; replayed: cdr"
    return None


def _connection_types(conn: Any, default: Any) -> Typesdict:
    """A connection's types: its stored definition (a .msg text or IDL), or, without one,
    the standard type of that name with the types it uses."""
    from rosbags.interfaces import MessageDefinitionFormat as Format
    from rosbags.typesys import get_types_from_idl, get_types_from_msg

    fmt, data = conn.msgdef.format, conn.msgdef.data
    if not str(data).strip():
        fmt = Format.NONE  # an empty stored definition: none (as rosbag2 before Iron)
    if fmt == Format.MSG:
        return dict(get_types_from_msg(data, conn.msgtype))
    if fmt == Format.IDL:
        sep = "=" * 80 + "\n"
        parts = data.split(sep)[1:] if data.startswith(f"{sep}IDL: ") else ["\n" + data]
        types: Typesdict = {}
        for part in parts:
            types.update(get_types_from_idl(part.split("\n", 1)[1]))
        return types
    if conn.msgtype not in default.fielddefs:
        return {}
    return {
        t: default.fielddefs[t] for t in ros1def.closure(default.fielddefs, conn.msgtype, False)
    }


def check_definitions(store: Any, conns: list[Any], path: Path) -> None:
    """Every kept type, as rosbags parsed it, proven data: no type that contains itself,
    bounded fixed arrays, names and constants that are data, and a ROS 1 text (what
    ros1 agents hand genpy) that reads back the same; a UserError naming the bag, the
    connection, the line of its definition and the field otherwise."""
    from roboscale.msgtypes import ros1_text

    for conn in conns:  # shapes first: rosbags and genpy recurse over what these bound
        with _refusal(conn, path):
            ros1def.closure(store.fielddefs, conn.msgtype, False)
            ros1def.fixed_elements(store.fielddefs, conn.msgtype)
    ros1 = bag_types(dict(store.fielddefs)).ros1
    for conn in conns:
        with _refusal(conn, path):
            ros1_text(ros1, conn.msgtype)


@contextlib.contextmanager
def _refusal(conn: Any, path: Path) -> Iterator[None]:
    """A DefinitionError of a connection's types as a UserError naming the bag, the
    connection, the line of its stored definition and the field."""
    try:
        yield
    except ros1def.DefinitionError as e:
        line = _definition_line(getattr(conn.msgdef, "data", ""), e.field)
        where = f"line {line} of its definition: " if line else ""
        field = f"{e.field}: " if e.field else ""
        raise UserError(f"{path}: connection {conn.topic} (type {conn.msgtype}): "
                        f"{where}{field}{e.what}") from None  # fmt: skip


def _definition_line(text: str, field: str) -> int | None:
    """The line of a stored definition that declares `field` (split on `\n`, as read)."""
    if not field or not isinstance(text, str):
        return None
    for number, line in enumerate(text.split("\n"), 1):
        words = line.split("#", 1)[0].replace("=", " = ").split()
        if len(words) >= 2 and words[1] == field:
            return number
    return None


def _mcap_frames(
    folder: Path, index: dict[str, int], indexed: int, path: Path
) -> list[tuple[int, int, bytes]]:
    """The messages of a rosbag2 in MCAP that rosbags' reader yields none of, read with
    the `mcap` library (some writers' files: rosbags finds no message in them)."""
    from mcap.reader import make_reader

    frames: list[tuple[int, int, bytes]] = []
    for file in sorted(folder.glob("*.mcap")):
        try:
            with file.open("rb") as f:
                for _, channel, message in make_reader(f).iter_messages(topics=list(index)):
                    frames.append((message.log_time, index[channel.topic], bytes(message.data)))
        except Exception as e:  # the mcap library's errors on a damaged file, of any kind
            raise UserError(f"{file}: cannot read the MCAP file: {type(e).__name__}: "
                            f"{_first_line(e)}") from None  # fmt: skip
    if not frames:
        raise UserError(f"{path}: its index counts {indexed} messages, but neither rosbags "
                        "nor the mcap library reads any of them")  # fmt: skip
    return frames


def _deserialize_firsts(
    store: Any, conns: list[Any], frames: list[tuple[int, int, bytes]], index: dict[str, int],
    encoding: str, path: Path,
) -> None:  # fmt: skip
    """Each topic's first message deserializes with its type."""
    msgtype = {index[c.topic]: c.msgtype for c in conns}
    seen: set[int] = set()
    for _, topic, raw in frames:
        if topic in seen:
            continue
        seen.add(topic)
        try:
            if encoding == "ros1":
                store.deserialize_ros1(raw, msgtype[topic])
            else:
                store.deserialize_cdr(raw, msgtype[topic])
        except Exception as e:  # rosbags' errors on a message of another shape
            name = next(n for n, i in index.items() if i == topic)
            raise UserError(
                f"{path}: topic {name}: its first message is not a {msgtype[topic]}: "
                f"{type(e).__name__}: {_first_line(e)}"
            ) from None


def _topic(store: Any, conns: list[Any], name: str, encoding: str) -> StreamTopic:
    conn = next(c for c in conns if c.topic == name)
    version = 1 if encoding == "ros1" else 2
    definition = store.generate_msgdef(conn.msgtype, ros_version=version)[0]
    return StreamTopic(name, conn.msgtype, encoding, definition)
