"""Supervisors with Erlang/OTP semantics (see docs/runtime.md for the rules, one by one).

A supervisor starts its children in order, each one synchronously (the next
starts only after the previous reported ready), and stops them in reverse
order. When a child exits on its own, its restart type decides whether it is
restarted (permanent: always; transient: only after an abnormal exit;
temporary: never) and the strategy decides which siblings restart with it
(one_for_one: none; one_for_all: all; rest_for_one: those started after it).
Each restart is checked against the restart intensity; past it the supervisor
stops all children and ends with reason SHUTDOWN, which its parent sees as the
exit of one of its own children (escalation).

Exits arrive from any thread through the `ExitCallback`; they are queued to
the supervisor's mailbox on the loop and handled one at a time by one task, as
an OTP supervisor process handles its messages.
"""

from __future__ import annotations

import asyncio
import enum
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from roboscale.errors import UserError
from roboscale.runtime.child import ChildHandle, ChildStartError, ExitCallback, ExitReason
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity, add_restart
from roboscale.runtime.names import check_name


class Strategy(enum.Enum):
    ONE_FOR_ONE = "one_for_one"
    ONE_FOR_ALL = "one_for_all"
    REST_FOR_ONE = "rest_for_one"


class Restart(enum.Enum):
    PERMANENT = "permanent"  # always restarted
    TRANSIENT = "transient"  # restarted only after an abnormal exit (CRASH, KILLED, HUNG)
    TEMPORARY = "temporary"  # never restarted; removed when it ends


BRUTAL_KILL = 0.0  # shutdown value: kill at once, no graceful stop
INFINITY = math.inf  # shutdown value: wait as long as it takes (the default for supervisors)


@dataclass(slots=True)
class ChildSpec:
    """A child and how to supervise it."""

    handle: ChildHandle
    restart: Restart = Restart.PERMANENT
    shutdown_s: float = 5.0  # graceful stop allowed this long, then killed

    def __post_init__(self) -> None:
        if self.shutdown_s < 0:
            raise UserError(f"child {self.handle.name}: shutdown must be >= 0 s")


@dataclass(slots=True)
class _Child:
    spec: ChildSpec
    running: bool = False
    generation: int = 0  # bumped at every start and stop: exits of older instances are stale
    restarts: int = 0
    last_exit: str = ""

    @property
    def name(self) -> str:
        return self.spec.handle.name


