"""Launch files read and checked: `read_launch(path)` reads a YAML launch file or
roslaunch XML (runtime/roslaunch_xml.py) into the `LaunchSpec` tree (runtime/launchmodels.py,
whose docstring shows the format), validates it and checks it whole (children named twice,
ROS nodes on undeclared machines, the bridge section); `explain` prints the tree.

Every mistake is a SpecError naming file, line and field, through
`roboscale.validation.to_spec_errors`. Nothing here imports the user's code or needs a
runtime: `build_tree` (runtime/launch.py) does that. The models are named here too:
`from roboscale.runtime.launchspec import LaunchSpec, RosNodeChild`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from roboscale.errors import SpecError, SpecErrors, UserError
from roboscale.runtime.bridgeconfig import FIELDS as BRIDGE_FIELDS
from roboscale.runtime.bridgeconfig import BridgeConfig, bridge_config, nearest_field
from roboscale.runtime.launchmodels import (
    KINDS,
    Child,
    ChildModel,
    CommandChild,
    LaunchSpec,
    Machine,
    NodeChild,
    ProcessChild,
    RemoteChild,
    Ros,
    RosMasterChild,
    RosNodeChild,
    SupervisorChild,
    Watchdog,
    Zygote,
    allowed_for,
    child_kind,
    child_name,
    machine_problem,
)
from roboscale.runtime.supervisor import Restart
from roboscale.validation import to_spec_errors
from roboscale.yamlfile import LineMap, load_yaml
from roboscale.yamlfile import dotted as _dotted

# The models are this module's API too: `from roboscale.runtime.launchspec import LaunchSpec`.
__all__ = [
    "KINDS",
    "XML_SUFFIXES",
    "Child",
    "ChildModel",
    "CommandChild",
    "LaunchFile",
    "LaunchSpec",
    "Machine",
    "NodeChild",
    "ProcessChild",
    "RemoteChild",
    "Ros",
    "RosMasterChild",
    "RosNodeChild",
    "SupervisorChild",
    "Watchdog",
    "Zygote",
    "child_name",
    "explain",
    "machine_problem",
    "read_launch",
]

XML_SUFFIXES = (".launch", ".xml")


@dataclass(frozen=True)
class LaunchFile:
    """A validated launch file: its spec and where it came from (for errors when built)."""

    path: Path
    spec: LaunchSpec
    lines: LineMap
    bridge: BridgeConfig | None

    @property
    def cursors(self) -> dict[str, Path]:
        """The cursor file of each durable import, relative paths from the file's folder."""
        return {t: self.path.parent / p for t, p in self.spec.cursors.items()}


def read_launch(
    path: Path,
    args: dict[str, str] | None = None,
    find: Callable[[str], str] | None = None,
    master: str | None = None,
) -> LaunchFile:
    """Read and validate a launch file, YAML or roslaunch XML (by its suffix).

    For XML only: `args` are roslaunch's command-line `name:=value` arguments, `find`
    resolves `$(find pkg)` (default: rospack) and `master` is the URI of a running ROS
    master to use instead of a private one."""
    if path.suffix in XML_SUFFIXES:
        from roboscale.runtime.roslaunch_xml import read_roslaunch

        data, lines = read_roslaunch(path, args or {}, find, master)
    else:
        if args or master:
            raise UserError(f"{path}: name:=value and --master are for roslaunch XML files")
        data, lines = load_yaml(path, "launch file")
    if not isinstance(data, dict):
        raise SpecError(str(path), 1, "", "a launch file is a mapping with name and children")
    errors: list[SpecError] = []
    try:
        spec = LaunchSpec.model_validate(data)
    except ValidationError as e:
        errors = to_spec_errors(e, str(path), lines, LaunchSpec, allowed=allowed_for).errors
        errors = [_standby_hint(error) for error in errors]
        spec = None
    bridge = _bridge(data, path, lines, errors)
    if spec is not None:
        errors += _duplicates(spec, (), path, lines)
        machines = spec.ros.machines if spec.ros is not None else {}
        errors += _machines(spec, machines, (), path, lines)
        errors += _standbys(spec, spec.zygote is not None, (), path, lines)
    if errors:
        raise SpecErrors(sorted(errors, key=lambda x: (x.line or 0, x.field)))
    assert spec is not None
    return LaunchFile(path, spec, lines, bridge)


