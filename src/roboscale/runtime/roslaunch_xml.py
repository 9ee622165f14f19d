"""roslaunch XML read into the plain data of a `LaunchSpec` (runtime/launchmodels.py).

The one reader of roslaunch files. Safe: a regular file of at most MAX_BYTES, parsed by
expat with no DTD, no entity declaration and no external entity (a DOCTYPE is refused
before anything is expanded: no billion laughs, no XXE); includes at most MAX_INCLUDES
deep. Every element and attribute roboscale does not support is an error naming the
file, line and attribute, never silently ignored (`<watchdog>` inside a node is
roboscale's own: roslaunch warns about it and goes on). What is supported, and how each
attribute is read, is in runtime/roslaunch_attrs.py; the elements and the walk are here.

What a file becomes (docs/runtime.md has the table): a root supervisor `rest_for_one`
[a private rosmaster, `nodes`], where `nodes` is `one_for_one` over /rosout, the nodes
and one sub-supervisor per namespace. A node with respawn="true" is a
permanent child, else temporary (roslaunch leaves it dead); respawn_delay is its restart
delay; required="true" makes it (and the supervisors above it) significant: its end
stops the tree. Parameters (param, rosparam) are set on the master before any node
starts, by the master child. A `<machine>` elsewhere is a host its nodes start on over ssh
(runtime/rosremote.py); its attributes are checked here, the host when the tree is built.
"""

from __future__ import annotations

import contextlib
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from roboscale.errors import SpecError, UserError
from roboscale.runtime import rosexpr
from roboscale.runtime.launchmodels import machine_problem
from roboscale.runtime.rosexpr import Context, ExprError
from roboscale.runtime.roslaunch_attrs import CHILDREN, NAME, WHY, AttributeReader, Scope
from roboscale.runtime.safexml import Element, parse_xml
from roboscale.yamlfile import LineMap, load_yaml, parse_yaml, read_text

MAX_INCLUDES = 16
MAX_INCLUDED = 1000  # includes in all: each is read anew, so breadth times depth would explode
NODES_INTENSITY = (100, 10.0)  # roslaunch respawns forever; OTP gives up: 100 in 10 s


@dataclass
class _Node:
    data: dict[str, object]  # a `ros_node` entry, as a YAML launch file would hold it
    line: int
    ns: str
    name: str
    required: bool


@dataclass
class _Group:
    """A namespace's supervisor while the tree is assembled; `data()` once it is."""

    name: str
    children: list[_Group | _Node] = field(default_factory=list)
    required: bool = False

    def data(self) -> dict[str, object]:
        entry: dict[str, object] = {
            "supervisor": self.name, "strategy": "one_for_one",
            "intensity": NODES_INTENSITY[0], "period_s": NODES_INTENSITY[1],
            "children": [c.data() if isinstance(c, _Group) else c.data for c in self.children],
        }  # fmt: skip
        if self.required:  # the supervisors above a required node end with it
            entry.update(required=True, restart="temporary")
        return entry


