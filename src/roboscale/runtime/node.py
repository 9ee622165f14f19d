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
recipe at every start and restart, with a fresh `Node` and a fresh copy of the params.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from roboscale.errors import UserError
from roboscale.runtime.bus import Inbox, Overflow, Topic
from roboscale.runtime.callee import Mode
from roboscale.runtime.child import ChildStartError, ExitCallback, ExitReason
from roboscale.runtime.childspec import NO_ARGS, name_problems
from roboscale.runtime.executor import CallbackHung, Runtime
from roboscale.runtime.names import check_name

_MISSING: Any = object()


class ServiceError(UserError):
    """A service call failed: no such service, the server failed, or it timed out."""


def _mode(fn: Callable[..., Any], blocking: bool) -> Mode:
    if blocking:
        if inspect.iscoroutinefunction(fn):
            raise UserError(f"{fn!r} is a coroutine function: it cannot run in a worker thread")
        return Mode.THREAD
    return Mode.COROUTINE if inspect.iscoroutinefunction(fn) else Mode.INLINE


def _describe(e: BaseException) -> str:
    # Walk to the innermost frame by hand: traceback.extract_tb reads source lines
    # (linecache, a stat per frame), which dominated the cost of a crash-restart.
    tb = e.__traceback__
    if tb is None:
        return f"{type(e).__name__}: {e}"
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f"{type(e).__name__}: {e} at {tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"


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
            raise ServiceError(f"service {name} failed: {_describe(e)}") from e

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
            detail = f"{label} raised {_describe(e)}"
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
            self.fail(ExitReason.CRASH, f"subscription raised {_describe(e)}")
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
            self.fail(ExitReason.CRASH, f"{label} raised {_describe(e)}")

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


NodeFactory = Callable[[], Node]
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
            raise ChildStartError(self.name, _describe(e)) from e
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
            raise ChildStartError(self.name, _describe(e)) from e
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
