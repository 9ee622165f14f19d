"""Launch files built and run: `build_tree(launch, runtime)` makes the supervision tree of a
validated `LaunchFile` (runtime/launchspec.py, pure data), `run_launch` runs it.

Building is the only step that imports the user's classes (`node` children) and makes what
the children share (the launch's zygote, the liveliness watcher, a ROS work folder, a free
port for a private rosmaster). It turns each child of the file into a `ChildSpec` carrying a
start recipe (runtime/childspec.py), never a handle: the supervisor builds each instance
from its recipe when it starts the child, and again at every restart. The kinds: in-process
nodes, process nodes (forked from the zygote), commands, a private rosmaster, ROS nodes run
as roslaunch runs them, and remote nodes seen over the bridge's Zenoh liveliness. A
`watchdog:` wraps a process child's recipe in `WatchedRecipe` (runtime/watchdog.py).
`required` children are the supervisor's significant children: their end stops the tree,
as roslaunch's required nodes.
"""

from __future__ import annotations

import asyncio
import importlib
import math
import shutil
import signal
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roboscale.errors import SpecError, UserError
from roboscale.runtime import launchspec as ls
from roboscale.runtime.bridge import Bridge
from roboscale.runtime.bridgeconfig import BridgeConfig
from roboscale.runtime.child import ChildRecipe, ChildStartError
from roboscale.runtime.events import JsonLinesRecorder, SupervisionEvent, log_event
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.launchspec import LaunchFile, read_launch
from roboscale.runtime.node import Node
from roboscale.runtime.nodehandle import NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Recipe, Restart, Supervisor, SupervisorRecipe
from roboscale.runtime.watchdog import Limits, WatchedRecipe
from roboscale.runtime.zenoh_config import remove_orphaned_segments
from roboscale.yamlfile import dotted

if TYPE_CHECKING:  # built only when a launch file has them: imported when built
    from roboscale.runtime.liveliness import LivelinessWatcher
    from roboscale.runtime.rosremote import Remotes
    from roboscale.runtime.zygote import Zygote

Loc = tuple[str | int, ...]


@dataclass
class Tree:
    """A built launch: its root supervisor and what it owns beside it (closed by `close`)."""

    root: Supervisor
    bridge: Bridge | None = None
    zygote: Zygote | None = None
    workdir: Path | None = None
    master_uri: str | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)

    def close(self) -> None:
        for close in reversed(self.closers):
            close()
        self.closers.clear()