class _Reader(AttributeReader):
    """The elements of a document and its includes, read into nodes, parameters and
    machines (roslaunch_attrs.py checks and reads each element's attributes)."""

    def __init__(self, find: Callable[[str], str] | None) -> None:
        super().__init__()
        self.find = find
        self.nodes: list[_Node] = []
        self.params: dict[str, tuple[object, Path, int]] = {}
        self.machines: dict[str, dict[str, object]] = {}  # launchmodels.Machine's data
        self.machine_lines: dict[str, int] = {}
        self.on_machine: list[tuple[Path, int, str]] = []  # a node's file, line, machine
        self.default_machine: str | None = None
        self.anon: dict[str, str] = {}
        self.included = 0

    # -- elements ----------------------------------------------------------------------------
    def block(self, s: Scope, el: Element) -> None:
        for child in el.children:
            self.check(s, child)
            if child.tag not in CHILDREN.get(el.tag, set()):
                allowed = ", ".join(sorted(CHILDREN.get(el.tag, set()))) or "nothing"
                raise self.fail(s, child, "", f"not allowed inside <{el.tag}>; allowed: {allowed}")
            if child.tag == "arg":
                self.arg(s, child)  # args count even under a false if: checked when used
                continue
            if not self.wanted(s, child):
                continue
            getattr(self, "el_" + child.tag)(s, child)

    def arg(self, s: Scope, el: Element) -> None:
        if not self.wanted(s, el):
            return
        name = self.attr(s, el, "name")
        args: dict[str, str] = dict(s.ctx.args)
        if "value" in el.attrs:
            if "default" in el.attrs:
                raise self.fail(s, el, "default", "give value or default, not both")
            if name in s.ctx.passed:
                raise self.fail(s, el, "value", f"arg {name!r} is fixed here and cannot be set")
            args[name] = self.attr(s, el, "value")
        elif name not in args:
            if "default" not in el.attrs:
                raise self.fail(s, el, "name", f"arg {name!r} needs a value: pass {name}:=...")
            args[name] = self.attr(s, el, "default")
        s.ctx.args = args

    def el_group(self, s: Scope, el: Element) -> None:
        ns = self.attr(s, el, "ns", "")
        if self.flag(s, el, "clear_params", False):
            raise self.fail(s, el, "clear_params", "not supported by roboscale")
        inner = s.inner(self.resolve(s, el, ns, None) if ns else None)
        self.block(inner, el)

    def el_remap(self, s: Scope, el: Element) -> None:
        s.remaps[self.attr(s, el, "from")] = self.attr(s, el, "to")

    def el_env(self, s: Scope, el: Element) -> None:
        s.env[self.attr(s, el, "name")] = self.attr(s, el, "value")

    def el_machine(self, s: Scope, el: Element) -> None:
        """Where nodes may run: here at a local address, else over ssh (rosremote.py)."""
        name = self.attr(s, el, "name")
        machine: dict[str, object] = {"address": self.attr(s, el, "address")}
        for attr, key in (("user", "user"), ("env-loader", "env_loader")):
            if attr in el.attrs:
                machine[key] = self.attr(s, el, attr)
        if "ssh-port" in el.attrs:
            port = self.attr(s, el, "ssh-port")
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise self.fail(s, el, "ssh-port", f"{port!r} is not allowed; a port 1..65535")
            machine["port"] = int(port)
        if "timeout" in el.attrs:
            machine["timeout_s"] = self.number(s, el, "timeout", 10.0)
        self.machine_check(s, el, machine)
        self.machines[name] = machine
        self.machine_lines[name] = el.line
        if self.flag(s, el, "default", False):
            self.default_machine = name

    def machine_check(self, s: Scope, el: Element, machine: dict[str, object]) -> None:
        from pydantic import ValidationError

        from roboscale.runtime.launchmodels import Machine

        try:
            Machine.model_validate(machine)
        except ValidationError as e:
            err = e.errors()[0]
            key = str(err["loc"][0]) if err["loc"] else "address"
            attr = {"env_loader": "env-loader", "port": "ssh-port", "timeout_s": "timeout"}
            problem = str(err["msg"]).removeprefix("Value error, ")
            raise self.fail(s, el, attr.get(key, key), problem) from None

    def el_param(self, s: Scope, el: Element, private_ns: str | None = None) -> None:
        name = self.resolve(s, el, self.attr(s, el, "name"), private_ns)
        kind = self.attr(s, el, "type", "auto")
        if "textfile" in el.attrs:
            value: object = self.read(s, el, "textfile", lambda p: read_text(p, "textfile"))
        else:
            text = self.attr(s, el, "value")
            value = self.typed(s, el, text, kind)
        self.set_param(s, el, name, value)

    def typed(self, s: Scope, el: Element, text: str, kind: str) -> object:
        try:
            if kind == "auto":
                return _auto(text)
            if kind in ("str", "string"):
                return text
            if kind == "int":
                return int(text.strip())
            if kind == "double":
                return float(text.strip())
            if kind == "bool":
                if text.strip().lower() not in ("true", "false"):
                    raise ValueError("true | false")
                return text.strip().lower() == "true"
            if kind == "yaml":
                return self.yaml(s, el, text)
        except ValueError as e:
            raise self.fail(
                s, el, "value", f"{text!r} is not allowed for type {kind} ({e})"
            ) from None
        raise self.fail(s, el, "type", f"{kind!r}; allowed: auto, str, int, double, bool, yaml")

    def yaml(self, s: Scope, el: Element, text: str) -> object:
        """YAML inside the file, through the bounded reader; its lines are the file's."""
        try:
            return parse_yaml(text, str(s.file), "YAML value")[0]
        except SpecError as e:
            line = el.line + (e.line or 1) - 1
            raise SpecError(str(s.file), line, el.tag, e.problem) from None

    def set_param(self, s: Scope, el: Element, name: str, value: object) -> None:
        if isinstance(value, dict):
            for key, inner in value.items():
                self.set_param(s, el, f"{name.rstrip('/')}/{key}", inner)
            return
        self.params[name] = (value, s.file, el.line)

    def el_rosparam(self, s: Scope, el: Element, private_ns: str | None = None) -> None:
        command = self.attr(s, el, "command", "load")
        if command != "load":
            raise self.fail(s, el, "command", f"{command!r} is not supported; allowed: load")
        base = s
        if "ns" in el.attrs:
            base = s.inner(self.resolve(s, el, self.attr(s, el, "ns"), private_ns))
            private_ns = None
        where = private_ns or base.ns
        if "param" in el.attrs:
            where = self.resolve(base, el, self.attr(s, el, "param"), private_ns)
        if "file" in el.attrs:
            data = self.read(s, el, "file", lambda p: load_yaml(p, "rosparam")[0])
        else:
            text = el.text
            if self.flag(s, el, "subst_value", False):
                try:
                    text = rosexpr.substitute(text, s.ctx)
                except ExprError as e:
                    raise self.fail(s, el, "", str(e)) from None
            if not text.strip():
                return
            data = self.yaml(s, el, _dedent(text))
        if "param" not in el.attrs and not isinstance(data, dict):
            raise self.fail(s, el, "param", "a YAML value that is not a mapping needs param=")
        self.set_param(s, el, where, data)

    def el_include(self, s: Scope, el: Element) -> None:
        if s.depth >= MAX_INCLUDES:
            raise self.fail(s, el, "file", f"includes nested deeper than {MAX_INCLUDES}")
        self.included += 1
        if self.included > MAX_INCLUDED:
            raise self.fail(s, el, "file", f"more than {MAX_INCLUDED} includes in all")
        path = Path(self.attr(s, el, "file"))
        path = path if path.is_absolute() else s.file.parent / path
        ns = self.attr(s, el, "ns", "")
        given: dict[str, str] = {}
        env = dict(s.env)
        for child in el.children:
            self.check(s, child)
            if child.tag not in CHILDREN["include"]:
                raise self.fail(s, child, "", "not allowed inside <include>; allowed: arg, env")
            if not self.wanted(s, child):
                continue
            if child.tag == "env":
                env[self.attr(s, child, "name")] = self.attr(s, child, "value")
            else:
                given[self.attr(s, child, "name")] = self.attr(s, child, "value")
        self.count_bytes(s, el, "file", path)
        try:
            root = parse_xml(path)
        except SpecError:
            raise
        except UserError as e:
            raise self.fail(s, el, "file", str(e)) from None
        ctx = Context(dict(given), path.parent, s.ctx.env, self.find, self.anon, set(given))
        inner = Scope(path, self.resolve(s, el, ns, None) if ns else s.ns, ctx, dict(s.remaps),
                      env, s.depth + 1)  # fmt: skip
        self.check(inner, root)
        self.block(inner, root)
        unused = sorted(set(given) - _declared(root))
        if unused:
            raise self.fail(s, el, "", f"arg {unused[0]!r} is not declared in {path}")

    def el_node(self, s: Scope, el: Element) -> None:
        name = self.attr(s, el, "name")
        if not NAME.fullmatch(name):
            problem = f"invalid node name {name!r}: a letter, then letters, digits or '_'"
            raise self.fail(s, el, "name", problem)
        ns = s.ns
        if "ns" in el.attrs:
            ns = self.resolve(s, el, self.attr(s, el, "ns"), None)
        inner = s.inner(ns)
        full = f"{ns.rstrip('/')}/{name}"
        for attr in ("launch-prefix",):
            if attr in el.attrs:
                raise self.fail(s, el, attr, f"not supported by roboscale ({WHY[attr]})")
        cwd = self.attr(s, el, "cwd", "ROS_HOME")
        if cwd != "ROS_HOME":
            raise self.fail(s, el, "cwd", f"{cwd!r} is not supported; allowed: ROS_HOME")
        if self.flag(s, el, "clear_params", False):
            raise self.fail(s, el, "clear_params", "not supported by roboscale")
        respawn = self.flag(s, el, "respawn", False)
        required = self.flag(s, el, "required", False)
        if respawn and required:
            raise self.fail(s, el, "required", "a node is respawned or required, not both")
        self.attr(s, el, "output", "log")
        watchdog = self.node_children(inner, el, full)
        machine = self.attr(s, el, "machine", "") or self.default_machine
        data: dict[str, object] = {
            "ros_node": name,
            "pkg": self.attr(s, el, "pkg"),
            "type": self.attr(s, el, "type"),
            "ns": ns,
            "args": shlex.split(self.attr(s, el, "args", "")),
            "remap": inner.remaps,
            "env": inner.env,
            "restart": "permanent" if respawn else "temporary",
            "restart_delay_s": self.number(s, el, "respawn_delay", 0.0),
            "required": required,
        }
        if machine:
            data["machine"] = machine
            self.on_machine.append((s.file, el.line, machine))
        if watchdog is not None:
            data["watchdog"] = watchdog
        if any(n.ns == ns and n.name == name for n in self.nodes):
            raise self.fail(s, el, "name", f"a second node named {full}")
        self.nodes.append(_Node(data, el.line, ns, name, required))

    def node_children(self, s: Scope, el: Element, full: str) -> dict[str, object] | None:
        watchdog = None
        for child in el.children:
            self.check(s, child)
            if child.tag not in CHILDREN["node"]:
                allowed = ", ".join(sorted(CHILDREN["node"]))
                raise self.fail(s, child, "", f"not allowed inside <node>; allowed: {allowed}")
            if child.tag == "watchdog":
                watchdog = self.watchdog(s, child)
            elif self.wanted(s, child):
                if child.tag in ("param", "rosparam"):
                    getattr(self, "el_" + child.tag)(s, child, full)
                else:
                    getattr(self, "el_" + child.tag)(s, child)
        return watchdog

    def watchdog(self, s: Scope, el: Element) -> dict[str, object]:
        from pydantic import ValidationError

        from roboscale.runtime.launchmodels import Watchdog

        raw: dict[str, object] = {k: self.attr(s, el, k) for k in el.attrs}
        for key, value in raw.items():  # attributes are text; the spec's numbers are strict
            if key not in ("topic", "heartbeat_file") and isinstance(value, str):
                with contextlib.suppress(ValueError):
                    raw[key] = float(value)
        try:
            Watchdog.model_validate(raw)
        except ValidationError as e:
            err = e.errors()[0]
            attr = ".".join(str(p) for p in err["loc"])
            problem = str(err["msg"]).removeprefix("Value error, ")
            raise self.fail(s, el, attr, problem) from None
        return raw


