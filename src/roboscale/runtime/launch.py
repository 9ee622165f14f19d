"""Launch files: a validated tree of supervisors, nodes and commands, built and run.

    name: robot                     # the root supervisor
    strategy: one_for_one           # one_for_one | one_for_all | rest_for_one
    intensity: 10                   # at most 10 restarts ...
    period_s: 5                     # ... within 5 s, then give up
    children:
      - node: camera                # an in-process node
        class: mypkg.camera:Camera  # package.module:Class, a subclass of runtime.node.Node
        params: {rate_hz: 30}
        restart: permanent          # permanent | transient | temporary
        shutdown_s: 5               # graceful stop, then kill; 0 = brutal_kill
        heartbeat_s: 1.0            # optional liveness
        deadline_s: 0.5             # optional callback deadline
      - supervisor: faces           # a sub-supervisor: same keys as the root
        children: [...]
      - command: talker             # an OS process (runtime.process.CommandChild)
        argv: [rosrun, pkg, talker]
        ready_line: "ready"         # optional regex on its output meaning "ready"
    bridge:                         # optional: topics to and from other processes (Zenoh)
      listen: [tcp/127.0.0.1:7447]
      export: [/camera/image]
    security: {...}                 # optional: the bridge's users, TLS and access rules
                                    # (runtime/security.py, docs/security.md)

Every mistake is a SpecError naming file, line, field and what is allowed.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import re
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from roboscale.errors import SpecError, SpecErrors, UserError
from roboscale.runtime.bridge import Bridge
from roboscale.runtime.bridgeconfig import BridgeConfig, bridge_config
from roboscale.runtime.child import ChildHandle, ChildStartError
from roboscale.runtime.events import JsonLinesRecorder, log_event
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.names import is_valid_name
from roboscale.runtime.node import Node, NodeHandle
from roboscale.runtime.supervisor import ChildSpec, Restart, Strategy, Supervisor
from roboscale.yamlfile import LineMap, dotted, line_for, load_yaml

# chaos.py reads chaos; bridge and security: runtime/bridgeconfig.py, runtime/security.py
_SUP_KEYS = {"name", "strategy", "intensity", "period_s", "children", "chaos", "bridge", "security"}
_CHILD_KEYS = {
    "node": {"node", "class", "params", "restart", "shutdown_s", "heartbeat_s", "deadline_s"},
    "supervisor": {"supervisor", "strategy", "intensity", "period_s", "children", "restart",
                   "shutdown_s"},
    "command": {"command", "argv", "ready_line", "env", "restart", "shutdown_s"},
}  # fmt: skip


class _Checker:
    """Walks the parsed YAML, collecting every error with its line."""

    def __init__(self, path: Path, lines: LineMap) -> None:
        self.file = str(path)
        self.lines = lines
        self.errors: list[SpecError] = []

    def error(self, loc: tuple[str | int, ...], problem: str) -> None:
        self.errors.append(SpecError(self.file, line_for(loc, self.lines), dotted(loc), problem))

    def keys(self, data: dict[str, Any], loc: tuple[str | int, ...], allowed: set[str]) -> None:
        for key in data:
            if key not in allowed:
                self.error(
                    (*loc, key), f"unknown field; allowed here: {', '.join(sorted(allowed))}"
                )

    def name(self, value: Any, loc: tuple[str | int, ...]) -> str:
        if not isinstance(value, str) or not is_valid_name(value) or "/" in value:
            self.error(loc, f"invalid name {value!r}: a letter, then letters, digits or '_'")
            return "invalid"
        return value

    def enum(self, data: dict[str, Any], key: str, loc: tuple[str | int, ...], kind: Any) -> Any:
        value = data.get(key)
        if value is None:
            return None
        try:
            return kind(value)
        except ValueError:
            allowed = " | ".join(k.value for k in kind)
            self.error((*loc, key), f"{value!r} is not allowed; allowed: {allowed}")
            return None

    def number(
        self, data: dict[str, Any], key: str, loc: tuple[str | int, ...], minimum: float
    ) -> float | None:
        value = data.get(key)
        if value is None:
            return None
        whole = key == "intensity"
        kind = "a whole number" if whole else "a finite number"
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or value < minimum
            or (whole and not float(value).is_integer())
        ):
            self.error((*loc, key), f"{value!r} is not allowed; {kind} >= {minimum:g}")
            return None
        return float(value)


def load_launch(path: Path, runtime: Runtime) -> Supervisor:
    """Parse and validate a launch file into a supervision tree (not started)."""
    return load_launch_file(path, runtime)[0]


def load_launch_file(path: Path, runtime: Runtime) -> tuple[Supervisor, BridgeConfig | None]:
    """The supervision tree of a launch file and its bridge, if it has one (not started)."""
    data, lines = load_yaml(path, "launch file")
    check = _Checker(path, lines)
    if not isinstance(data, dict):
        raise SpecError(str(path), 1, "", "a launch file is a mapping with name and children")
    root = _supervisor(check, data, (), runtime, data.get("name"))
    bridge = _bridge(check, data, path)
    if check.errors:
        raise SpecErrors(check.errors)
    assert root is not None
    return root, bridge


def _bridge(check: _Checker, data: dict[str, Any], path: Path) -> BridgeConfig | None:
    """The `bridge:` section, with the top-level `security:` applying to it."""
    raw, security = data.get("bridge"), data.get("security")
    if raw is None:
        if security is not None:
            check.error(("security",), "secures the bridge: add a bridge section")
        return None
    if not isinstance(raw, dict):
        check.error(("bridge",), "a mapping: listen, connect, export, import...")
        return None
    if "durable" in raw:
        check.error(("bridge", "durable"), "durable topics need cursor files: use the Python API")
        return None
    try:
        return bridge_config(
            {**raw, "security": security} if security is not None else raw, "", path.parent
        )
    except UserError as e:  # "<field>: <field>: problem": the deepest field with a line
        parts = str(e).removeprefix(": ").split(": ")
        loc: tuple[str | int, ...] = ("security",) if parts[0] == "security" else ("bridge",)
        parts = parts[1:] if parts[0] == "security" else parts
        while len(parts) > 1 and (*loc, parts[0]) in check.lines:
            loc, parts = (*loc, parts[0]), parts[1:]
        check.error(loc, ": ".join(parts))
        return None


def _supervisor(
    check: _Checker, data: dict[str, Any], loc: tuple[str | int, ...], rt: Runtime, name: Any
) -> Supervisor | None:
    name = check.name(name, (*loc, "name") if not loc else (*loc, "supervisor"))
    strategy = check.enum(data, "strategy", loc, Strategy) or Strategy.ONE_FOR_ONE
    max_r = check.number(data, "intensity", loc, 0)
    period = check.number(data, "period_s", loc, 0.001)
    limit = Intensity(int(max_r) if max_r is not None else 1, period or 5.0)
    children = data.get("children")
    if not isinstance(children, list) or not children:
        check.error((*loc, "children"), "required: a list of node, supervisor or command entries")
        children = []
    specs = [_child(check, c, (*loc, "children", i), rt) for i, c in enumerate(children)]
    if loc == ():
        check.keys(data, loc, _SUP_KEYS)
    sup = Supervisor(rt, name, strategy=strategy, intensity=limit)
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        if spec is None:
            continue
        if spec.handle.name in seen:
            check.error((*loc, "children", i), f"a second child named {spec.handle.name!r}")
            continue
        seen.add(spec.handle.name)
        sup.add_child(spec)
    return sup


def _child(check: _Checker, data: Any, loc: tuple[str | int, ...], rt: Runtime) -> ChildSpec | None:
    kinds = [k for k in _CHILD_KEYS if isinstance(data, dict) and k in data]
    if len(kinds) != 1:
        check.error(loc, "each child has exactly one of: node, supervisor, command")
        return None
    kind = kinds[0]
    check.keys(data, loc, _CHILD_KEYS[kind])
    name = check.name(data[kind], (*loc, kind))
    restart = check.enum(data, "restart", loc, Restart) or Restart.PERMANENT
    default_shutdown = math.inf if kind == "supervisor" else 5.0
    shutdown = check.number(data, "shutdown_s", loc, 0)
    handle: ChildHandle | None
    if kind == "node":
        handle = _node(check, data, loc, rt, name)
    elif kind == "supervisor":
        handle = _supervisor(check, data, loc, rt, name)
    else:
        handle = _command(check, data, loc, name)
    if handle is None:
        return None
    return ChildSpec(handle, restart, default_shutdown if shutdown is None else shutdown)


def _node(
    check: _Checker, data: dict[str, Any], loc: tuple[str | int, ...], rt: Runtime, name: str
) -> NodeHandle | None:
    cls = _import_node(check, data.get("class"), (*loc, "class"))
    params = data.get("params", {})
    if not isinstance(params, dict):
        check.error((*loc, "params"), "a mapping of parameter names to values")
        params = {}
    heartbeat = check.number(data, "heartbeat_s", loc, 0.001)
    deadline = check.number(data, "deadline_s", loc, 0.001)
    if cls is None:
        return None
    return NodeHandle(rt, name, cls, params, heartbeat_s=heartbeat, callback_deadline_s=deadline)


def _import_node(check: _Checker, target: Any, loc: tuple[str | int, ...]) -> type[Node] | None:
    if target is None:
        check.error(loc, "required: the node's class, package.module:Class")
        return None
    if not isinstance(target, str) or target.count(":") != 1:
        check.error(loc, f"{target!r} is not allowed; write package.module:Class")
        return None
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as e:
        check.error(loc, f"cannot import {module_name}: {type(e).__name__}: {e}")
        return None
    cls = getattr(module, attr, None)
    if not (isinstance(cls, type) and issubclass(cls, Node)):
        check.error(loc, f"{target} is not a subclass of roboscale.runtime.node.Node")
        return None
    return cls


def _command(
    check: _Checker, data: dict[str, Any], loc: tuple[str | int, ...], name: str
) -> ChildHandle | None:
    argv = data.get("argv")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
        check.error((*loc, "argv"), "required: a non-empty list of strings (program, arguments)")
        return None
    env = data.get("env")
    if env is not None and not (
        isinstance(env, dict) and all(isinstance(v, str) for v in env.values())
    ):
        check.error((*loc, "env"), "a mapping of variable names to strings")
        return None
    ready = data.get("ready_line")
    if ready is not None and (problem := _regex_problem(ready)):
        check.error((*loc, "ready_line"), f"{ready!r} is not allowed ({problem}); allowed: {_RE}")
        return None
    from roboscale.runtime.process import CommandChild  # OS processes only when asked for

    return CommandChild(name, argv, env=env, ready_line=ready)


_RE = "a Python regular expression matched against each line of output"


def _regex_problem(value: Any) -> str:
    """Why `value` is not a regular expression; empty when it is one."""
    if not isinstance(value, str):
        return "not a string"
    try:
        re.compile(value)
    except re.error as e:
        return str(e)
    return ""


def format_status(rows: list[dict[str, Any]]) -> str:
    """The `roboscale status` table of Supervisor.status() rows."""
    header = ("path", "kind", "state", "restarts", "delivered", "queued", "dropped", "last exit")
    keys = ("path", "kind", "state", "restarts", "delivered", "queued", "dropped", "last_exit")
    table = [header, *[tuple(str(r[k]) for k in keys) for r in rows]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    )


# Runs beside a started tree (status file, chaos); an int result ends the launch with it.
LaunchSession = Callable[[Runtime, Supervisor], Awaitable[int | None]]


def run_launch(
    path: Path, *, events: Path | None = None, session: LaunchSession | None = None
) -> int:
    """`roboscale launch FILE`: validate, start in order, run until Ctrl-C, stop in reverse.

    Returns 0 after a clean Ctrl-C/SIGTERM shutdown, 1 when the root supervisor gave up,
    or the code `session` returned (the tree is stopped first). A session still running
    at the end is cancelled; its exception is raised after the tree is stopped.
    """
    rt = Runtime()
    rt.subscribers.append(log_event)
    recorder = JsonLinesRecorder(events) if events is not None else None
    if recorder is not None:
        rt.subscribers.append(recorder)
    root, bridge_cfg = load_launch_file(path, rt)  # every error is reported before starting
    bridge = Bridge(rt, bridge_cfg) if bridge_cfg is not None else None

    async def main() -> int:
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            rt.loop.add_signal_handler(sig, stop.set)
        try:
            await root.start_async()
        except ChildStartError as e:  # every started child was stopped again, in order
            raise UserError(f"{path}: the tree did not start: {e}") from None
        if bridge is not None:  # the nodes subscribe first: no sample comes before an inbox
            try:
                await rt.loop.run_in_executor(None, bridge.open)
            except UserError:
                await root.stop_async()
                raise
        assert root.ended is not None
        stopping: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        ended: asyncio.Future[Any] = root.ended
        extra = asyncio.ensure_future(session(rt, root)) if session is not None else None
        watched = {ended, stopping} if extra is None else {ended, stopping, extra}
        done, _ = await asyncio.wait(watched, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        try:
            if ended in done:
                return 1
            code = extra.result() if extra is not None and extra in done else None
        finally:
            if extra is not None and not extra.done():
                extra.cancel()
                await asyncio.gather(extra, return_exceptions=True)
            if bridge is not None:
                await rt.loop.run_in_executor(None, bridge.close)
            if ended not in done:
                await root.stop_async()
        return 0 if code is None else code

    try:
        return rt.run(main())
    finally:
        rt.close()
        if recorder is not None:
            recorder.close()
