"""Read a user's YAML file into plain data plus a map from each key path to its line.

The one YAML reader of specs, launch files and link profiles. It lies beneath every
package (it imports only `errors`), so the runtime and `env` read YAML without the spec.

Bounded, because the files come from users and sometimes from elsewhere:
- only a regular file of at most MAX_BYTES, opened without blocking (a FIFO, a
  directory or a device is refused before anything is read);
- UTF-8 text (a byte-order mark is allowed); a binary file or a bad byte is named;
- at most MAX_DEPTH levels of nesting, and at most MAX_VALUES values once aliases
  are expanded (an alias bomb stops at the limit), no alias that contains itself;
- no tags at all (`!!python/object`, `!!binary`, `!custom`, even `!!str`): a value
  is what it reads as;
- merge keys (`<<: *base`) are refused: a whole value may be an alias, but keys are
  written out, so that every key has one line to point at;
- keys are text (no `? [a, b]` keys, no `5:` or `~:` keys); a key given twice is an error;
- dates stay strings: roboscale has no date fields, and `2024-13-45` is no crash;
- a number is at most MAX_NUMBER_CHARS characters (base-60 `1:2:3:…` builds in
  quadratic time);
- the nesting depth is checked on the parser's events (C, then pure Python for the
  wording: both state machines) before the recursive composer runs.
Every problem is a SpecError naming the file, the line and what is allowed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import yaml

from roboscale.errors import SpecError, UserError

KeyPath = tuple[str | int, ...]
LineMap = dict[KeyPath, int]

MAX_BYTES = 1 << 20  # 1 MiB: the largest launch file of a big robot is a few tens of KB
MAX_DEPTH = 64
MAX_VALUES = 100_000
MAX_NUMBER_CHARS = 64
MERGE_TAG = "tag:yaml.org,2002:merge"
_NUMERIC = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
_PLAIN = {
    "tag:yaml.org,2002:str",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:null",
}
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def dotted(loc: KeyPath) -> str:
    """`sweep.rate_hz[2]` for ("sweep", "rate_hz", 2)."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def line_for(loc: KeyPath, lines: LineMap) -> int | None:
    """The line of `loc`, or of its nearest enclosing key that has one."""
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


def _kind(mode: int) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return name
    return None if stat.S_ISREG(mode) else "not a regular file"


def _open_regular(path: Path, what: str) -> tuple[int, int]:
    """A read-only descriptor of a regular file, opened without blocking, and its size."""
    file = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        raise UserError(f"{file}: no such {what}") from None
    except OSError as e:
        raise UserError(f"{file}: cannot open the {what}: {e.strerror}") from None
    info = os.fstat(fd)
    kind = _kind(info.st_mode)
    if kind is not None:
        os.close(fd)
        raise UserError(f"{file}: is {kind}; the {what} must be a regular file")
    return fd, info.st_size


def check_regular(path: Path, what: str) -> int:
    """The size of a regular file; a FIFO, a directory or a device is an error (no hang)."""
    fd, size = _open_regular(path, what)
    os.close(fd)
    return size


def read_text(path: Path, what: str, max_bytes: int = MAX_BYTES) -> str:
    """A regular file's UTF-8 text, read without blocking and at most `max_bytes` long."""
    file = str(path)
    fd, size = _open_regular(path, what)
    try:
        if size > max_bytes:
            raise UserError(f"{file}: {size} bytes; a {what} is at most {max_bytes} bytes")
        data = os.read(fd, max_bytes + 1)
    except OSError as e:
        raise UserError(f"{file}: cannot read the {what}: {e.strerror}") from None
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise UserError(f"{file}: a {what} is at most {max_bytes} bytes")
    return _decode(data, file, what)


