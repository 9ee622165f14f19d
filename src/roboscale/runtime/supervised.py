"""A supervisor's record of one child, and how one instance of that child is built,
started and stopped. The supervisor (runtime/supervisor.py) decides when: the start
order, restarts by strategy and intensity, giving up; this module holds what it keeps
per child and the steps on one instance.

`SupervisedChild` is that record: the child's spec, its running (or last) instance,
what the instance's class can do (`Caps`, asked once per class), its path in the tree,
the generation that tells an exit of the current instance from a stale one, and its
restart count and last exit (its status row). `ExitNotice` is the exit callback each
instance is started with; `Exit` and `GiveUp` are what reaches the supervisor's mailbox.
"""

from __future__ import annotations

import asyncio
import enum
import threading
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from roboscale.runtime.child import (
    ChildHandle,
    ChildStartError,
    ExitCallback,
    ExitReason,
    HasInboxes,
    HasPath,
    HearsDeathEarly,
    StartsOnLoop,
    StartsWithoutWaiting,
    StopsOnLoop,
)
from roboscale.runtime.childspec import BRUTAL_KILL, ChildSpec, Restart
from roboscale.runtime.intensity import Intensity

if TYPE_CHECKING:
    from roboscale.runtime.executor import Runtime
    from roboscale.runtime.supervisor import Supervisor


class Strategy(enum.Enum):
    """Which siblings a supervisor restarts with a failed child."""

    ONE_FOR_ONE = "one_for_one"  # none
    ONE_FOR_ALL = "one_for_all"  # all
    REST_FOR_ONE = "rest_for_one"  # those started after it


def restart_group(
    strategy: Strategy, children: Sequence[SupervisedChild], failed: SupervisedChild
) -> list[SupervisedChild]:
    """The children `strategy` restarts with `failed` (itself included), in start order."""
    index = children.index(failed)
    if strategy is Strategy.ONE_FOR_ONE:
        return [failed]
    if strategy is Strategy.ONE_FOR_ALL:
        return list(children)
    return list(children[index:])


def restarts_alone(
    strategy: Strategy, children: Sequence[SupervisedChild], child: SupervisedChild
) -> bool:
    """Whether `strategy` restarts `child` without any sibling."""
    if strategy is Strategy.ONE_FOR_ONE or len(children) == 1:
        return True
    return strategy is Strategy.REST_FOR_ONE and children[-1] is child


class Caps:
    """What a handle's class can do beyond ChildHandle (runtime/child.py), asked once per
    class: runtime_checkable isinstance checks are too slow for every restart."""

    __slots__ = ("early_death", "has_path", "kind", "start_async", "start_nowait", "stop_async")

    def __init__(self, handle: object) -> None:
        self.kind = type(handle)
        self.start_nowait = isinstance(handle, StartsWithoutWaiting)
        self.start_async = isinstance(handle, StartsOnLoop)
        self.stop_async = isinstance(handle, StopsOnLoop)
        self.has_path = isinstance(handle, HasPath)
        self.early_death = isinstance(handle, HearsDeathEarly)


_CAPS: dict[type, Caps] = {}


def caps_of(handle: object) -> Caps:
    caps = _CAPS.get(type(handle))
    if caps is None:
        caps = _CAPS[type(handle)] = Caps(handle)
    return caps