def _duplicates(
    sup: LaunchSpec | SupervisorChild, loc: tuple[str | int, ...], path: Path, lines: LineMap
) -> list[SpecError]:
    """A child named as an earlier sibling, at its own line."""
    found, seen = [], set()
    for i, child in enumerate(sup.children):
        here = (*loc, "children", i)
        if (name := child_name(child)) in seen:
            found.append(SpecError(str(path), _line(lines, here), _dotted(here),
                                   f"a second child named {name!r}"))  # fmt: skip
        seen.add(name)
        if isinstance(child, SupervisorChild):
            found += _duplicates(child, here, path, lines)
    return found


def _machines(
    sup: LaunchSpec | SupervisorChild,
    machines: Mapping[str, Machine],
    loc: tuple[str | int, ...],
    path: Path,
    lines: LineMap,
) -> list[SpecError]:
    """A ROS node on a machine that is not declared, at its own line."""
    found = []
    for i, child in enumerate(sup.children):
        here = (*loc, "children", i)
        if isinstance(child, SupervisorChild):
            found += _machines(child, machines, here, path, lines)
            continue
        machine = child.machine if isinstance(child, RosNodeChild) else None
        if machine is not None and (problem := machine_problem(machine, machines)):
            where = (*here, "machine")
            found.append(SpecError(str(path), _line(lines, where), _dotted(where), problem))
    return found


def _standby_hint(error: SpecError) -> SpecError:
    """`standby` on a child that cannot have one says which children can."""
    if error.field.endswith(".standby") and error.problem.startswith("unknown field"):
        return SpecError(error.path, error.line, error.field,
                         "only a process child (a Python target forked from the zygote) "
                         "has a warm standby")  # fmt: skip
    return error


def _standbys(
    sup: LaunchSpec | SupervisorChild,
    zygote: bool,
    loc: tuple[str | int, ...],
    path: Path,
    lines: LineMap,
) -> list[SpecError]:
    """A standby that would never be used, at its own line: without a zygote (the node
    would start in a fresh interpreter each time) or on a child never restarted."""
    found = []
    for i, child in enumerate(sup.children):
        here = (*loc, "children", i)
        if isinstance(child, SupervisorChild):
            found += _standbys(child, zygote, here, path, lines)
        if not isinstance(child, ProcessChild) or not child.standby:
            continue
        where = (*here, "standby")
        if not zygote:
            problem = "a warm standby is forked by the zygote: add zygote: {preload: [...]}"
        elif child.restart is Restart.TEMPORARY:
            problem = (
                "a temporary child is never restarted, its standby would idle: "
                "restart: permanent or transient, or no standby"
            )
        else:
            continue
        found.append(SpecError(str(path), _line(lines, where), _dotted(where), problem))
    return found


def _bridge(
    data: dict[str, object], path: Path, lines: LineMap, errors: list[SpecError]
) -> BridgeConfig | None:
    """The `bridge:` section, with the top-level `security:` applying to it."""
    raw, security = data.get("bridge"), data.get("security")

    def error(loc: tuple[str, ...], problem: str) -> None:
        errors.append(SpecError(str(path), _line(lines, loc), ".".join(loc), problem))

    if raw is None:
        if security is not None:
            error(("security",), "secures the bridge: add a bridge section")
        return None
    if not isinstance(raw, dict):
        return None  # the model said so
    unknown = [key for key in raw if key not in BRIDGE_FIELDS]
    for key in unknown:  # each at its own line (bridge_config names the first only)
        close = nearest_field(key)
        guess = f"; did you mean '{close}'?" if close else ";"
        error(("bridge", str(key)), f"unknown field{guess} allowed: {', '.join(BRIDGE_FIELDS)}")
    if unknown:
        return None
    try:
        config = bridge_config(
            {**raw, "security": security} if security is not None else raw, "", path.parent
        )
    except UserError as e:  # "<field>: <field>: problem": the deepest field with a line
        parts = str(e).removeprefix(": ").split(": ")
        loc: tuple[str, ...] = ("security",) if parts[0] == "security" else ("bridge",)
        parts = parts[1:] if parts[0] == "security" else parts
        while len(parts) > 1 and (*loc, parts[0]) in lines:
            loc, parts = (*loc, parts[0]), parts[1:]
        error(loc, ": ".join(parts))
        return None
    given = data.get("cursors")
    cursors = given if isinstance(given, dict) else {}  # not a mapping: the model said so
    for topic in config.durable:
        if topic in config.imports and topic not in cursors:
            example = f"{{{topic}: {topic.strip('/').replace('/', '_')}.cursor}}"
            error(("bridge", "durable"), f"durable import {topic} needs a cursor file: "
                  f"add cursors: {example}")  # fmt: skip
    return config