class _Builder:
    def __init__(self, launch: LaunchFile, runtime: Runtime, tree: Tree) -> None:
        self.launch = launch
        self.rt = runtime
        self.tree = tree
        self.watcher: LivelinessWatcher | None = None
        self._remotes: Remotes | None = None

    def error(self, loc: Loc, problem: str) -> SpecError:
        line = ls._line(self.launch.lines, loc)
        field = dotted(loc)
        if self.launch.path.suffix in ls.XML_SUFFIXES:  # name the element, as its author wrote
            field = "node." + str(loc[-1]) if isinstance(loc[-1], str) else "node"
        return SpecError(str(self.launch.path), line, field, problem)

    # -- supervisors and children ------------------------------------------------------------
    def supervisor(
        self, sup: ls.LaunchSpec | ls.SupervisorChild, name: str, loc: Loc
    ) -> SupervisorRecipe:
        children = [self.child(c, (*loc, "children", i)) for i, c in enumerate(sup.children)]
        limit = Intensity(sup.intensity, sup.period_s)
        return SupervisorRecipe(name, children, strategy=sup.strategy, intensity=limit)

    def child(self, child: ls.ChildModel, loc: Loc) -> ChildSpec:
        name = ls.child_name(child)
        recipe: ChildRecipe
        if isinstance(child, ls.SupervisorChild):
            recipe = self.supervisor(child, name, loc)
        elif isinstance(child, ls.NodeChild):
            recipe = self.node(child, loc)
        elif isinstance(child, ls.RemoteChild):
            recipe = self.remote(child, loc)
        else:
            recipe = self.process(child, loc)
        restart = child.restart
        if child.required and restart is Restart.PERMANENT:
            restart = Restart.TEMPORARY  # required and never restarted (roslaunch)
        shutdown = math.inf if child.shutdown_s is None else child.shutdown_s
        return ChildSpec(
            recipe, restart, shutdown,
            restart_delay_s=child.restart_delay_s, significant=child.required,
        )  # fmt: skip

    def node(self, child: ls.NodeChild, loc: Loc) -> NodeRecipe:
        cls = self.import_node(child.class_, (*loc, "class"))
        return NodeRecipe(
            child.node, cls, dict(child.params),
            heartbeat_s=child.heartbeat_s, callback_deadline_s=child.deadline_s,
        )  # fmt: skip

    def import_node(self, target: str, loc: Loc) -> type[Node]:
        module_name, _, attr = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except Exception as e:
            raise self.error(loc, f"cannot import {module_name}: {type(e).__name__}: {e}") from None
        cls = getattr(module, attr, None)
        if not (isinstance(cls, type) and issubclass(cls, Node)):
            raise self.error(loc, f"{target} is not a subclass of roboscale.runtime.node.Node")
        return cls

    def remote(self, child: ls.RemoteChild, loc: Loc) -> Recipe:
        from roboscale.runtime.liveliness import LivelinessWatcher, RemoteNodeChild

        bridge = self.tree.bridge
        if bridge is None or bridge.session is None:
            raise self.error(loc, "a remote child is seen over the bridge: add a bridge section")
        if self.watcher is None:
            self.watcher = LivelinessWatcher(self.rt, bridge.session, bridge.config.prefix)
            self.tree.closers.append(self.watcher.close)  # before the bridge's session
        args = (self.watcher, child.remote, child.node_path)
        return Recipe(
            child.remote, RemoteNodeChild, args, {"ready_timeout_s": child.ready_timeout_s}
        )

    def process(
        self,
        child: ls.ProcessChild | ls.CommandChild | ls.RosMasterChild | ls.RosNodeChild,
        loc: Loc,
    ) -> ChildRecipe:
        from roboscale.runtime.process import CommandChild, ProcessNode

        recipe: Recipe
        if isinstance(child, ls.ProcessChild):
            recipe = Recipe(
                child.process, ProcessNode, (child.process, child.target, dict(child.config)),
                {"zygote": self.zygote(), "env": dict(child.env),
                 "ready_timeout_s": child.ready_timeout_s, "standby": child.standby},
            )  # fmt: skip
        elif isinstance(child, ls.CommandChild):
            cwd = Path(child.cwd) if child.cwd is not None else None
            recipe = Recipe(
                child.command, CommandChild, (child.command, child.argv),
                {"env": dict(child.env), "cwd": cwd, "ready_line": child.ready_line,
                 "ready_timeout_s": child.ready_timeout_s},
            )  # fmt: skip
        elif isinstance(child, ls.RosMasterChild):
            recipe = self.ros_master(child, loc)
        else:
            recipe = self.ros_node(child, loc)
        watchdog = getattr(child, "watchdog", None)
        if watchdog is None:
            return recipe
        if watchdog.topic is not None and self.tree.master_uri is None:
            raise self.error((*loc, "watchdog", "topic"), "a topic watchdog needs a ROS master")
        return WatchedRecipe(recipe, Limits(**watchdog.model_dump()), self.tree.master_uri)

    def zygote(self) -> Zygote | None:
        spec = self.launch.spec.zygote
        if spec is None:
            return None
        if self.tree.zygote is None:
            from roboscale.runtime.zygote import Zygote, ZygoteError

            zygote = Zygote(spec.preload)
            try:
                zygote.start()
            except ZygoteError as e:  # most often a module it cannot import: the file's
                allowed = "modules importable here (check PYTHONPATH and the virtualenv)"
                raise self.error(("zygote", "preload"), f"{e}; allowed: {allowed}") from None
            self.tree.zygote = zygote
            self.tree.closers.append(zygote.close)
        return self.tree.zygote

    # -- ROS 1 -------------------------------------------------------------------------------
    def workdir(self) -> Path:
        if self.tree.workdir is None:
            self.tree.workdir = Path(tempfile.mkdtemp(prefix="roboscale-launch-"))
            workdir = self.tree.workdir
            self.tree.closers.append(lambda: shutil.rmtree(workdir, ignore_errors=True))
        return self.tree.workdir

    def ros_master(self, child: ls.RosMasterChild, loc: Loc) -> Recipe:
        from roboscale.runtime.rosnode import RosMaster, free_port, ros_env

        name = child.ros_master
        ros = self.launch.spec.ros or ls.Ros()
        if ros.master != "private":  # a given master: this child waits for it, sets params
            env = ros_env(ros.master, self.workdir() / "ros_home")
            return Recipe(name, RosMaster, (name, ros.master, ros.params, env), {"port": None})
        if self.tree.master_uri is not None:
            raise self.error(loc, "a second ROS master")
        port = child.port or free_port()
        uri = f"http://{self.remotes().master_host()}:{port}/"
        self.tree.master_uri = uri
        env = ros_env(uri, self.workdir() / "ros_home", self.remotes().local_env())
        log = self.workdir() / f"{name}.log"
        return Recipe(name, RosMaster, (name, uri, ros.params, env), {"port": port, "log": log})

    def ros_node(self, child: ls.RosNodeChild, loc: Loc) -> Recipe:
        from roboscale.runtime.process import CommandChild
        from roboscale.runtime.rosnode import find_node, node_argv, ros_env

        if self.tree.master_uri is None:
            raise self.error(loc, "a ROS node needs a ROS master: a ros_master child before it")
        log = self.workdir() / f"{child.ros_name.strip('/').replace('/', '.')}.log"
        if child.machine is not None and self.remotes().elsewhere(child.machine):
            try:  # started on its machine over ssh
                return self.remotes().node(child, self.tree.master_uri, log)
            except ValueError as e:
                raise self.error((*loc, "env"), str(e)) from None
        extra = {**self.remotes().local_env(), **child.env}
        if child.ns not in ("", "/"):
            extra["ROS_NAMESPACE"] = child.ns
        env = ros_env(self.tree.master_uri, self.workdir() / "ros_home", extra)
        try:
            program = find_node(child.pkg, child.type, env)
        except UserError as e:
            raise self.error((*loc, "type"), str(e)) from None
        argv = node_argv(program, child.ros_node, child.args, child.remap)
        kwargs = {"env": env, "log": log, "ready_timeout_s": child.ready_timeout_s}
        return Recipe(child.ros_node, CommandChild, (child.ros_node, argv), kwargs)

    def remotes(self) -> Remotes:
        """The launch's machines elsewhere (runtime/rosremote.py)."""
        if self._remotes is None:
            from roboscale.runtime.rosremote import Remotes

            self._remotes = Remotes(self.launch)
        return self._remotes