def _auto(text: str) -> int | float | bool | str:
    """roslaunch's type of a param without type=: int, then float, then bool, else str."""
    for kind in (int, float):
        try:
            return kind(text.strip())
        except ValueError:
            continue
    if text.strip().lower() in ("true", "false"):
        return text.strip().lower() == "true"
    return text


def _dedent(text: str) -> str:
    lines = text.splitlines()
    indents = [len(x) - len(x.lstrip()) for x in lines if x.strip()]
    cut = min(indents, default=0)
    return "\n".join(x[cut:] for x in lines)


def _declared(root: Element) -> set[str]:
    found = set()
    pending = [root]
    while pending:
        el = pending.pop()
        if el.tag == "arg" and "name" in el.attrs:
            found.add(el.attrs["name"])
        pending += [c for c in el.children if c.tag in ("arg", "group")]
    return found


def read_roslaunch(
    path: Path,
    args: dict[str, str],
    find: Callable[[str], str] | None = None,
    master: str | None = None,
) -> tuple[dict[str, object], LineMap]:
    """A roslaunch file as a launch spec's data and the line of each part of it. With a
    `master` URI, that master is used (it has its /rosout, as roscore's) instead of a
    private rosmaster and /rosout, as roslaunch does when a master answers."""
    root = parse_xml(path)
    reader = _Reader(find)
    ctx = Context(dict(args), path.parent.resolve(), find=find, anon=reader.anon, passed=set(args))
    scope = Scope(path, "/", ctx)
    reader.check(scope, root)
    try:
        reader.block(scope, root)
    except (OSError, RecursionError) as e:
        raise UserError(f"{path}: {e}") from None
    unused = sorted(set(args) - _declared(root))
    if unused:
        raise SpecError(str(path), root.line, "", f"arg {unused[0]!r} is not declared here")
    for file, line, machine in reader.on_machine:  # <machine> may come after its nodes
        if problem := machine_problem(machine, reader.machines):
            raise SpecError(str(file), line, "node.machine", problem)
    return _spec(path, reader, master)