def _line(lines: LineMap, loc: tuple[str | int, ...]) -> int | None:
    for n in range(len(loc), -1, -1):
        if loc[:n] in lines:
            return lines[loc[:n]]
    return None


# -- explain ---------------------------------------------------------------------------------
def explain(spec: LaunchSpec) -> str:
    """The supervision tree a launch file became, one line per child."""
    head = f"{spec.name}  supervisor {_policy(spec)}"
    lines = [head]
    if spec.ros is not None:
        lines.append(f"  ros: master {spec.ros.master}, {len(spec.ros.params)} params")
        lines += [f"    param {k} = {v!r}" for k, v in sorted(spec.ros.params.items())]
    if spec.zygote is not None:
        lines.append(f"  zygote: preload {', '.join(spec.zygote.preload) or 'nothing'}")
    if spec.bridge is not None:
        lines.append(f"  bridge: {', '.join(f'{k} {v}' for k, v in spec.bridge.items())}")
    _explain_children(spec.children, "  ", lines)
    return "\n".join(lines)


def _policy(sup: LaunchSpec | SupervisorChild) -> str:
    return f"{sup.strategy.value}, at most {sup.intensity} restarts in {sup.period_s:g} s"


def _explain_children(children: list[ChildModel], indent: str, out: list[str]) -> None:
    for child in children:
        kind = child_kind(child) or "?"
        name = child_name(child)
        if isinstance(child, SupervisorChild):
            out.append(f"{indent}{name}  supervisor {_policy(child)}  {_restart(child)}")
            _explain_children(child.children, indent + "  ", out)
            continue
        out.append(f"{indent}{name}  {kind} {_what(child)}  {_restart(child)}")
        watchdog = getattr(child, "watchdog", None)
        if watchdog is not None:
            shown = watchdog.model_dump(exclude_none=True)
            out.append(f"{indent}  watchdog {', '.join(f'{k}={v}' for k, v in shown.items())}")


def _what(child: ChildModel) -> str:
    if isinstance(child, NodeChild):
        return child.class_
    if isinstance(child, ProcessChild):
        return child.target
    if isinstance(child, CommandChild):
        return " ".join(child.argv)
    if isinstance(child, RosMasterChild):
        return f"rosmaster port {child.port or 'free'}"
    if isinstance(child, RosNodeChild):
        remaps = "".join(f" {k}:={v}" for k, v in child.remap.items())
        where = f" on {child.machine}" if child.machine else ""
        return f"{child.ros_name} ({child.pkg}/{child.type}{remaps}){where}"
    if isinstance(child, RemoteChild):
        return child.node_path
    return ""


def _restart(child: ChildModel) -> str:
    parts = [child.restart.value]
    if isinstance(child, ProcessChild) and child.standby:
        parts.append("warm standby")
    if child.restart_delay_s:
        parts.append(f"delay {child.restart_delay_s:g} s")
    if child.required:
        parts.append("required: its end stops the tree")
    if not isinstance(child, SupervisorChild):
        shutdown = "infinity" if child.shutdown_s is None else f"{child.shutdown_s:g} s"
        parts.append(f"shutdown {shutdown}")
    return "[" + ", ".join(parts) + "]"
