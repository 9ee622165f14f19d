"""Supervisors with Erlang/OTP semantics (see docs/runtime.md for the rules, one by one).

Children are given as `ChildSpec`s, plain data carrying each child's start recipe
(runtime/childspec.py), all checked when the supervisor is made. A supervisor starts
its children in order, building a fresh instance of each from its recipe, each one
synchronously (the next starts only after the previous reported ready), and stops them
in reverse order. When a child exits on its own, its restart type decides whether it is
restarted (permanent: always; transient: only after an abnormal exit;
temporary: never) and the strategy decides which siblings restart with it
(one_for_one: none; one_for_all: all; rest_for_one: those started after it).
Each restart is checked against the restart intensity; past it the supervisor
stops all children and ends with reason SHUTDOWN, which its parent sees as the
exit of one of its own children (escalation). Every restart builds a new instance from
the recipe: nothing of the failed one is reused (durable inboxes live in the bus, keyed
by the child's path, and are found again by the new instance).

Exits arrive from any thread through the `ExitCallback`; they are handed to
the loop and handled one at a time, as an OTP supervisor process handles its
messages. Fast path: an exit that reaches an idle supervisor (nothing queued,
nothing being handled) whose restart touches only that child, an in-process
node, is handled at once in the same loop turn: the new instance runs its
`on_start` before the call that reported the exit returns. Anything else (a
busy supervisor, a strategy that restarts siblings, a give-up, a child started
in a thread) goes through the mailbox, served by one task. Both paths run the
same steps in the same order, so the OTP semantics do not depend on the path.
What it keeps of each child, the steps on one instance and the strategies' restart
groups are in runtime/supervised.py.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from roboscale.errors import UserError
from roboscale.runtime.child import ChildStartError, ExitCallback, ExitReason, HasInboxes
from roboscale.runtime.childspec import (
    BRUTAL_KILL,
    INFINITY,
    ChildSpec,
    Recipe,
    Restart,
    check_childspecs,
    childspec_problems,
    name_problems,
)
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity, RestartWindow
from roboscale.runtime.names import check_name
from roboscale.runtime.nodehandle import NodeRecipe
from roboscale.runtime.supervised import (
    Exit,
    ExitNotice,
    GiveUp,
    Strategy,
    SupervisedChild,
    restart_group,
    restarts_alone,
)

# The child spec's parts are the supervisor's API too: `from ...supervisor import ChildSpec`.
__all__ = [
    "BRUTAL_KILL",
    "INFINITY",
    "ChildSpec",
    "NodeRecipe",
    "Recipe",
    "Restart",
    "Strategy",
    "Supervisor",
    "SupervisorRecipe",
]


@dataclass(frozen=True, slots=True)
class SupervisorRecipe:
    """A sub-supervisor as plain data: its child specs, strategy and intensity. Each start
    builds a new `Supervisor` from it, with all its children again (OTP runs init/1 again:
    a temporary child that ended before is back, and no restart count carries over)."""

    name: str
    children: Sequence[ChildSpec] = ()
    strategy: Strategy = Strategy.ONE_FOR_ONE
    intensity: Intensity = field(default_factory=Intensity)

    def __post_init__(self) -> None:
        if not isinstance(self.children, tuple):  # a list or an iterator: keep a snapshot
            object.__setattr__(self, "children", tuple(self.children))

    def build(self, runtime: Runtime) -> Supervisor:
        return Supervisor._of(runtime, self)

    def check(self, path: str) -> list[str]:
        problems = name_problems(self.name, path)
        if not isinstance(self.strategy, Strategy):
            allowed = ", ".join(s.value for s in Strategy)
            problems.append(
                f"{path}: strategy: {self.strategy!r} is not allowed: allowed are {allowed}"
            )
        if not isinstance(self.intensity, Intensity):
            problems.append(f"{path}: intensity: {self.intensity!r} is not an Intensity")
        return problems + childspec_problems(self.children, path)


class Supervisor:
    """An OTP supervisor on the runtime's loop; itself a child of its parent supervisor."""

    def __init__(
        self,
        runtime: Runtime,
        name: str,
        children: Iterable[ChildSpec] = (),
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        intensity: Intensity | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """A supervisor over `children`; every spec of the tree below it is checked first
        (OTP's check_childspecs), and one UserError lists all the problems found."""
        specs = list(children)
        path = "/" + check_name(name, "supervisor").lstrip("/")
        check_childspecs(specs, path)
        self._init(runtime, path, specs, strategy, intensity or Intensity(), clock)

    @classmethod
    def _of(cls, runtime: Runtime, recipe: SupervisorRecipe) -> Supervisor:
        """A fresh instance of a sub-supervisor whose recipe its parent already checked."""
        sup = cls.__new__(cls)
        path = "/" + recipe.name.lstrip("/")
        sup._init(runtime, path, recipe.children, recipe.strategy, recipe.intensity)
        return sup

    def _init(
        self,
        runtime: Runtime,
        path: str,
        specs: Iterable[ChildSpec],
        strategy: Strategy,
        intensity: Intensity,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.runtime = runtime
        self.name = path[1:]
        self.path = path  # its place in the tree once its parent starts it
        self.strategy = strategy
        self.intensity = intensity
        self.clock = clock
        self._children: list[SupervisedChild] = []
        self._by_name: dict[str, SupervisedChild] = {}
        self._window = RestartWindow(self.intensity)
        self._mailbox: asyncio.Queue[Exit | GiveUp] | None = None
        self._task: asyncio.Task[None] | None = None
        self._busy = False  # an exit is being handled: new ones wait in the mailbox
        self._inflight: asyncio.Task[None] | None = None  # a fast restart awaiting an async start
        self._on_exit: ExitCallback | None = None
        self._running = False
        self.ended: asyncio.Future[str] | None = None  # set to the reason when it gives up
        for spec in specs:
            self._append(spec)

    # -- the tree -------------------------------------------------------------------------
    def add_child(self, spec: ChildSpec) -> None:
        """Add a child spec before start (children start in the order they were added)."""
        if self._running:
            raise UserError(f"supervisor {self.path}: add children before it starts")
        check_childspecs([spec], self.path)
        if spec.name in self._by_name:
            raise UserError(f"supervisor {self.path}: two children named {spec.name!r}")
        self._append(spec)

    def _append(self, spec: ChildSpec) -> None:
        child = SupervisedChild(spec)
        self._children.append(child)
        self._by_name[child.name] = child

    @property
    def children(self) -> list[ChildSpec]:
        return [c.spec for c in self._children]

    def child(self, name: str) -> Any:
        """The child's running instance (or its last one, when it is stopped): a new
        object after every restart, so ask again rather than keep it."""
        c = self._by_name.get(name)
        if c is None:
            raise UserError(f"supervisor {self.path} has no child {name!r}")
        if c.handle is None:
            raise UserError(f"supervisor {self.path}: child {name!r} has not started yet")
        return c.handle

    def instance(self, name: str) -> Any:
        """The child's current (or last) instance; None before its first start or when
        there is no such child."""
        c = self._by_name.get(name)
        return None if c is None else c.handle

    def which_children(self) -> list[tuple[str, Any]]:
        """(name, instance or None before its first start) of each child, in start order:
        OTP's which_children."""
        return [(c.name, c.handle) for c in self._children]

    def restarts(self, name: str) -> int:
        return self._by_name[name].restarts

    def _remove(self, child: SupervisedChild) -> None:
        self._children.remove(child)
        del self._by_name[child.name]

    def durable_cursors(self) -> dict[str, int]:
        """The last sequence number handed to each durable subscriber below this supervisor."""
        cursors: dict[str, int] = {}
        for c in self._children:
            if isinstance(c.handle, Supervisor):
                cursors.update(c.handle.durable_cursors())
            cursors.update(c.durable_cursors())
        return cursors

    # -- ChildHandle ----------------------------------------------------------------------
    def start(self, on_exit: ExitCallback) -> None:
        self.runtime.wait(self.start_async(on_exit), timeout_s=120.0)

    def stop(self, timeout_s: float) -> None:
        wait = 3600.0 if math.isinf(timeout_s) else timeout_s + 10.0
        self.runtime.wait(self.stop_async(timeout_s), timeout_s=wait)

    def alive(self) -> bool:
        return self._running

    async def start_async(self, on_exit: ExitCallback | None = None) -> None:
        """Start the children in order; if one fails, stop those started and raise."""
        loop = self.runtime.loop
        self.ended = loop.create_future()
        self._mailbox = asyncio.Queue()
        self._window.clear()
        self._busy = False
        for i, child in enumerate(self._children):
            try:
                await self._start_child(child)
            except ChildStartError as e:
                await self._stop_children(reversed(self._children[:i]))
                raise ChildStartError(self.name, f"child {child.name}: {e.detail}") from e
        self._running = True
        self._on_exit = on_exit
        self._task = loop.create_task(self._serve(), name=f"supervisor {self.path}")

    async def stop_async(self, timeout_s: float = INFINITY) -> bool:
        """Stop children in reverse order within `timeout_s`, then kill those left."""
        if not self._running:
            return False
        self._running = False
        self._on_exit = None
        inflight = self._inflight
        self._cancel_serving()
        if inflight is not None and inflight is not asyncio.current_task():
            # A restart still awaiting an async on_start: let its cancellation clean up.
            await asyncio.wait([inflight])
        if math.isinf(timeout_s):
            await self._stop_children(reversed(self._children))
            return False
        try:
            await asyncio.wait_for(self._stop_children(reversed(self._children)), timeout_s)
            return False
        except TimeoutError:
            await self._stop_children(reversed(self._children), brutal=True)
            return True

    def _cancel_serving(self) -> None:
        current = asyncio.current_task()
        for task in (self._task, self._inflight):
            if task is not None and task is not current:
                task.cancel()
        self._task = self._inflight = None

    # -- starting and stopping one child -----------------------------------------------------
    async def _start_child(self, child: SupervisedChild) -> None:
        pending = self._begin_start(child)
        if pending is not None:
            await pending

    def _begin_start(self, child: SupervisedChild) -> Awaitable[None] | None:
        """Build a fresh instance of `child` from its recipe and start it; None when it
        is already started, else what to await to finish."""
        child.generation += 1
        on_exit = ExitNotice(self, child.name, child.generation)
        try:
            pending = child.start_instance(self.runtime, self.path, on_exit)
        except Exception as e:
            raise self._start_failed(child, e) from e
        if pending is None:
            self._started(child)
            return None
        return self._finish_start(child, pending)

    async def _finish_start(self, child: SupervisedChild, pending: Awaitable[None]) -> None:
        try:
            await pending
        except Exception as e:
            raise self._start_failed(child, e) from e
        self._started(child)

    def _started(self, child: SupervisedChild) -> None:
        child.running = True
        self._emit("started", child.name)

    def _start_failed(self, child: SupervisedChild, e: Exception) -> ChildStartError:
        detail = e.detail if isinstance(e, ChildStartError) else f"{type(e).__name__}: {e}"
        self._emit("start_failed", child.name, detail=detail)
        return e if isinstance(e, ChildStartError) else ChildStartError(child.name, detail)

    async def _stop_child(self, child: SupervisedChild, brutal: bool = False) -> None:
        if not child.running:
            return
        killed = await child.stop_instance(brutal)
        self._emit("killed" if killed else "stopped", child.name)

    async def _stop_children(
        self, children: Iterable[SupervisedChild], brutal: bool = False
    ) -> None:
        for child in list(children):
            await self._stop_child(child, brutal)

    # -- exits ----------------------------------------------------------------------------
    def on_child_exit(self, name: str, generation: int, reason: ExitReason, detail: str) -> None:
        """An exit, on the loop: handle it now if the fast path fits, else queue it."""
        if self._mailbox is None or not self._running:
            return
        child = self._by_name.get(name)
        if child is None or child.generation != generation or not child.running:
            return  # stale: that instance was already stopped or replaced
        if self._busy or not self._mailbox.empty() or not self._fits_fast_path(child):
            self._mailbox.put_nowait(Exit(name, generation, reason, detail))
            return
        self._busy = True  # exits reported while we restart (e.g. from on_start) queue up
        try:
            self._restart_now(child, reason, detail)
        finally:
            self._busy = self._inflight is not None

    def _fits_fast_path(self, child: SupervisedChild) -> bool:
        caps, spec = child.caps, child.spec
        if caps is None or not caps.start_nowait or spec.restart_delay_s > 0 or spec.significant:
            return False
        return restarts_alone(self.strategy, self._children, child)

    def _restart_now(self, child: SupervisedChild, reason: ExitReason, detail: str) -> None:
        """The fast path: the same steps as `_handle_exit`, without leaving this loop turn."""
        if not self._accept_exit(child, reason, detail):
            return
        assert self._mailbox is not None
        if not self._window.add(self.clock()):
            self._mailbox.put_nowait(GiveUp(child))
            return
        try:
            pending = self._begin_start(child)
        except ChildStartError as e:
            self._retry_start(child, e)
            return
        if pending is None:
            self._restarted(child)
        else:  # an async on_start: finish it in a task; the mailbox waits for it
            self._inflight = self.runtime.loop.create_task(self._finish_restart(child, pending))

    async def _finish_restart(self, child: SupervisedChild, pending: Awaitable[None]) -> None:
        try:
            await pending
        except ChildStartError as e:
            self._retry_start(child, e)
        else:
            self._restarted(child)
        finally:
            self._inflight = None
            self._busy = False

    async def _serve(self) -> None:
        assert self._mailbox is not None
        while self._running:
            message = await self._mailbox.get()
            if self._inflight is not None:  # a fast restart still awaiting its start
                await asyncio.wait([self._inflight])
            self._busy = True
            try:
                if isinstance(message, GiveUp):
                    await self._give_up(message.child, message.significant)
                else:
                    await self._handle_exit(message)
            finally:
                self._busy = False

    async def _handle_exit(self, message: Exit) -> None:
        child = self._by_name.get(message.name)
        if child is None or child.generation != message.generation or not child.running:
            return  # stale: that instance was already stopped or replaced
        if self._accept_exit(child, message.reason, message.detail):
            await self._restart(child)

    def _accept_exit(self, child: SupervisedChild, reason: ExitReason, detail: str) -> bool:
        """Record an exit; True when the child's restart type asks for a restart."""
        child.running = False
        child.last_exit = f"{reason.value}: {detail}"
        self._emit("exited", child.name, reason.value, detail)
        if child.wants_restart(reason):
            return True
        if child.spec.restart is Restart.TEMPORARY:
            self._remove(child)
        if child.spec.significant and self._mailbox is not None:
            self._mailbox.put_nowait(GiveUp(child, significant=True))
        return False

    async def _restart(self, failed: SupervisedChild) -> None:
        if not self._window.add(self.clock()):
            await self._give_up(failed)
            return
        if failed.spec.restart_delay_s > 0:  # the mailbox waits too, as roslaunch's respawn
            await asyncio.sleep(failed.spec.restart_delay_s)
        group = restart_group(self.strategy, self._children, failed)
        await self._stop_children(reversed([c for c in group if c is not failed]))
        # Temporary siblings stopped by the strategy are not restarted (OTP): drop them.
        for c in group:
            if c is not failed and c.spec.restart is Restart.TEMPORARY:
                self._remove(c)
        for c in [c for c in group if c in self._children]:
            try:
                await self._start_child(c)
            except ChildStartError as e:
                self._retry_start(c, e)
                return
            self._restarted(c)

    def _retry_start(self, child: SupervisedChild, e: ChildStartError) -> None:
        # OTP retries a failed restart; each retry counts towards the intensity.
        assert self._mailbox is not None
        self._mailbox.put_nowait(Exit(child.name, child.generation, ExitReason.CRASH, e.detail))
        child.running = True  # so that the retry message is not taken as stale

    def _restarted(self, child: SupervisedChild) -> None:
        child.restarts += 1
        self._emit("restarted", child.name)

    async def _give_up(self, failed: SupervisedChild, significant: bool = False) -> None:
        detail = failed.give_up_detail(self.intensity, significant)
        self._emit("gave_up", "", detail=detail)
        self._running = False
        await self._stop_children(reversed(self._children))
        on_exit, self._on_exit = self._on_exit, None
        if self.ended is not None and not self.ended.done():
            self.ended.set_result(detail)
        self._emit("escalated", "", ExitReason.SHUTDOWN.value, detail)
        self._task = None
        if on_exit is not None:
            # OTP: the supervisor terminates with reason shutdown; the parent applies its policy.
            on_exit(self.name, ExitReason.SHUTDOWN, detail)

    def _emit(self, kind: str, child: str, reason: str = "", detail: str = "") -> None:
        if self.runtime.subscribers:
            self.runtime.emit(SupervisionEvent(kind, self.path, child, reason, detail))

    # -- status -----------------------------------------------------------------------------
    def status(self) -> list[dict[str, Any]]:
        """One row per child, depth first: path, kind, state, restarts, queue depth, drops."""
        rows: list[dict[str, Any]] = []
        for c in self._children:
            rows.append(c.status_row(self.path, _kind(c)))
            if isinstance(c.handle, Supervisor):
                rows.extend(c.handle.status())
        return rows


def _kind(child: SupervisedChild) -> str:
    recipe = child.spec.recipe if child.handle is None else None
    if isinstance(child.handle, Supervisor) or isinstance(recipe, SupervisorRecipe):
        return "supervisor"
    if isinstance(child.handle, HasInboxes) or isinstance(recipe, NodeRecipe):
        return "node"
    return "process"