def build_tree(launch: LaunchFile, runtime: Runtime, bridge: Bridge | None = None) -> Tree:
    """The live tree of a validated launch file (not started). `bridge`, when given and
    open, is where remote children are seen. On an error, whatever was made is closed."""
    spec = launch.spec
    tree = Tree(Supervisor(runtime, spec.name), bridge)
    if spec.ros is not None and spec.ros.master != "private":
        tree.master_uri = spec.ros.master
    builder = _Builder(launch, runtime, tree)
    try:
        root = builder.supervisor(spec, spec.name, ())
        tree.root = Supervisor(
            runtime, root.name, root.children, strategy=root.strategy, intensity=root.intensity
        )
    except BaseException:
        tree.close()
        raise
    return tree


def load_launch(path: Path, runtime: Runtime) -> Supervisor:
    """Read, validate and build a launch file's tree (not started)."""
    return build_tree(read_launch(path), runtime).root


def load_launch_file(path: Path, runtime: Runtime) -> tuple[Supervisor, BridgeConfig | None]:
    """A launch file's tree (not started) and its bridge's settings, if it has a bridge.
    What the tree owns beside it (a zygote, a ROS work folder) needs `build_tree`'s
    `Tree.close`: use that when the file has them."""
    launch = read_launch(path)
    return build_tree(launch, runtime).root, launch.bridge


