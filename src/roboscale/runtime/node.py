"""The node API, modelled on rospy/rclpy: publishers, subscriptions, timers, services, parameters.

A node is a small object (slots, no thread, no task of its own) on the
process's one event loop. Write a node by subclassing `Node` and creating its
publishers, subscriptions and timers in `on_start`:

    class Echo(Node):
        def on_start(self) -> None:
            pong = self.publisher("/pong")
            self.subscribe("/ping", pong.publish)

A callback that raises fails its own node only (reason CRASH): its
subscriptions, timers and services are removed and its supervisor decides what
happens next. A `NodeRecipe` is how a supervisor's child spec names a node (plain
data); `NodeHandle` is the supervisor's view of one instance, built fresh from the
recipe at every start and restart, with a fresh `Node` and a fresh copy of the params
(both in runtime/nodehandle.py, and importable from here).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any

from roboscale.errors import UserError
from roboscale.runtime.bus import Inbox, Overflow, Topic
from roboscale.runtime.callee import Mode
from roboscale.runtime.child import ExitReason
from roboscale.runtime.executor import CallbackHung
from roboscale.runtime.names import check_name

# The supervisor's side of a node was in this module: it still imports from here.
from roboscale.runtime.nodehandle import NodeHandle as NodeHandle
from roboscale.runtime.nodehandle import NodeRecipe as NodeRecipe
from roboscale.runtime.nodehandle import error_detail

_MISSING: Any = object()


class ServiceError(UserError):
    """A service call failed: no such service, the server failed, or it timed out."""


def _mode(fn: Callable[..., Any], blocking: bool) -> Mode:
    if blocking:
        if inspect.iscoroutinefunction(fn):
            raise UserError(f"{fn!r} is a coroutine function: it cannot run in a worker thread")
        return Mode.THREAD
    return Mode.COROUTINE if inspect.iscoroutinefunction(fn) else Mode.INLINE


class Publisher:
    """Publishes on one topic; the message object itself is delivered, never copied."""

    __slots__ = ("dropped", "msg_type", "node", "topic")

    def __init__(self, node: Node, topic: Topic, msg_type: type) -> None:
        self.node = node
        self.topic = topic
        self.msg_type = msg_type
        self.dropped = 0  # messages published after the node ended (e.g. by an abandoned thread)

    def publish(self, msg: Any) -> None:
        if self.msg_type is not object and not isinstance(msg, self.msg_type):
            raise UserError(
                f"{self.topic.name} carries {self.msg_type.__name__}, got {type(msg).__name__}"
            )
        node = self.node
        if not node.alive:
            self.dropped += 1
            return
        runtime = node.runtime
        if runtime.in_loop():
            self.topic.publish(msg)
        else:  # from a worker-thread callback: hand over to the loop
            runtime.loop.call_soon_threadsafe(self.topic.publish, msg)


class Timer:
    """Calls a callback every `period_s` seconds on absolute deadlines until one fires late
    (busy loop; period under epoll's 1 ms): the ticks already due then are skipped, counted
    in `missed`, and the schedule restarts from now."""

    __slots__ = ("active", "deadline_s", "due", "fn", "missed", "mode", "node", "period_s", "ticks")

    def __init__(
        self,
        node: Node,
        period_s: float,
        fn: Callable[[], Any],
        mode: Mode,
        deadline_s: float | None,
    ) -> None:
        self.node, self.period_s, self.fn, self.mode = node, period_s, fn, mode
        self.deadline_s = deadline_s
        self.ticks = 0
        self.missed = 0
        runtime = node.runtime
        self.active = True
        self.due = runtime.loop.time() + period_s
        runtime.timers.add(self.due, self)

    def on_due(self) -> None:
        node = self.node
        if not self.active or not node.alive:
            return
        runtime = node.runtime
        self.due += self.period_s
        now = runtime.loop.time()
        if self.due <= now:
            self.missed += int((now - self.due) // self.period_s) + 1
            self.due = now + self.period_s
        runtime.timers.add(self.due, self)
        self.ticks += 1
        node.run_callback(self.fn, self.mode, self.deadline_s, (), "timer")

    def cancel(self) -> None:
        """No more ticks (the wheel lets go of it at its next due time)."""
        self.active = False


class Node:
    """One lightweight robot node. Subclass it and override `on_start` (and `on_shutdown`)."""

    __slots__ = (
        "_inboxes",
        "_services",
        "_tasks",
        "_timers",
        "alive",
        "handle",
        "last_beat",
        "name",
        "params",
        "runtime",
    )

    def __init__(self) -> None:
        self.alive = False

    def bind(self, handle: NodeHandle) -> None:
        self.handle = handle
        self.name = handle.name
        self.runtime = handle.runtime
        self.params = handle.params
        self.alive = True
        self.last_beat = time.monotonic()
        self._inboxes: list[Inbox] = []
        # Made at the first timer or service: most nodes have neither (56 bytes each).
        self._timers: list[Timer] | None = None
        self._services: list[str] | None = None
        self._tasks: set[asyncio.Future[Any]] | None = None

    # -- what subclasses override --------------------------------------------------------
    def on_start(self) -> Awaitable[None] | None:
        """Create publishers, subscriptions and timers. May be async; the node is ready after."""
        return None

    def on_shutdown(self) -> Awaitable[None] | None:
        """Called on a requested stop, bounded by the child's shutdown timeout."""
        return None

    # -- the API ---------------------------------------------------------------------------
    def publisher(self, topic: str, msg_type: type = object) -> Publisher:
        t = self.runtime.bus.topic(topic)
        t.declare_type(msg_type)
        return Publisher(self, t, msg_type)

    def subscribe(
        self,
        topic: str,
        callback: Callable[[Any], Any],
        *,
        msg_type: type = object,
        queue_size: int = 1000,
        overflow: Overflow | str = Overflow.DROP_OLDEST,
        durable: bool = False,
        blocking: bool = False,
        deadline_s: float | None = None,
    ) -> Inbox:
        """Call `callback(msg)` for each message; `durable` keeps the inbox across restarts."""
        t = self.runtime.bus.topic(topic)
        t.declare_type(msg_type)
        policy = _overflow(overflow)
        key = f"{self.handle.path}:{t.name}" if durable else None
        inbox = self.runtime.bus.inbox(t, queue_size, policy, key)
        if durable:
            self.handle.durables[t.name] = inbox
        self._inboxes.append(inbox)
        inbox.attach(self, callback, _mode(callback, blocking), self._deadline(deadline_s))
        return inbox

    def timer(
        self,
        period_s: float,
        callback: Callable[[], Any],
        *,
        blocking: bool = False,
        deadline_s: float | None = None,
    ) -> Timer:
        if not period_s > 0:
            raise UserError(f"timer period must be > 0 s, got {period_s}")
        timer = Timer(
            self, period_s, callback, _mode(callback, blocking), self._deadline(deadline_s)
        )
        if self._timers is None:
            self._timers = []
        self._timers.append(timer)
        return timer

    def service(
        self,
        name: str,
        handler: Callable[[Any], Any],
        *,
        blocking: bool = False,
        deadline_s: float | None = None,
    ) -> None:
        """Serve requests on `name`: `handler(request)` returns the response."""
        name = check_name(name, "service")
        services = self.runtime.bus.services
        current = services.get(name)
        if current is not None and current[0].alive and current[0] is not self:
            raise UserError(f"service {name} is already served by node {current[0].name}")
        services[name] = (self, handler, _mode(handler, blocking), self._deadline(deadline_s))
        if self._services is None:
            self._services = []
        self._services.append(name)

    async def call(self, name: str, request: Any, *, timeout_s: float = 1.0) -> Any:
        """Call service `name` and return its response; raise ServiceError on failure."""
        entry = self.runtime.bus.services.get(check_name(name, "service"))
        if entry is None or not entry[0].alive:
            raise ServiceError(f"service {name} is not available")
        server, handler, mode, deadline_s = entry
        if mode is Mode.INLINE:
            ok, value = server.run_inline(handler, (request,), deadline_s, f"service {name}")
            if not ok:
                raise ServiceError(f"service {name} failed: {value}")
            return value
        pending = server.run_callback(handler, mode, deadline_s, (request,), f"service {name}")
        assert pending is not None
        try:
            return await asyncio.wait_for(asyncio.shield(pending), timeout_s)
        except TimeoutError as e:
            raise ServiceError(f"service {name} did not answer within {timeout_s:g}s") from e
        except (Exception, asyncio.CancelledError) as e:
            if isinstance(e, asyncio.CancelledError) and not pending.cancelled():
                raise  # the caller itself was cancelled
            raise ServiceError(f"service {name} failed: {error_detail(e)}") from e

    def get_param(self, name: str, default: Any = _MISSING) -> Any:
        if name in self.params:
            return self.params[name]
        if default is _MISSING:
            known = ", ".join(sorted(self.params)) or "none"
            raise UserError(f"node {self.name}: no parameter {name!r} (parameters: {known})")
        return default

    def heartbeat(self) -> None:
        """Tell the liveness check that this node is still making progress."""
        self.last_beat = time.monotonic()

    # -- running callbacks -----------------------------------------------------------------
    def _deadline(self, deadline_s: float | None) -> float | None:
        return deadline_s if deadline_s is not None else self.handle.callback_deadline_s

    def run_inline(
        self, fn: Callable[..., Any], args: tuple[Any, ...], deadline_s: float | None, label: str
    ) -> tuple[bool, Any]:
        """Run fn on the loop; on an exception fail this node. Return (ok, value or why)."""
        rt = self.runtime
        if deadline_s is not None:
            rt.current = (self, time.monotonic() + deadline_s, label)
        try:
            return True, fn(*args)
        except CallbackHung:
            detail = f"{label} blocked the event loop past its {deadline_s}s deadline"
            self.fail(ExitReason.HUNG, detail)
            return False, detail
        except Exception as e:
            detail = f"{label} raised {error_detail(e)}"
            self.fail(ExitReason.CRASH, detail)
            return False, detail
        finally:
            if deadline_s is not None:
                with rt.current_lock:
                    rt.current = None

    def deliver(self, fn: Callable[[Any], Any], msg: Any, deadline_s: float | None) -> bool:
        """A subscription's inline callback on one message; False when it failed the node.

        `run_inline` without its argument and result tuples: this is every message's path,
        and each tuple is an allocation the cyclic garbage collector must count."""
        if deadline_s is not None:
            ok: bool = self.run_inline(fn, (msg,), deadline_s, "subscription")[0]
            return ok
        try:
            fn(msg)
            return True
        except CallbackHung:
            self.fail(ExitReason.HUNG, "subscription blocked the event loop")
            return False
        except Exception as e:
            self.fail(ExitReason.CRASH, f"subscription raised {error_detail(e)}")
            return False

    def run_callback(
        self,
        fn: Callable[..., Any],
        mode: Mode,
        deadline_s: float | None,
        args: tuple[Any, ...],
        label: str,
    ) -> asyncio.Future[Any] | None:
        """Run a callback in its mode; return the future of a task/thread callback."""
        if mode is Mode.INLINE:
            self.run_inline(fn, args, deadline_s, label)
            return None
        rt = self.runtime
        fut: asyncio.Future[Any] = (
            rt.loop.create_task(fn(*args)) if mode is Mode.COROUTINE else rt.in_thread(fn, *args)
        )
        if self._tasks is None:
            self._tasks = set()
        self._tasks.add(fut)
        if deadline_s is not None:
            rt.deadlines[fut] = (self, time.monotonic() + deadline_s, label)
        fut.add_done_callback(lambda f: self._callback_done(f, label))
        return fut

    def _callback_done(self, fut: asyncio.Future[Any], label: str) -> None:
        self.runtime.deadlines.pop(fut, None)
        if self._tasks is not None:
            self._tasks.discard(fut)
        if not self.alive:
            return  # this instance already ended; its late callbacks no longer matter
        if fut.cancelled():
            self.fail(ExitReason.KILLED, f"{label} was cancelled")
        elif (e := fut.exception()) is not None:
            self.fail(ExitReason.CRASH, f"{label} raised {error_detail(e)}")

    # -- ending ------------------------------------------------------------------------------
    def finish(self, detail: str = "finished") -> None:
        """End this node instance normally (reason NORMAL): its work is done."""
        if self.alive:
            self.teardown()
            self.handle.node_exited(self, ExitReason.NORMAL, detail)

    def fail(self, reason: ExitReason, detail: str) -> None:
        """End this node instance abnormally and report it to its supervisor."""
        if not self.alive:
            return
        self.teardown()
        self.handle.node_exited(self, reason, detail)

    def teardown(self) -> None:
        """Remove everything this instance holds; durable inboxes stay and keep buffering."""
        self.alive = False
        bus = self.runtime.bus
        for inbox in self._inboxes:
            if inbox.durable_key is not None:
                inbox.detach()
            else:
                bus.remove_inbox(inbox)
        self._inboxes.clear()
        for timer in self._timers or ():
            timer.cancel()
        self._timers = None
        for name in self._services or ():
            if (entry := bus.services.get(name)) is not None and entry[0] is self:
                del bus.services[name]
        self._services = None
        self.runtime.beating.pop(self, None)
        if self._tasks:
            for fut in list(self._tasks):
                self.runtime.deadlines.pop(fut, None)
                fut.cancel()  # a running worker thread cannot be stopped: it is abandoned


def _overflow(value: Overflow | str) -> Overflow:
    if isinstance(value, Overflow):
        return value
    try:
        return Overflow(value)
    except ValueError:
        allowed = ", ".join(o.value for o in Overflow)
        raise UserError(f"unknown overflow policy {value!r}: allowed are {allowed}") from None
