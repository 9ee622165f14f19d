"""How a supervisor holds an in-process node: `NodeRecipe`, the node as plain data in a
child spec, and `NodeHandle`, one running instance built fresh from the recipe at every
start and restart (it makes the `Node`, starts and stops it, and reports its exit). The
node API itself is in runtime/node.py, which re-exports both.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from roboscale.runtime.bus import Inbox
from roboscale.runtime.child import ChildStartError, ExitCallback, ExitReason
from roboscale.runtime.childspec import NO_ARGS, name_problems
from roboscale.runtime.executor import Runtime
from roboscale.runtime.names import check_name

if TYPE_CHECKING:
    from roboscale.runtime.node import Node


def error_detail(e: BaseException) -> str:
    """An exit's detail for `e`: its type, its message and the line that raised it."""
    # Walk to the innermost frame by hand: traceback.extract_tb reads source lines
    # (linecache, a stat per frame), which dominated the cost of a crash-restart.
    tb = e.__traceback__
    if tb is None:
        return f"{type(e).__name__}: {e}"
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f"{type(e).__name__}: {e} at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"


NodeFactory = Callable[[], "Node"]
_new = object.__new__


@dataclass(frozen=True, slots=True)
class NodeRecipe:
    """An in-process node as plain data: its name, its class (or any callable that makes a
    fresh `Node`) and its parameters. A supervisor builds a new `NodeHandle` from it at
    every start, with its own copy of the parameters: an instance never sees what an
    earlier one changed."""

    name: str
    cls: NodeFactory
    params: Mapping[str, Any] = NO_ARGS
    heartbeat_s: float | None = None  # the node must call heartbeat() this often
    callback_deadline_s: float | None = None  # the default deadline of its callbacks
    start_timeout_s: float = 5.0  # an async on_start must finish within this

    def build(self, runtime: Runtime) -> NodeHandle:
        # NodeHandle.of without its call: this runs at every restart.
        handle: NodeHandle = _new(NodeHandle)
        handle._bind(runtime, self, self.name.lstrip("/"), "")
        return handle

    def check(self, path: str) -> list[str]:
        problems = name_problems(self.name, path)
        if not callable(self.cls):
            problems.append(f"{path}: cls: {self.cls!r} is not a Node class")
        if not isinstance(self.params, Mapping):
            problems.append(f"{path}: params: {self.params!r} is not a mapping of names")
        for key in ("heartbeat_s", "callback_deadline_s", "start_timeout_s"):
            value = getattr(self, key)
            if value is None and key != "start_timeout_s":
                continue
            if not (isinstance(value, int | float) and not isinstance(value, bool) and value > 0):
                problems.append(f"{path}: {key}: must be a number of seconds > 0, got {value!r}")
        return problems