@dataclass(slots=True)
class SupervisedChild:
    spec: ChildSpec
    name: str = ""
    handle: Any = None  # the running instance, or the last one; None before the first start
    caps: Caps | None = None  # the handle's, known after its first build
    path: str = ""  # its place in the tree, made at its first build (then shared)
    running: bool = False
    generation: int = 0  # bumped at every start and stop: exits of older instances are stale
    restarts: int = 0
    last_exit: str = ""

    def __post_init__(self) -> None:
        self.name = self.spec.name

    def start_instance(
        self, runtime: Runtime, parent_path: str, on_exit: ExitCallback
    ) -> Awaitable[None] | None:
        """Build a fresh instance from the recipe and start it; None when it is already
        started, else what to await to finish."""
        handle = self.build(runtime, parent_path)
        caps = self.caps
        assert caps is not None
        pending: Awaitable[None] | None
        if caps.start_nowait:  # in-process: often done without awaiting
            pending = handle.start_nowait(on_exit)
        elif caps.start_async:
            pending = handle.start_async(on_exit)
        else:  # an OS-process child blocks while it starts: keep the loop free
            pending = start_in_thread(handle, self.spec.shutdown_s, on_exit)
        return pending

    def build(self, runtime: Runtime, parent_path: str) -> Any:
        handle: Any = self.spec.recipe.build(runtime)
        if handle.name != self.name:
            raise ChildStartError(self.name, f"its recipe built a child named {handle.name!r}")
        caps = self.caps
        if caps is None or caps.kind is not type(handle):  # a recipe builds one kind, usually
            caps = self.caps = caps_of(handle)
        if caps.has_path:  # paths name children in events and key durable inboxes
            if not self.path:
                self.path = f"{parent_path}/{self.name}"
            handle.path = self.path
        if caps.early_death:  # its exit status decides nothing for a permanent child
            handle.early_death = self.spec.restart is Restart.PERMANENT
        self.handle = handle
        return handle

    async def stop_instance(self, brutal: bool = False) -> bool:
        """Stop the running instance; True when it had to be killed."""
        self.running = False
        self.generation += 1  # an exit racing with this stop is now stale
        timeout = BRUTAL_KILL if brutal else self.spec.shutdown_s
        handle, caps = self.handle, self.caps
        if caps is not None and caps.stop_async:
            return bool(await handle.stop_async(timeout))
        await asyncio.to_thread(handle.stop, timeout)
        return False

    def wants_restart(self, reason: ExitReason) -> bool:
        restart = self.spec.restart
        if restart is Restart.PERMANENT:
            return True
        return restart is Restart.TRANSIENT and reason.abnormal

    def give_up_detail(self, limit: Intensity, significant: bool) -> str:
        """Why its supervisor gives up after this child's exit."""
        if significant:
            return f"required child {self.name} ended ({self.last_exit})"
        return (
            f"more than {limit.max_restarts} restarts within {limit.period_s:g}s "
            f"(last: {self.name} {self.last_exit})"
        )

    def durable_cursors(self) -> dict[str, int]:
        """The last sequence number handed to each of its instance's durable inboxes."""
        handle: Any = self.handle
        inboxes = handle.durables.values() if isinstance(handle, HasInboxes) else []
        return {inbox.durable_key: inbox.last_seq for inbox in inboxes}

    def status_row(self, parent_path: str, kind: str) -> dict[str, Any]:
        handle: Any = self.handle
        inboxes = handle.inboxes() if isinstance(handle, HasInboxes) else []
        return {
            "path": f"{parent_path}/{self.name}",
            "kind": kind,
            "state": "running" if self.running else "stopped",
            "restart": self.spec.restart.value,
            "restarts": self.restarts,
            "delivered": sum(i.delivered for i in inboxes),
            "queued": sum(len(i.items) for i in inboxes),
            "dropped": sum(i.dropped for i in inboxes),
            "last_exit": self.last_exit,
        }


class ExitNotice:
    """The exit callback a child instance is started with: hands its exit to the
    supervisor on the loop, tagged with the instance's generation. A slotted object
    rather than a closure: about 70 bytes per child instead of 380 (a function and four
    cells), which counts at 100,000 nodes."""

    __slots__ = ("generation", "name", "supervisor")

    def __init__(self, supervisor: Supervisor, name: str, generation: int) -> None:
        self.supervisor, self.name, self.generation = supervisor, name, generation

    def __call__(self, _name: str, reason: ExitReason, detail: str) -> None:
        sup, rt = self.supervisor, self.supervisor.runtime
        if rt.in_loop():
            sup.on_child_exit(self.name, self.generation, reason, detail)
        else:
            args = (self.name, self.generation, reason, detail)
            rt.loop.call_soon_threadsafe(sup.on_child_exit, *args)


@dataclass(slots=True)
class Exit:
    name: str
    generation: int
    reason: ExitReason
    detail: str


@dataclass(slots=True)
class GiveUp:
    """Queued by the fast path when a restart exceeds the intensity, or when a significant
    child ended: giving up is async."""

    child: SupervisedChild
    significant: bool = False


async def start_in_thread(handle: ChildHandle, shutdown_s: float, on_exit: Any) -> None:
    """Start an OS-process child in a thread. A thread cannot be cancelled: if the
    supervisor stops meanwhile, the child is stopped as soon as its start completes,
    so that no instance outlives its supervisor."""
    started = asyncio.ensure_future(asyncio.to_thread(handle.start, on_exit))
    try:
        await asyncio.shield(started)
    except asyncio.CancelledError:

        def stop_when_started(f: asyncio.Future[None]) -> None:
            if not f.cancelled() and f.exception() is None:
                threading.Thread(target=handle.stop, args=(shutdown_s,), daemon=True).start()

        started.add_done_callback(stop_when_started)
        raise
