"""The process services of one client process: the monitor thread that forks direct
children and waits on their pidfds, and the notifier that delivers on_exit callbacks.

Split out of `runtime/process.py` (which describes both): one monitor and one notifier
per process, each owned by a `ThreadScope`, re-created in a forked child.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from roboscale import lifeline
from roboscale.runtime.threads import ThreadScope
from roboscale.runtime.zygote import ExitStatus
from roboscale.safewrite import open_stream

TAIL_LINES = 20


@dataclass
class Proc:
    """A direct child process; its events are set by the monitor thread."""

    popen: subprocess.Popen[bytes]
    ready_line: re.Pattern[str] | None
    log: IO[bytes] | None
    pid: int = 0
    error: str = ""
    status: ExitStatus | None = None
    settled: threading.Event = field(default_factory=threading.Event)
    ready: threading.Event = field(default_factory=threading.Event)
    exited: threading.Event = field(default_factory=threading.Event)
    dead: threading.Event = field(default_factory=threading.Event)  # no notice: never set
    on_end: Callable[[], None] | None = None
    on_dead: Callable[[], None] | None = None
    stamps: dict[str, int] = field(default_factory=dict)  # "exit_seen": reaped here
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    partial: bytes = b""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send_signal(self, sig: int) -> None:
        with self.lock:  # the monitor reaps under this lock: the pid is still ours here
            if self.status is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, sig)

    def wait_settled(self, timeout_s: float) -> None:
        self.settled.wait(timeout_s)

    def kill_at_once(self) -> None:
        self.send_signal(signal.SIGKILL)

    def output(self, chunk: bytes) -> None:
        if self.log is not None:
            self.log.write(chunk)
            self.log.flush()
        *lines, self.partial = (self.partial + chunk).split(b"\n")
        for raw in lines:
            line = raw.decode(errors="replace").rstrip()
            self.tail.append(line)
            if self.ready_line is not None and self.ready_line.search(line):
                self.ready.set()
                self.settled.set()


@dataclass
class Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: Path | None
    ready_line: re.Pattern[str] | None
    log: Path | None
    ready_pipe: bool
    future: Future[Proc] = field(default_factory=Future)


class Monitor:
    """One thread: forks direct children, reads their output, waits on their pidfds."""

    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        self._requests: queue.SimpleQueue[Launch] = queue.SimpleQueue()
        self._sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        # A process-wide service: its scope surfaces a failure (every process node would
        # be left unwatched) rather than letting the thread end silently.
        self.threads = ThreadScope("process monitor", on_error=_report_thread_failure)
        self.threads.spawn(self._loop, name="process-monitor")

    def launch(self, request: Launch) -> Proc:
        self._requests.put(request)
        os.write(self._wake_w, b"x")
        return request.future.result()

    def _loop(self) -> None:
        while True:
            for key, _ in self._sel.select():
                if self._sel.get_map().get(key.fd) is not key:
                    # Unregistered by an earlier key of this round: a child reaped (its
                    # pidfd first) takes its output and ready pipes with it, and their fd
                    # numbers may already serve a new child.
                    continue
                kind, proc = key.data
                if kind == "wake":
                    os.read(self._wake_r, 4096)
                    self._serve_requests()
                elif kind == "out":
                    self._read_output(proc, key.fd)
                elif kind == "ready":
                    self._read_ready(proc, key.fd)
                else:
                    self._reap(proc, key.fd)

    def _serve_requests(self) -> None:
        while True:
            try:
                req = self._requests.get_nowait()
            except queue.Empty:
                return
            try:
                req.future.set_result(self._start(req))
            except OSError as exc:
                req.future.set_exception(exc)

    def _start(self, req: Launch) -> Proc:
        ready_r, ready_w = os.pipe() if req.ready_pipe else (-1, -1)
        argv = [*req.argv, "--ready-fd", str(ready_w)] if req.ready_pipe else req.argv
        log = os.fdopen(open_stream(req.log, append=True), "ab") if req.log is not None else None
        try:
            popen = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env={**req.env, **lifeline.child_env()},
                cwd=req.cwd,
                pass_fds=(ready_w,) if req.ready_pipe else (),
                start_new_session=True,
            )
        except OSError:
            for fd in (ready_r, ready_w):
                if fd >= 0:
                    os.close(fd)
            if log is not None:
                log.close()
            raise
        if req.ready_pipe:
            os.close(ready_w)
        proc = Proc(popen, req.ready_line, log, pid=popen.pid)
        assert popen.stdout is not None
        self._sel.register(popen.stdout.fileno(), selectors.EVENT_READ, ("out", proc))
        if req.ready_pipe:
            self._sel.register(ready_r, selectors.EVENT_READ, ("ready", proc))
        self._sel.register(os.pidfd_open(popen.pid), selectors.EVENT_READ, ("pid", proc))
        return proc

    def _read_output(self, proc: Proc, fd: int) -> None:
        chunk = _read(fd)
        if chunk:
            proc.output(chunk)
        else:
            self._sel.unregister(fd)
            if proc.popen.stdout is not None:
                proc.popen.stdout.close()

    def _read_ready(self, proc: Proc, fd: int) -> None:
        chunk = _read(fd)
        for line in chunk.decode(errors="replace").splitlines():
            if line == "READY":
                proc.ready.set()
            elif line.startswith("ERROR "):
                proc.error = line[6:]
            proc.settled.set()
        if not chunk:
            self._sel.unregister(fd)
            os.close(fd)

    def _reap(self, proc: Proc, pidfd: int) -> None:
        # Whatever the child wrote just before it died counts (READY, its last words).
        for key in list(self._sel.get_map().values()):
            if key.data[1] is proc and key.data[0] in ("out", "ready"):
                reader = self._read_output if key.data[0] == "out" else self._read_ready
                while key.fd in self._sel.get_map() and _readable(key.fd):
                    reader(proc, key.fd)
        proc.stamps["exit_seen"] = time.monotonic_ns()
        with proc.lock:
            # The pid is held until reaped, so the group kill cannot hit a stranger.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            code = proc.popen.wait()
            proc.status = ExitStatus(None, -code) if code < 0 else ExitStatus(code, None)
        self._sel.unregister(pidfd)
        os.close(pidfd)
        self._close_streams(proc)
        proc.exited.set()
        proc.settled.set()
        if proc.on_end is not None:
            proc.on_end()

    def _close_streams(self, proc: Proc) -> None:
        for key in list(self._sel.get_map().values()):
            if key.data[1] is proc:
                self._sel.unregister(key.fd)
                if key.data[0] == "ready":
                    os.close(key.fd)
        if proc.popen.stdout is not None:
            proc.popen.stdout.close()
        if proc.log is not None:
            proc.log.close()


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""


def _readable(fd: int) -> bool:
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        return bool(sel.select(0))


class Notifier:
    """Delivers on_exit callbacks on one thread of their own, in order."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        self.threads = ThreadScope("exit notifier", on_error=_report_thread_failure)
        self.threads.spawn(self._loop, name="exit-notifier")

    def post(self, call: Callable[[], None]) -> None:
        self._queue.put(call)

    def _loop(self) -> None:
        while True:
            call = self._queue.get()
            try:
                call()
            except Exception as exc:  # a receiver's bug must not stop later notifications
                print(f"roboscale: on_exit callback failed: {exc!r}", file=sys.stderr)


def _report_thread_failure(name: str, error: BaseException) -> None:
    print(f"roboscale: thread {name} failed: {error!r}", file=sys.stderr)


_shared_lock = threading.Lock()
_shared: dict[str, Any] = {}


def _service(name: str, factory: Callable[[], Any]) -> Any:
    """One monitor and one notifier per process (re-created in a forked child)."""
    with _shared_lock:
        pid, obj = _shared.get(name, (0, None))
        if pid != os.getpid():
            obj = factory()
            _shared[name] = (os.getpid(), obj)
        return obj


def monitor() -> Monitor:
    found: Monitor = _service("monitor", Monitor)
    return found


def notifier() -> Notifier:
    found: Notifier = _service("notifier", Notifier)
    return found
