"""Watchdogs beyond exit: a child that lives on but stops doing its work is failed (`hung`).

`WatchedChild` wraps an OS-process child (a command, a ROS node, a process node). After
each start and a grace period, one thread owned by it checks, every CHECK_S:
- a heartbeat file the child must touch at least every `heartbeat_s` (its mtime);
- a minimum rate of messages on a ROS 1 topic over `window_s`;
- a maximum silence between two messages on that topic.
A broken watchdog stops the child at once (no graceful stop: it is hung) and reports it
through the supervisor's exit callback with reason HUNG and what was broken, so its
supervisor applies its restart policy and records the event like any other exit.

The topic is read by `TopicTap`, a TCPROS subscriber in the standard library
(runtime/tcpros.py): it asks the master for the topic's publishers (on a thread of its
own), asks each for a connection (`requestTopic`), and counts the length-prefixed frames
it receives without decoding or buffering them (md5sum `*`, as rostopic hz).
It registers no node with the master, so the graph the launch built stays as it is.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

from roboscale.runtime.child import ChildHandle, ChildRecipe, ExitCallback, ExitReason, HasPid
from roboscale.runtime.tcpros import FrameReader, TopicSubscriber

if TYPE_CHECKING:
    from roboscale.runtime.executor import Runtime

CHECK_S = 0.05
CALLER = "/roboscale_watchdog"


@dataclass(frozen=True, slots=True)
class Limits:
    heartbeat_file: str | None = None
    heartbeat_s: float | None = None
    topic: str | None = None
    min_rate_hz: float | None = None
    window_s: float = 1.0
    max_silence_s: float | None = None
    grace_s: float = 5.0


class _Stoppable(ChildHandle, Protocol):
    @property
    def pid(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class WatchedRecipe:
    """The recipe of a watched child: the inner child's recipe and the watchdog's limits.
    Each start builds a new inner child and a new `WatchedChild` around it."""

    inner: ChildRecipe
    limits: Limits
    master_uri: str | None = None  # where a topic watchdog asks for the topic's publishers

    @property
    def name(self) -> str:
        return self.inner.name

    def build(self, runtime: Runtime) -> WatchedChild:
        inner = self.inner.build(runtime)
        if not isinstance(inner, HasPid):
            raise TypeError(f"child {inner.name}: a watchdog watches OS-process children only")
        return WatchedChild(cast(_Stoppable, inner), self.limits, self.master_uri)

    def check(self, path: str) -> list[str]:
        problems = self.inner.check(path)
        if self.limits.topic is not None and self.master_uri is None:
            problems.append(f"{path}: watchdog.topic: a topic watchdog needs a ROS master")
        return problems


class TopicTap(TopicSubscriber):
    """Counts the messages published on a ROS 1 topic (bodies skipped); `poll` does the work."""

    def __init__(self, master_uri: str, topic: str) -> None:
        self.times: collections.deque[float] = collections.deque(maxlen=100_000)
        super().__init__(master_uri, topic, CALLER, keep=False)

    def received(self, uri: str, reader: FrameReader, frames: list[bytes]) -> None:
        stamp = time.monotonic()
        self.times.extend([stamp] * len(frames))

    def count_since(self, since: float) -> int:
        return sum(1 for t in reversed(self.times) if t >= since) if self.times else 0

    def last(self) -> float | None:
        return self.times[-1] if self.times else None


def broken(limits: Limits, started: float, tap: TopicTap | None, now: float) -> str:
    """What the child broke, in words; empty while it keeps its watchdog."""
    if now - started < limits.grace_s:
        return ""
    if limits.heartbeat_file is not None and limits.heartbeat_s is not None:
        try:
            age = time.time() - os.stat(limits.heartbeat_file).st_mtime
        except OSError:
            age = now - started
        age = min(age, now - started)  # a file older than this instance counts from its start
        if age > limits.heartbeat_s:
            return f"heartbeat file {limits.heartbeat_file} not touched for {age:.2f} s"
    if tap is None:
        return ""
    if limits.min_rate_hz is not None and now - started >= limits.grace_s + limits.window_s:
        rate = tap.count_since(now - limits.window_s) / limits.window_s
        if rate < limits.min_rate_hz:
            return (
                f"{limits.topic} at {rate:g} Hz over {limits.window_s:g} s, "
                f"below {limits.min_rate_hz:g} Hz"
            )
    if limits.max_silence_s is not None:
        last = tap.last()
        silence = now - max(last if last is not None else 0.0, started + limits.grace_s)
        if silence > limits.max_silence_s:
            return f"{limits.topic} silent for {silence:.2f} s (at most {limits.max_silence_s:g})"
    return ""


class WatchedChild:
    """An OS-process child with a watchdog; a ChildHandle like the one it wraps."""

    def __init__(self, inner: _Stoppable, limits: Limits, master_uri: str | None) -> None:
        self.inner = inner
        self.name = inner.name
        self.limits = limits
        self.master_uri = master_uri
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._on_exit: ExitCallback | None = None
        self.trips = 0

    @property
    def pid(self) -> int | None:
        return self.inner.pid

    def alive(self) -> bool:
        return self.inner.alive()

    def start(self, on_exit: ExitCallback) -> None:
        self._join()
        with self._lock:
            self._on_exit = on_exit
        self.inner.start(self._inner_exited)
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._watch, args=(self._stop,), name=f"watchdog {self.name}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        with self._lock:
            self._on_exit = None
        self._stop.set()
        self.inner.stop(timeout_s)
        self._join()

    def _join(self) -> None:
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            self._stop.set()
            thread.join()
        self._thread = None

    def _take_callback(self) -> ExitCallback | None:
        with self._lock:
            on_exit, self._on_exit = self._on_exit, None
            return on_exit

    def _inner_exited(self, name: str, reason: ExitReason, detail: str) -> None:
        self._stop.set()
        on_exit = self._take_callback()
        if on_exit is not None:
            on_exit(name, reason, detail)

    def _watch(self, stop: threading.Event) -> None:
        started = time.monotonic()
        limits = self.limits
        tap = None
        if limits.topic is not None and self.master_uri is not None:
            tap = TopicTap(self.master_uri, limits.topic)
        try:
            while not stop.is_set():
                if tap is not None:
                    tap.poll(CHECK_S)
                else:
                    stop.wait(CHECK_S)
                problem = broken(limits, started, tap, time.monotonic())
                if problem and not stop.is_set():
                    self._trip(problem)
                    return
        finally:
            if tap is not None:
                tap.close()

    def _trip(self, problem: str) -> None:
        on_exit = self._take_callback()
        if on_exit is None:
            return  # stopping, or it exited meanwhile
        self.trips += 1
        self.inner.stop(0)  # a requested stop: the inner child reports nothing
        on_exit(self.name, ExitReason.HUNG, f"watchdog: {problem}")