def _decode(data: bytes, file: str, what: str) -> str:
    if b"\0" in data:
        line = data[: data.index(b"\0")].count(b"\n") + 1
        raise SpecError(file, line, "", f"a binary file (a NUL byte); a {what} is UTF-8 text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        line = data[: e.start].count(b"\n") + 1
        raise SpecError(
            file, line, "", f"byte 0x{data[e.start]:02x} is not UTF-8; a {what} is UTF-8 text"
        ) from None


def load_yaml(path: Path, what: str = "spec file") -> tuple[Any, LineMap]:
    """Parse YAML into plain data plus a map from each key path to its line."""
    return parse_yaml(read_text(path, what), str(path), what)


def parse_yaml(text: str, file: str, what: str = "spec file") -> tuple[Any, LineMap]:
    """`load_yaml` of text already read (e.g. YAML inside a roslaunch file), as bounded."""
    if len(text) > MAX_BYTES:
        raise UserError(f"{file}: a {what} is at most {MAX_BYTES} bytes")
    _check_events(text, file)
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise _syntax_error(e, file, text) from None
    if node is None:
        raise SpecError(file, 1, "", f"the file is empty; a {what} is a YAML mapping")
    lines: LineMap = {}
    return _Builder(file, lines).build(node, (), 0), lines


def _syntax_error(e: yaml.YAMLError, file: str, text: str) -> SpecError:
    """The error as the pure-Python parser words it (it says what it found), when the fast
    C parser failed. Called after the event check, so the depth is bounded by MAX_DEPTH
    when the (recursive) composer runs here."""
    if _Loader is not yaml.SafeLoader:
        try:
            yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.YAMLError as worded:
            e = worded
        except RecursionError:  # cannot happen below MAX_DEPTH; keep the fast parser's words
            pass
    mark = getattr(e, "problem_mark", None)
    line = mark.line + 1 if mark is not None else None
    if isinstance(e, yaml.reader.ReaderError):  # a bad character: it has a position only
        line = text[: e.position].count("\n") + 1
    problem = getattr(e, "problem", None) or str(e).splitlines()[0]
    return SpecError(file, line, "", f"not valid YAML: {problem}")


def _check_events(text: str, file: str) -> None:
    """Depth and tags, checked on the event stream (the parser is a state machine, it does
    not recurse) before the composer (which recurses) sees the document.

    The C parser stops on limits of its own (libyaml 0.2.5 from PyYAML 6.0.4 on refuses
    1,000 levels of nesting) and words its errors tersely; then the same check runs on the
    pure-Python parser's events, which meet this reader's depth limit first and say what
    they found. Neither path hands hostile text to the recursive composer."""
    try:
        _scan_events(text, file, _Loader)
    except yaml.YAMLError as fast_error:
        if _Loader is yaml.SafeLoader:
            raise _syntax_error(fast_error, file, text) from None
        try:
            _scan_events(text, file, yaml.SafeLoader)
        except yaml.YAMLError as worded:
            raise _syntax_error(worded, file, text) from None
        raise _syntax_error(fast_error, file, text) from None


def _scan_events(text: str, file: str, loader: Any) -> None:
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        tag = getattr(event, "tag", None)
        if tag is not None:
            raise SpecError(
                file, line, "", f"the tag {tag} is not allowed; write plain values without tags"
            )
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecError(
                    file, line, "", f"nested too deeply; allowed: at most {MAX_DEPTH} levels"
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


class _Builder:
    """Turns composed nodes into dicts, lists and scalars, recording the line of every key."""

    def __init__(self, file: str, lines: LineMap) -> None:
        self.file = file
        self.lines = lines
        self.values = 0
        self.open: set[int] = set()  # nodes being built: an alias to one of them is a cycle
        self.constructor = yaml.SafeLoader("")

    def fail(self, node: yaml.Node, loc: KeyPath, problem: str) -> SpecError:
        return SpecError(self.file, node.start_mark.line + 1, dotted(loc), problem)

    def build(self, node: yaml.Node, loc: KeyPath, depth: int) -> Any:
        self.values += 1
        if self.values > MAX_VALUES:
            raise self.fail(
                node, loc, f"more than {MAX_VALUES} values once aliases are expanded; "
                "allowed: fewer values, or fewer aliases of large values",
            )  # fmt: skip
        if depth > MAX_DEPTH:
            raise self.fail(node, loc, f"nested too deeply; allowed: at most {MAX_DEPTH} levels")
        self.lines.setdefault(loc, node.start_mark.line + 1)
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node, loc)
        if id(node) in self.open:
            raise self.fail(node, loc, "an alias refers to a value that contains it")
        self.open.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self.mapping(node, loc, depth)
            return [self.build(v, (*loc, i), depth + 1) for i, v in enumerate(node.value)]
        finally:
            self.open.discard(id(node))

    def mapping(self, node: yaml.MappingNode, loc: KeyPath, depth: int) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                raise self.fail(
                    key_node, loc, "merge keys (<<) are not supported; write the keys out "
                    "(an alias may stand for a whole value)",
                )  # fmt: skip
            if not isinstance(key_node, yaml.ScalarNode):
                raise self.fail(key_node, loc, "a key must be a plain name, not a list or mapping")
            key = self.scalar(key_node, loc)
            if not isinstance(key, str):
                raise self.fail(
                    key_node, loc, f"the key {key!r} is not a name; allowed: text (quote it: "
                    f"'{key_node.value}')",
                )  # fmt: skip
            if key in out:
                raise self.fail(key_node, (*loc, key), "duplicate key")
            self.lines[(*loc, key)] = key_node.start_mark.line + 1
            out[key] = self.build(value_node, (*loc, key), depth + 1)
        return out

    def scalar(self, node: yaml.ScalarNode, loc: KeyPath) -> Any:
        if node.tag not in _PLAIN:  # a date or a time: kept as written
            return str(node.value)
        if node.tag in _NUMERIC and len(node.value) > MAX_NUMBER_CHARS:
            # YAML 1.1's base-60 integers (1:2:3) take quadratic time to build, and no
            # field of roboscale needs a number written in more than a few dozen digits.
            raise self.fail(
                node, loc, f"a number written in {len(node.value)} characters; allowed: at "
                f"most {MAX_NUMBER_CHARS} (quote it if it is text)",
            )  # fmt: skip
        try:
            return self.constructor.construct_object(node)
        except (yaml.YAMLError, ValueError, OverflowError) as e:
            raise self.fail(node, loc, f"cannot read {node.value!r}: {e}") from None