@dataclass(slots=True)
class _Exit:
    name: str
    generation: int
    reason: ExitReason
    detail: str


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
        self.runtime = runtime
        self.name = check_name(name, "supervisor").lstrip("/")
        self.path = "/" + self.name
        self.strategy = strategy
        self.intensity = intensity or Intensity()
        self.clock = clock
        self._children: list[_Child] = []
        self._restart_times: tuple[float, ...] = ()
        self._mailbox: asyncio.Queue[_Exit] | None = None
        self._task: asyncio.Task[None] | None = None
        self._on_exit: ExitCallback | None = None
        self._running = False
        self.ended: asyncio.Future[str] | None = None  # set to the reason when it gives up
        for spec in children:
            self.add_child(spec)

    # -- the tree -------------------------------------------------------------------------
    def add_child(self, spec: ChildSpec) -> None:
        """Add a child spec before start (children start in the order they were added)."""
        if self._running:
            raise UserError(f"supervisor {self.path}: add children before it starts")
        if any(c.name == spec.handle.name for c in self._children):
            raise UserError(f"supervisor {self.path}: two children named {spec.handle.name!r}")
        self._children.append(_Child(spec))
        self._set_path(spec.handle)

    def _set_path(self, handle: ChildHandle) -> None:
        # Paths name children in events and key durable inboxes; they follow the tree.
        if hasattr(handle, "path"):
            handle.path = f"{self.path}/{handle.name}"
            if isinstance(handle, Supervisor):
                for child in handle._children:
                    handle._set_path(child.spec.handle)

    @property
    def children(self) -> list[ChildSpec]:
        return [c.spec for c in self._children]

    def child(self, name: str) -> ChildHandle:
        for c in self._children:
            if c.name == name:
                return c.spec.handle
        raise UserError(f"supervisor {self.path} has no child {name!r}")

    def restarts(self, name: str) -> int:
        return next(c.restarts for c in self._children if c.name == name)

    def durable_cursors(self) -> dict[str, int]:
        """The last sequence number handed to each durable subscriber below this supervisor."""
        cursors: dict[str, int] = {}
        for c in self._children:
            handle: Any = c.spec.handle
            if isinstance(handle, Supervisor):
                cursors.update(handle.durable_cursors())
            for inbox in getattr(handle, "durables", {}).values():
                cursors[inbox.durable_key] = inbox.last_seq
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
        self._restart_times = ()
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
        self._cancel_serving()
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
        if self._task is not None and self._task is not asyncio.current_task():
            self._task.cancel()
        self._task = None

    # -- starting and stopping one child -----------------------------------------------------
    async def _start_child(self, child: _Child) -> None:
        child.generation += 1
        generation = child.generation
        on_exit = self._exit_callback(child.name, generation)
        handle: Any = child.spec.handle
        try:
            if hasattr(handle, "start_async"):
                await handle.start_async(on_exit)
            else:  # an OS-process child blocks while it starts: keep the loop free
                await asyncio.to_thread(handle.start, on_exit)
        except ChildStartError as e:
            self._emit("start_failed", child.name, detail=e.detail)
            raise
        except Exception as e:
            self._emit("start_failed", child.name, detail=f"{type(e).__name__}: {e}")
            raise ChildStartError(child.name, f"{type(e).__name__}: {e}") from e
        child.running = True
        self._emit("started", child.name)

    async def _stop_child(self, child: _Child, brutal: bool = False) -> None:
        if not child.running:
            return
        child.running = False
        child.generation += 1  # an exit racing with this stop is now stale
        timeout = BRUTAL_KILL if brutal else child.spec.shutdown_s
        handle: Any = child.spec.handle
        if hasattr(handle, "stop_async"):
            killed = bool(await handle.stop_async(timeout))
        else:
            await asyncio.to_thread(handle.stop, timeout)
            killed = False
        self._emit("killed" if killed else "stopped", child.name)

    async def _stop_children(self, children: Iterable[_Child], brutal: bool = False) -> None:
        for child in list(children):
            await self._stop_child(child, brutal)

    # -- exits ----------------------------------------------------------------------------
    def _exit_callback(self, name: str, generation: int) -> ExitCallback:
        rt = self.runtime

        def on_exit(_name: str, reason: ExitReason, detail: str) -> None:
            message = _Exit(name, generation, reason, detail)
            if rt.in_loop():
                self._post(message)
            else:
                rt.loop.call_soon_threadsafe(self._post, message)

        return on_exit

    def _post(self, message: _Exit) -> None:
        if self._mailbox is not None and self._running:
            self._mailbox.put_nowait(message)

    async def _serve(self) -> None:
        assert self._mailbox is not None
        while self._running:
            message = await self._mailbox.get()
            await self._handle_exit(message)

    async def _handle_exit(self, message: _Exit) -> None:
        child = next((c for c in self._children if c.name == message.name), None)
        if child is None or child.generation != message.generation or not child.running:
            return  # stale: that instance was already stopped or replaced
        child.running = False
        child.last_exit = f"{message.reason.value}: {message.detail}"
        self._emit("exited", child.name, message.reason.value, message.detail)
        if not self._wants_restart(child, message.reason):
            if child.spec.restart is Restart.TEMPORARY:
                self._children.remove(child)
            return
        await self._restart(child)

    @staticmethod
    def _wants_restart(child: _Child, reason: ExitReason) -> bool:
        restart = child.spec.restart
        if restart is Restart.PERMANENT:
            return True
        return restart is Restart.TRANSIENT and reason.abnormal

    async def _restart(self, failed: _Child) -> None:
        allowed, self._restart_times = add_restart(
            self._restart_times, self.clock(), self.intensity
        )
        if not allowed:
            await self._give_up(failed)
            return
        index = self._children.index(failed)
        if self.strategy is Strategy.ONE_FOR_ONE:
            group = [failed]
        elif self.strategy is Strategy.ONE_FOR_ALL:
            group = list(self._children)
        else:
            group = self._children[index:]
        await self._stop_children(reversed([c for c in group if c is not failed]))
        # Temporary siblings stopped by the strategy are not restarted (OTP): drop them.
        for c in group:
            if c is not failed and c.spec.restart is Restart.TEMPORARY:
                self._children.remove(c)
        for c in [c for c in group if c in self._children]:
            try:
                await self._start_child(c)
            except ChildStartError as e:
                # OTP retries a failed restart; each retry counts towards the intensity.
                self._post(_Exit(c.name, c.generation, ExitReason.CRASH, e.detail))
                c.running = True  # so that the retry message is not taken as stale
                return
            c.restarts += 1
            self._emit("restarted", c.name)

    async def _give_up(self, failed: _Child) -> None:
        limit = self.intensity
        detail = (
            f"more than {limit.max_restarts} restarts within {limit.period_s:g}s "
            f"(last: {failed.name} {failed.last_exit})"
        )
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
            handle: Any = c.spec.handle
            path = f"{self.path}/{c.name}"
            inboxes = list(getattr(getattr(handle, "node", None), "_inboxes", []) or [])
            inboxes += [i for i in getattr(handle, "durables", {}).values() if i not in inboxes]
            rows.append(
                {
                    "path": path,
                    "kind": "supervisor"
                    if isinstance(handle, Supervisor)
                    else "node"
                    if hasattr(handle, "durables")
                    else "process",
                    "state": "running" if c.running else "stopped",
                    "restart": c.spec.restart.value,
                    "restarts": c.restarts,
                    "delivered": sum(i.delivered for i in inboxes),
                    "queued": sum(len(i.items) for i in inboxes),
                    "dropped": sum(i.dropped for i in inboxes),
                    "last_exit": c.last_exit,
                }
            )
            if isinstance(handle, Supervisor):
                rows.extend(handle.status())
        return rows
