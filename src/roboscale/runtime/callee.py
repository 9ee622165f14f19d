"""What the bus and the executor need of a node: a small protocol, so that neither
imports runtime/node.py (which imports both) — the bus-executor-node circle, cut.

`Node` satisfies it; the bus hands messages to a `Callee`, the executor's watchdogs fail
one whose callback overran or whose heartbeat is late.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable
from typing import Any, Protocol

from roboscale.runtime.child import ExitReason


class Mode(enum.Enum):
    """Where a callback runs."""

    INLINE = "inline"  # on the event loop (plain function)
    COROUTINE = "coroutine"  # as a task on the event loop (async def)
    THREAD = "thread"  # in the runtime's worker pool (blocking code)


class Callee(Protocol):
    """A node, as the bus and the executor see it."""

    name: str
    last_beat: float
    alive: bool

    def run_inline(
        self, fn: Callable[..., Any], args: tuple[Any, ...], deadline_s: float | None, label: str
    ) -> tuple[bool, Any]: ...

    def deliver(self, fn: Callable[[Any], Any], msg: Any, deadline_s: float | None) -> bool:
        """`run_inline(fn, (msg,), deadline_s, "subscription")`; whether it returned."""
        ...

    def run_callback(
        self,
        fn: Callable[..., Any],
        mode: Mode,
        deadline_s: float | None,
        args: tuple[Any, ...],
        label: str,
    ) -> asyncio.Future[Any] | None: ...

    def fail(self, reason: ExitReason, detail: str) -> None: ...
