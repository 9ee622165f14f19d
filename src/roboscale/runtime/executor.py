"""One executor per process: an asyncio event loop, a worker pool and the watchdogs.

Every in-process node of a process runs on this one loop. The runtime also
watches liveness:
- callbacks in a worker thread or coroutines past their deadline, and nodes
  whose heartbeat is late, are found by a periodic scan on the loop itself;
- an inline callback that blocks the loop cannot be seen from the loop, so a
  watchdog thread (`LoopWatchdog`) checks the callback currently running and,
  past its deadline, raises `CallbackHung` inside the loop thread; the node's
  dispatcher catches it and fails that node with reason HUNG, and its
  supervisor restarts it like any other failure.
The watchdog thread also gives freed heap memory back to the OS every
`trim_period_s` (runtime/heap.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import ctypes
import math
import threading
import time
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from roboscale.eventloop import loop_kind
from roboscale.runtime.bus import Bus
from roboscale.runtime.callee import Callee
from roboscale.runtime.child import ExitReason
from roboscale.runtime.events import EventSubscriber, SupervisionEvent
from roboscale.runtime.heap import TRIM_PERIOD_S, heap_trimmer

T = TypeVar("T")


def new_event_loop() -> asyncio.AbstractEventLoop:
    # The bridge pays one wake-up from another thread per message: uvloop took 17-20 % off
    # its 11 B round trip against asyncio (docs/runtime.md, "Known limit: latency").
    if loop_kind() == "uvloop":
        import uvloop

        loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        return loop
    return asyncio.new_event_loop()


class CallbackHung(BaseException):
    """Raised by the loop watchdog inside a callback that blocks the event loop too long.

    A BaseException so that a callback's own `except Exception` does not swallow it.
    """


class Due(Protocol):
    """Something the timer wheel calls when its time comes (a node's `Timer`)."""

    def on_due(self) -> None: ...


class TimerWheel:
    """The runtime's timers, grouped by the millisecond they fall due in: one loop timer
    per millisecond that has any, not one loop timer handle per timer and tick (the loop's
    own resolution is a millisecond). At 100,000 nodes ticking at 1 Hz each such handle
    lived a whole period, long enough for the cyclic garbage collector to promote it, and
    the full collections this set off took most of the process's CPU."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._slots: dict[int, list[Due]] = {}

    def add(self, due: float, item: Due) -> None:
        """Call `item.on_due()` in the millisecond `due` (loop time) falls in: up to 1 ms
        early, the loop's own resolution (rounding up instead made every 1 ms timer late,
        skipping ticks: 800 a second instead of 1,000)."""
        slot = math.floor(due * 1000.0)
        bucket = self._slots.get(slot)
        if bucket is None:
            bucket = self._slots[slot] = []
            self.loop.call_at(slot / 1000.0, self._fire, slot)
        bucket.append(item)

    def _fire(self, slot: int) -> None:
        bucket = self._slots.pop(slot, [])
        for n, item in enumerate(bucket):
            try:
                item.on_due()
            except BaseException:
                # Only what no callback guard stops (a late CallbackHung) gets here: the
                # others of this millisecond still fire, in the next loop turn.
                now = self.loop.time()
                for later in bucket[n + 1 :]:
                    self.add(now, later)
                raise


class Runtime:
    """The event loop, bus, worker pool and watchdogs shared by all nodes of a process."""

    def __init__(
        self,
        *,
        workers: int = 4,
        watchdog_period_s: float = 0.02,
        trim_period_s: float | None = TRIM_PERIOD_S,
    ) -> None:
        self.loop = new_event_loop()
        self.subscribers: list[EventSubscriber] = []
        self.bus = Bus(self.loop, self.emit)
        self.timers = TimerWheel(self.loop)
        self.watchdog_period_s = watchdog_period_s
        self.trim_period_s = trim_period_s  # None: never give freed heap back (heap.py)
        self.heap_trims = 0
        self._workers = workers
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None
        self.loop_thread_id: int | None = None
        # Deadlines of callbacks running as tasks or in threads: future -> (node, due, label).
        self.deadlines: dict[asyncio.Future[Any], tuple[Callee, float, str]] = {}
        # Nodes that must beat: node -> allowed silence in seconds.
        self.beating: dict[Callee, float] = {}
        # The inline callback running now, for the loop watchdog: (node, due, label).
        self.current: tuple[Callee, float, str] | None = None
        self.current_lock = threading.Lock()
        self._watchdog: LoopWatchdog | None = None
        self._scan_handle: asyncio.Handle | None = None

    # -- events -----------------------------------------------------------------
    def emit(self, event: SupervisionEvent) -> None:
        for subscriber in self.subscribers:
            subscriber(event)

    # -- the loop ---------------------------------------------------------------
    def in_loop(self) -> bool:
        return threading.get_ident() == self.loop_thread_id

    def start(self) -> Runtime:
        """Run the loop in a background thread (tests, embedding); see also run()."""
        ready = threading.Event()

        def main() -> None:
            asyncio.set_event_loop(self.loop)
            self.loop.call_soon(ready.set)
            self._run_loop()

        self._thread = threading.Thread(target=main, name="roboscale-runtime", daemon=True)
        self._thread.start()
        ready.wait()
        return self

    def run(self, main: Coroutine[Any, Any, T]) -> T:
        """Run the loop in this thread until `main` completes; return its result."""
        task = self.loop.create_task(main)
        task.add_done_callback(lambda _: self.loop.stop())
        self._run_loop()
        return task.result()

    def _run_loop(self) -> None:
        self.loop_thread_id = threading.get_ident()
        self._begin_watching()
        while True:
            try:
                self.loop.run_forever()
                return
            except CallbackHung:
                # The watchdog's exception arrived just after the callback it aimed at
                # had returned: nothing to fail any more; keep the loop running.
                continue

    def call(self, fn: Any, *args: Any, timeout_s: float = 10.0) -> Any:
        """Run `fn(*args)` on the loop from another thread and return its result."""
        if self.in_loop():
            return fn(*args)

        async def wrapper() -> Any:
            return fn(*args)

        return self.wait(wrapper(), timeout_s=timeout_s)

    def wait(self, coro: Coroutine[Any, Any, T], *, timeout_s: float = 10.0) -> T:
        """Run a coroutine on the loop from another thread and wait for its result."""
        if self.in_loop():
            coro.close()
            raise RuntimeError("Runtime.wait() called from the loop thread: await instead")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def close(self) -> None:
        """Stop the watchdogs, the loop and the worker pool."""
        if self._watchdog is not None:
            self._watchdog.stop()
        if self._thread is not None and self._thread.is_alive():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5.0)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if not self.loop.is_running() and not self.loop.is_closed():
            self._cancel_leftover_tasks()
            self.loop.close()

    def _cancel_leftover_tasks(self) -> None:
        # Supervisors and callbacks still pending (a tree not stopped) end here, not in GC.
        tasks = asyncio.all_tasks(self.loop)
        for task in tasks:
            task.cancel()
        if tasks:
            gathered = asyncio.gather(*tasks, return_exceptions=True)
            self.loop.run_until_complete(gathered)

    def __enter__(self) -> Runtime:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- worker threads ---------------------------------------------------------
    def in_thread(self, fn: Any, *args: Any) -> asyncio.Future[Any]:
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                self._workers, thread_name_prefix="roboscale-worker"
            )
        return self.loop.run_in_executor(self._pool, fn, *args)

    # -- liveness ---------------------------------------------------------------
    def _begin_watching(self) -> None:
        self._scan_handle = self.loop.call_soon(self._scan)
        if self._watchdog is None:
            self._watchdog = LoopWatchdog(self)
            self._watchdog.start()

    def _scan(self) -> None:
        """Fail nodes whose task/thread callbacks overran or whose heartbeat is late."""
        now = time.monotonic()
        overdue = [(f, v) for f, v in self.deadlines.items() if v[1] <= now]
        for fut, (node, _, label) in overdue:
            self.deadlines.pop(fut, None)
            node.fail(ExitReason.HUNG, f"{label} ran past its deadline")
        late = [(n, s) for n, s in self.beating.items() if now - n.last_beat > s]
        for node, silence in late:
            node.fail(ExitReason.HUNG, f"no heartbeat for {silence:g}s")
        self._scan_handle = self.loop.call_later(self.watchdog_period_s, self._scan)


class LoopWatchdog:
    """A thread that interrupts an inline callback which blocks the loop past its deadline.

    The interruption is `CallbackHung` raised asynchronously in the loop thread
    (PyThreadState_SetAsyncExc). It takes effect at the callback's next Python
    bytecode: a callback blocked inside one long C call (a huge sleep, a
    blocking socket read) is interrupted only when that call returns. For those,
    put the node in its own OS process, where a supervisor can kill it.
    """

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="roboscale-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=2.0)

    def _watch(self) -> None:
        rt = self.runtime
        trim = heap_trimmer() if rt.trim_period_s is not None else None
        next_trim = time.monotonic() + (rt.trim_period_s or 0.0)
        while not self._stop.wait(rt.watchdog_period_s):
            if trim is not None and time.monotonic() >= next_trim:
                trim()
                rt.heap_trims += 1
                next_trim = time.monotonic() + (rt.trim_period_s or 0.0)
            current = rt.current
            if current is None or time.monotonic() < current[1]:
                continue
            with rt.current_lock:
                # Re-check under the lock: the dispatcher clears `current` under it too.
                if rt.current is current and rt.loop_thread_id is not None:
                    rt.current = None
                    _raise_in_thread(rt.loop_thread_id, CallbackHung)


def _raise_in_thread(thread_id: int, exc: type[BaseException]) -> None:
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id), ctypes.py_object(exc))