def has_remote(children: list[ls.ChildModel]) -> bool:
    return any(
        isinstance(c, ls.RemoteChild)
        or (isinstance(c, ls.SupervisorChild) and has_remote(c.children))
        for c in children
    )


def format_status(rows: Sequence[Mapping[str, object]]) -> str:
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
    path: Path,
    *,
    events: Path | None = None,
    session: LaunchSession | None = None,
    args: dict[str, str] | None = None,
    master: str | None = None,
) -> int:
    """`roboscale launch FILE`: validate, start in order, run until Ctrl-C, stop in reverse.

    Returns 0 after a clean Ctrl-C/SIGTERM shutdown, 1 when the root supervisor gave up,
    or the code `session` returned (the tree is stopped first). A session still running
    at the end is cancelled; its exception is raised after the tree is stopped.
    """
    launch = read_launch(
        path, args, master=master
    )  # every error is reported before anything starts
    rt = Runtime()
    rt.subscribers.append(log_event)
    recorder = JsonLinesRecorder(events) if events is not None else None
    if recorder is not None:
        rt.subscribers.append(recorder)
    # Remote children are seen over the bridge's liveliness: then it opens first, on
    # zenoh-python (the native link carries data, not liveliness).
    remote = has_remote(launch.spec.children)
    bridge = (
        Bridge(rt, launch.bridge, cursors=launch.cursors, liveliness=remote)
        if launch.bridge
        else None
    )
    early = bridge is not None and remote
    tree: Tree | None = None

    async def main() -> int:
        nonlocal tree
        if early:
            assert bridge is not None
            await rt.loop.run_in_executor(None, bridge.open)
        tree = await rt.loop.run_in_executor(None, build_tree, launch, rt, bridge)
        root = tree.root
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            rt.loop.add_signal_handler(sig, stop.set)
        try:
            await root.start_async()
        except ChildStartError as e:  # every started child was stopped again, in order
            raise UserError(f"{path}: the tree did not start: {e}") from None
        if bridge is not None and not early:  # the nodes subscribe first: no sample before an inbox
            try:
                await rt.loop.run_in_executor(None, bridge.open)
            except UserError:
                await root.stop_async()
                raise
        assert root.ended is not None
        # Futures of different results, waited on together (asyncio.wait's type needs Any).
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
            if bridge is not None and not early:
                await rt.loop.run_in_executor(None, bridge.close)
            if ended not in done:
                await root.stop_async()
            if early and bridge is not None:  # remote children were seen over it: after them
                tree.close()
                await rt.loop.run_in_executor(None, bridge.close)
        return 0 if code is None else code

    try:
        return rt.run(main())
    finally:
        if bridge is not None and bridge.session is not None:
            bridge.close()
        if tree is not None:
            tree.close()
        _sweep_shared_memory(rt)
        rt.close()
        if recorder is not None:
            recorder.close()


def _sweep_shared_memory(rt: Runtime) -> None:
    """Remove the Zenoh segments the launch's ended processes left (a killed process
    node leaves its pools: docs/runtime.md): Zenoh itself removes them only when the
    user's next process first uses shared memory. Segments a live process holds stay."""
    swept = remove_orphaned_segments()
    if swept:
        detail = f"removed {len(swept)} Zenoh shared-memory segments no process holds"
        rt.emit(SupervisionEvent("shared_memory_swept", "launch", "", "", detail))