def _spec(path: Path, reader: _Reader, master: str | None) -> tuple[dict[str, object], LineMap]:
    name = re.sub(r"\W", "_", path.name.split(".")[0]) or "launch"
    name = name if NAME.fullmatch(name) else f"launch_{name}"
    lines: LineMap = {(): 1}
    nodes = _Group("nodes")
    if not master:
        rosout: dict[str, object] = {"ros_node": "rosout", "pkg": "rosout", "type": "rosout",
                                     "restart": "permanent"}  # fmt: skip
        nodes.children.append(_Node(rosout, 1, "/", "rosout", False))
    nodes_loc: tuple[str | int, ...] = ("children", 1)
    for node in reader.nodes:
        holder, loc = nodes, nodes_loc
        holder.required |= node.required
        for part in [p for p in node.ns.split("/") if p]:
            holder, loc = _sub(holder, loc, part, node.line, lines)
            holder.required |= node.required
        lines[(*loc, "children", len(holder.children))] = node.line
        holder.children.append(node)
    params = {k: v for k, (v, _, _) in reader.params.items()}
    for key, (_, _, line) in reader.params.items():
        lines[("ros", "params", key)] = line
    for machine, line in reader.machine_lines.items():
        lines[("ros", "machines", machine)] = line
    data: dict[str, object] = {
        "name": name,
        "strategy": "rest_for_one",
        "ros": {"master": master or "private", "params": params, "machines": reader.machines},
        "children": [{"ros_master": "master"}, nodes.data()],
    }
    return data, lines


def _sub(
    holder: _Group, loc: tuple[str | int, ...], part: str, line: int, lines: LineMap
) -> tuple[_Group, tuple[str | int, ...]]:
    for i, child in enumerate(holder.children):
        if isinstance(child, _Group) and child.name == part:
            return child, (*loc, "children", i)
    sub = _Group(part)
    loc = (*loc, "children", len(holder.children))
    holder.children.append(sub)
    lines[loc] = line
    return sub, loc
