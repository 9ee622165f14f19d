"""What every roslaunch element is read through: the elements and attributes roboscale
supports (anything else is an error naming the file, line and attribute, never silently
ignored), the scope an element is read in, and its attributes read with roslaunch's
substitutions as text, flag, number of seconds, condition (if/unless) or ROS name, and
the files they name, bounded in bytes in all. The elements themselves, and the walk
through the document and its includes, are runtime/roslaunch_xml.py's.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from roboscale.errors import SpecError, UserError
from roboscale.runtime import rosexpr
from roboscale.runtime.rosexpr import Context, ExprError
from roboscale.runtime.safexml import Element

T = TypeVar("T")

MAX_READ_BYTES = 16 << 20  # of files included or loaded in all (each may be 1 MiB)

_IF = {"if", "unless"}
ATTRS: dict[str, set[str]] = {
    "launch": {"deprecated"},
    "node": {"name", "pkg", "type", "args", "ns", "respawn", "respawn_delay", "required",
             "output", "machine", "cwd", "clear_params", "launch-prefix"} | _IF,
    "param": {"name", "value", "type", "textfile"} | _IF,
    "rosparam": {"command", "file", "param", "ns", "subst_value"} | _IF,
    "remap": {"from", "to"} | _IF,
    "arg": {"name", "default", "value", "doc"} | _IF,
    "group": {"ns", "clear_params"} | _IF,
    "include": {"file", "ns", "clear_params"} | _IF,
    "env": {"name", "value"} | _IF,
    "machine": {"name", "address", "default", "user", "env-loader", "ssh-port", "timeout"} | _IF,
    "watchdog": {"topic", "min_rate_hz", "window_s", "max_silence_s", "heartbeat_file",
                 "heartbeat_s", "grace_s"},
}  # fmt: skip
CHILDREN = {
    "launch": {"node", "param", "rosparam", "remap", "arg", "group", "include", "env", "machine"},
    "group": {"node", "param", "rosparam", "remap", "arg", "group", "include", "env", "machine"},
    "node": {"param", "rosparam", "remap", "env", "watchdog"},
    "include": {"arg", "env"},
}
WHY = {
    "launch-prefix": "a prefix runs another program around the node",
    "test": "rostest's tests are not run by roboscale",
    "command": "it runs a program while the file is read",
    "binfile": "binary parameters are not supported",
    "password": "passwords are not sent: log in with an ssh key",
}
NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


@dataclass
class Scope:
    """What encloses an element: namespace, remaps, environment, arguments, file."""

    file: Path
    ns: str
    ctx: Context
    remaps: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    depth: int = 0

    def inner(self, ns: str | None = None) -> Scope:
        return Scope(self.file, ns or self.ns, self.ctx, dict(self.remaps), dict(self.env),
                     self.depth)  # fmt: skip


class AttributeReader:
    """An element's attributes checked and read; the byte budget of the files they name."""

    def __init__(self) -> None:
        self.bytes_read = 0

    def fail(self, s: Scope, el: Element, attr: str, problem: str) -> SpecError:
        where = f"{el.tag}.{attr}" if attr else el.tag
        return SpecError(str(s.file), el.line, where, problem)

    def check(self, s: Scope, el: Element) -> None:
        allowed = ATTRS.get(el.tag)
        if allowed is None:
            why = f" ({WHY[el.tag]})" if el.tag in WHY else ""
            raise self.fail(s, el, "", f"element not supported by roboscale{why}")
        for attr in el.attrs:
            if attr not in allowed:
                reason = WHY.get(attr)
                hint = f"not supported by roboscale ({reason})" if reason else "unknown attribute"
                raise self.fail(
                    s, el, attr, f"{hint}; allowed on <{el.tag}>: {', '.join(sorted(allowed))}"
                )

    def attr(self, s: Scope, el: Element, name: str, default: str | None = None) -> str:
        raw = el.attrs.get(name)
        if raw is None:
            if default is None:
                raise self.fail(s, el, name, f"required on <{el.tag}>")
            return default
        try:
            return rosexpr.substitute(raw, s.ctx)
        except ExprError as e:
            raise self.fail(s, el, name, str(e)) from None

    def read(self, s: Scope, el: Element, attr: str, reader: Callable[[Path], T]) -> T:
        """`reader` of the file `attr` names (relative to this file's folder); a problem
        opening it is named at this element's line and attribute, one inside it at its own."""
        path = Path(self.attr(s, el, attr))
        path = path if path.is_absolute() else s.file.parent / path
        self.count_bytes(s, el, attr, path)
        try:
            return reader(path)
        except SpecError:
            raise
        except UserError as e:
            raise self.fail(s, el, attr, str(e)) from None

    def count_bytes(self, s: Scope, el: Element, attr: str, path: Path) -> None:
        """Each file is bounded, not their number: a budget for all the files read."""
        with contextlib.suppress(OSError):  # the reader names what is wrong with the file
            self.bytes_read += path.stat().st_size
        if self.bytes_read > MAX_READ_BYTES:
            limit = MAX_READ_BYTES >> 20
            raise self.fail(s, el, attr, f"more than {limit} MiB of included or loaded files")

    def flag(self, s: Scope, el: Element, name: str, default: bool) -> bool:
        value = self.attr(s, el, name, "true" if default else "false").strip().lower()
        if value not in ("true", "false", "1", "0"):
            raise self.fail(s, el, name, f"{value!r} is not allowed; allowed: true | false")
        return value in ("true", "1")

    def number(self, s: Scope, el: Element, name: str, default: float) -> float:
        value = self.attr(s, el, name, str(default))
        try:
            number = float(value)
        except ValueError:
            number = -1.0
        if not 0 <= number < float("inf"):
            raise self.fail(s, el, name, f"{value!r} is not allowed; a number of seconds >= 0")
        return number

    def wanted(self, s: Scope, el: Element) -> bool:
        if "if" in el.attrs and "unless" in el.attrs:
            raise self.fail(s, el, "unless", "give if or unless, not both")
        if "if" in el.attrs:
            return self.flag(s, el, "if", True)
        if "unless" in el.attrs:
            return not self.flag(s, el, "unless", False)
        return True

    def resolve(self, s: Scope, el: Element, name: str, private_ns: str | None) -> str:
        if name.startswith("/"):
            full = name
        elif name.startswith("~"):
            if private_ns is None:
                raise self.fail(s, el, "name", "a private (~) name belongs inside a <node>")
            full = f"{private_ns}/{name[1:]}"
        else:  # inside a node, a relative parameter name is the node's own (roslaunch)
            full = f"{(private_ns or s.ns).rstrip('/')}/{name}"
        parts = [p for p in full.split("/") if p]
        if not parts or not all(NAME.fullmatch(p) for p in parts):
            raise self.fail(s, el, "name", f"invalid ROS name {name!r}")
        return "/" + "/".join(parts)