class NodeHandle:
    """The supervisor's view of one in-process node instance: a ChildHandle built from a
    `NodeRecipe` at each start; it makes the `Node` and reports its exit."""

    __slots__ = ("durables", "name", "node", "on_exit", "params", "path", "recipe", "runtime")

    def __init__(
        self,
        runtime: Runtime,
        name: str,
        factory: NodeFactory,
        params: Mapping[str, Any] | None = None,
        *,
        heartbeat_s: float | None = None,
        callback_deadline_s: float | None = None,
        start_timeout_s: float = 5.0,
    ) -> None:
        """A handle made directly, outside a supervisor (a supervisor builds its own)."""
        name = check_name(name, "node").lstrip("/")
        recipe = NodeRecipe(
            name, factory, params or NO_ARGS, heartbeat_s, callback_deadline_s, start_timeout_s
        )
        self._bind(runtime, recipe, name, "/" + name)

    @classmethod
    def of(cls, runtime: Runtime, recipe: NodeRecipe) -> NodeHandle:
        """A fresh handle of a checked recipe; on every restart, so kept to a few stores
        (the supervisor gives it its path in the tree)."""
        handle = _new(cls)
        handle._bind(runtime, recipe, recipe.name.lstrip("/"), "")
        return handle

    def _bind(self, runtime: Runtime, recipe: NodeRecipe, name: str, path: str) -> None:
        self.runtime = runtime
        self.recipe = recipe
        self.name = name
        self.path = path
        params = recipe.params
        # Its own copy; `dict()` of the shared empty mapping would iterate it in Python.
        self.params: dict[str, Any] = {} if params is NO_ARGS else dict(params)
        self.node: Node | None = None
        self.on_exit: ExitCallback | None = None
        # topic -> durable inbox; the bus keeps each by path, for the next instance
        self.durables: dict[str, Inbox] = {}

    @property
    def factory(self) -> NodeFactory:
        return self.recipe.cls

    @property
    def heartbeat_s(self) -> float | None:
        return self.recipe.heartbeat_s

    @property
    def callback_deadline_s(self) -> float | None:
        return self.recipe.callback_deadline_s

    @property
    def start_timeout_s(self) -> float:
        return self.recipe.start_timeout_s

    # -- ChildHandle, for callers outside the loop -----------------------------------------
    def start(self, on_exit: ExitCallback) -> None:
        self.runtime.wait(self.start_async(on_exit))

    def stop(self, timeout_s: float) -> None:
        self.runtime.wait(self.stop_async(timeout_s), timeout_s=timeout_s + 10.0)

    def alive(self) -> bool:
        return self.node is not None and self.node.alive

    def inboxes(self) -> list[Inbox]:
        """The running node's inboxes and the durable ones kept across restarts, each once."""
        current = list(self.node._inboxes) if self.node is not None else []
        return current + [i for i in self.durables.values() if i not in current]

    # -- the inline versions the supervisor awaits on the loop ------------------------------
    async def start_async(self, on_exit: ExitCallback) -> None:
        pending = self.start_nowait(on_exit)
        if pending is not None:
            await pending

    def start_nowait(self, on_exit: ExitCallback) -> Awaitable[None] | None:
        """Start a fresh instance; None when it is ready, else what to await for an async on_start.

        The supervisor's restart fast path calls this directly, so that a node with a
        plain `on_start` restarts without a single loop turn.
        """
        node = self.recipe.cls()
        node.bind(self)
        self.node = node
        try:
            result = node.on_start()
        except Exception as e:
            self._abandon(node)
            raise ChildStartError(self.name, error_detail(e)) from e
        if inspect.isawaitable(result):
            return self._finish_start(node, result, on_exit)
        self._ready(node, on_exit)
        return None

    async def _finish_start(
        self, node: Node, result: Awaitable[None], on_exit: ExitCallback
    ) -> None:
        try:
            await asyncio.wait_for(result, self.start_timeout_s)
        except Exception as e:  # TimeoutError included
            self._abandon(node)
            raise ChildStartError(self.name, error_detail(e)) from e
        except BaseException:  # cancelled (its supervisor stopped): leave nothing behind
            self._abandon(node)
            raise
        self._ready(node, on_exit)

    def _abandon(self, node: Node) -> None:
        node.teardown()
        if self.node is node:
            self.node = None

    def _ready(self, node: Node, on_exit: ExitCallback) -> None:
        if not node.alive:  # a callback failed it while on_start was awaiting
            self.node = None
            raise ChildStartError(self.name, "the node failed while starting")
        heartbeat_s = self.recipe.heartbeat_s
        if heartbeat_s is not None:
            self.runtime.beating[node] = heartbeat_s
        self.on_exit = on_exit

    async def stop_async(self, timeout_s: float) -> bool:
        """Stop gracefully within `timeout_s`; return True when it had to be killed."""
        node, self.node, self.on_exit = self.node, None, None
        if node is None or not node.alive:
            return False
        killed = timeout_s <= 0  # brutal_kill: no shutdown hook at all
        if not killed:
            try:
                result = node.on_shutdown()
                if inspect.isawaitable(result):
                    await asyncio.wait_for(result, timeout_s)
            except TimeoutError:
                killed = True
            except Exception:
                pass  # a failing shutdown hook still ends in the node being stopped
        node.teardown()
        return killed

    def kill(self, reason: ExitReason = ExitReason.KILLED, detail: str = "killed") -> None:
        """End the running instance abruptly, as a crash would (for chaos and tests)."""
        if self.node is not None:
            self.node.fail(reason, detail)

    def node_exited(self, node: Node, reason: ExitReason, detail: str) -> None:
        if node is not self.node:
            return
        self.node = None
        on_exit, self.on_exit = self.on_exit, None
        if on_exit is not None:
            on_exit(self.name, reason, detail)
