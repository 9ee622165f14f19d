"""The contract between a supervisor and the children it starts, stops and watches.

Every child kind (an in-process node, a sub-supervisor, an OS process started by
`runtime/process.py`, a command such as `rosrun`) is a `ChildHandle`. The
supervisor never knows which kind it holds: it only starts, stops and asks
whether a child is alive, and it learns of exits through the callback.
A supervisor holds no handle in its child specs: it holds a `ChildRecipe` and builds
a fresh handle from it at every start (OTP's child spec carries `{M, F, A}`).
Keep this module stable: other modules code against it.
"""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from roboscale.runtime.executor import Runtime


class ExitReason(enum.Enum):
    """Why a child ended. NORMAL and SHUTDOWN are normal exits; the rest are abnormal."""

    NORMAL = "normal"  # the child finished its work by itself
    SHUTDOWN = "shutdown"  # it was asked to stop and did so in time
    CRASH = "crash"  # an exception, a non-zero exit status, a fatal signal
    KILLED = "killed"  # killed from outside (SIGKILL, chaos, brutal kill)
    HUNG = "hung"  # a watchdog or a missed heartbeat declared it failed

    @property
    def abnormal(self) -> bool:
        return self in ABNORMAL


ABNORMAL = frozenset({ExitReason.CRASH, ExitReason.KILLED, ExitReason.HUNG})

# (child name, reason, detail). It may be called from ANY thread: receivers must
# hand it over to their own loop (loop.call_soon_threadsafe) before acting on it.
ExitCallback = Callable[[str, ExitReason, str], None]


class ChildStartError(Exception):
    """A child failed to start or did not report ready; `detail` says why."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(f"child {name!r} failed to start: {detail}")
        self.name = name
        self.detail = detail


@runtime_checkable
class ChildHandle(Protocol):
    """One supervised child, whatever it runs in."""

    name: str

    def start(self, on_exit: ExitCallback) -> None:
        """Start the child and block until it reported ready; raise ChildStartError if not.

        After a successful start, an exit the supervisor did not ask for is
        reported once through `on_exit`.
        """
        ...

    def stop(self, timeout_s: float) -> None:
        """Stop gracefully (SIGTERM / cancel), then kill after `timeout_s` seconds.

        A stop the supervisor asked for never calls `on_exit`.
        """
        ...

    def alive(self) -> bool:
        """True while the child runs."""
        ...


@runtime_checkable
class ChildRecipe(Protocol):
    """How to start one child: OTP's `{M, F, A}`, plain data that a supervisor keeps in
    the child's spec. It builds a fresh handle at every start and restart, so that no
    state of an instance outlives it (runtime/childspec.py has the kinds)."""

    @property
    def name(self) -> str: ...

    def build(self, runtime: Runtime) -> ChildHandle:
        """A new, not yet started handle; cheap (it runs on every restart)."""
        ...

    def check(self, path: str) -> list[str]:
        """What is wrong with this recipe, each `path: field: problem`; [] when nothing."""
        ...


# What some children can do beyond the contract; the supervisor asks through these
# (isinstance, once per child: runtime_checkable checks are slow for a restart path).


@runtime_checkable
class StartsWithoutWaiting(Protocol):
    """Starts on the loop and, usually, at once (an in-process node): None when started,
    else what to await."""

    def start_nowait(self, on_exit: ExitCallback) -> Awaitable[None] | None: ...


@runtime_checkable
class StartsOnLoop(Protocol):
    """Starts as a coroutine on the loop (a sub-supervisor, a liveliness watcher)."""

    def start_async(self, on_exit: ExitCallback) -> Awaitable[None]: ...


@runtime_checkable
class StopsOnLoop(Protocol):
    """Stops as a coroutine on the loop; True when it had to be killed."""

    def stop_async(self, timeout_s: float) -> Awaitable[bool]: ...


@runtime_checkable
class HasPath(Protocol):
    """Named by its place in the tree (events, durable inboxes follow it)."""

    path: str


@runtime_checkable
class HasInboxes(Protocol):
    """An in-process node: its durable inboxes, kept across restarts (topic -> inbox)."""

    durables: dict[str, Any]

    def inboxes(self) -> list[Any]:
        """The running node's inboxes and the durable ones, each once."""
        ...


@runtime_checkable
class HasPid(Protocol):
    """An OS-process child."""

    @property
    def pid(self) -> int | None: ...


@runtime_checkable
class HearsDeathEarly(Protocol):
    """An OS-process child that can report its end at an early death notice, before its
    exit status is known (runtime/deathnotice.py). A supervisor allows it only for a
    child it restarts whatever that status is (permanent)."""

    early_death: bool
