"""Children that are OS processes: Python process nodes and arbitrary commands.

`ProcessNode` runs a target `module:callable` (see `runtime/zygote.py`) in its
own process: forked from a `Zygote` when one is given and alive (milliseconds),
else in a fresh `python -m roboscale.runtime.forkserver run ...`. `CommandChild`
runs any argv (`rosrun pkg node`, a shell script): ready once started, once a
given line appears on its output, or once a probe says so.

Both are `ChildHandle`s. Every process gets its own session (process group);
stop() sends SIGTERM to the group, then SIGKILL after the timeout. Exits are
seen by one monitor thread that waits on pidfds of all direct children (the
zygote reports its own), kills what is left of the dead child's group while
its pid is still held, and reaps it: no zombies, no orphans. Children die with
this process: a fresh Python sets PR_SET_PDEATHSIG itself, a command is wrapped
in `setpriv --pdeathsig KILL` when available. PR_SET_PDEATHSIG follows the
thread that forked, so every fork happens on the long-lived monitor thread. It
reaches one generation only: every child also carries this process's lifeline
token, and the guardian (`roboscale/lifeline.py`) ends whatever still holds it
when this process dies, grandchildren in sessions of their own included.
on_exit callbacks run on their own thread, so a supervisor may restart a child
from inside the callback.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from roboscale import lifeline
from roboscale.runtime.child import ChildStartError, ExitCallback, ExitReason
from roboscale.runtime.threads import ThreadScope
from roboscale.runtime.zygote import ExitStatus, Zygote, ZygoteError
from roboscale.safewrite import open_stream

# Signals that mean "killed from outside"; any other fatal signal is a crash.
OUTSIDE_SIGNALS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
TAIL_LINES = 20
PROBE_INTERVAL_S = 0.02
KILL_WAIT_S = 5.0


def exit_reason(status: ExitStatus) -> tuple[ExitReason, str]:
    if status.signal is not None:
        sig = signal.Signals(status.signal)
        reason = ExitReason.KILLED if sig in OUTSIDE_SIGNALS else ExitReason.CRASH
        return reason, status.describe()
    return (ExitReason.NORMAL if status.code == 0 else ExitReason.CRASH), status.describe()


class Running(Protocol):
    """A started process as the handles see it: a zygote's ForkedChild or a `_Proc`."""

    pid: int
    error: str
    status: ExitStatus | None
    settled: threading.Event
    ready: threading.Event
    exited: threading.Event
    on_end: Callable[[], None] | None
    stamps: dict[str, int]  # monotonic ns of its life's steps (`ForkedChild.stamps`)

    def send_signal(self, sig: int) -> None: ...


@dataclass
class _Proc:
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
    on_end: Callable[[], None] | None = None
    stamps: dict[str, int] = field(default_factory=dict)  # "exit_seen": reaped here
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=TAIL_LINES))
    partial: bytes = b""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def send_signal(self, sig: int) -> None:
        with self.lock:  # the monitor reaps under this lock: the pid is still ours here
            if self.status is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, sig)

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
class _Launch:
    argv: list[str]
    env: dict[str, str]
    cwd: Path | None
    ready_line: re.Pattern[str] | None
    log: Path | None
    ready_pipe: bool
    future: Future[_Proc] = field(default_factory=Future)


class _Monitor:
    """One thread: forks direct children, reads their output, waits on their pidfds."""

    def __init__(self) -> None:
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = os.pipe()
        self._requests: queue.SimpleQueue[_Launch] = queue.SimpleQueue()
        self._sel.register(self._wake_r, selectors.EVENT_READ, ("wake", None))
        # A process-wide service: its scope surfaces a failure (every process node would
        # be left unwatched) rather than letting the thread end silently.
        self.threads = ThreadScope("process monitor", on_error=_report_thread_failure)
        self.threads.spawn(self._loop, name="process-monitor")

    def launch(self, request: _Launch) -> _Proc:
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

    def _start(self, req: _Launch) -> _Proc:
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
        proc = _Proc(popen, req.ready_line, log, pid=popen.pid)
        assert popen.stdout is not None
        self._sel.register(popen.stdout.fileno(), selectors.EVENT_READ, ("out", proc))
        if req.ready_pipe:
            self._sel.register(ready_r, selectors.EVENT_READ, ("ready", proc))
        self._sel.register(os.pidfd_open(popen.pid), selectors.EVENT_READ, ("pid", proc))
        return proc

    def _read_output(self, proc: _Proc, fd: int) -> None:
        chunk = _read(fd)
        if chunk:
            proc.output(chunk)
        else:
            self._sel.unregister(fd)
            if proc.popen.stdout is not None:
                proc.popen.stdout.close()

    def _read_ready(self, proc: _Proc, fd: int) -> None:
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

    def _reap(self, proc: _Proc, pidfd: int) -> None:
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

    def _close_streams(self, proc: _Proc) -> None:
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


class _Notifier:
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


def _monitor() -> _Monitor:
    monitor: _Monitor = _service("monitor", _Monitor)
    return monitor


def _notifier() -> _Notifier:
    notifier: _Notifier = _service("notifier", _Notifier)
    return notifier


class _ProcessChild:
    """start/stop/alive over a `Running` process; subclasses say how to launch it."""

    def __init__(self, name: str, ready_timeout_s: float) -> None:
        self.name = name
        self.ready_timeout_s = ready_timeout_s
        self._lock = threading.Lock()
        self._run: Running | None = None
        self._on_exit: ExitCallback | None = None
        self._armed = False  # an unrequested exit is still to be reported

    @property
    def pid(self) -> int | None:
        run = self._run
        return run.pid if run is not None and not run.exited.is_set() else None

    @property
    def process(self) -> Running | None:
        """The last start's process (pid, events, stamps); None before the first start."""
        return self._run

    def alive(self) -> bool:
        run = self._run
        return run is not None and not run.exited.is_set()

    def start(self, on_exit: ExitCallback) -> None:
        if self.alive():
            raise ChildStartError(self.name, "already running")
        run = self._launch()
        run.on_end = lambda: self._ended(run)
        self._await_ready(run)
        with self._lock:
            self._run, self._on_exit, self._armed = run, on_exit, True
        if run.exited.is_set():
            self._ended(run)  # it died between ready and arming: still reported once

    def stop(self, timeout_s: float) -> None:
        with self._lock:
            self._armed = False
            run = self._run
        if run is None or run.exited.is_set():
            return
        run.send_signal(signal.SIGTERM)
        if not run.exited.wait(timeout_s):
            run.send_signal(signal.SIGKILL)
            run.exited.wait(KILL_WAIT_S)

    def _launch(self) -> Running:
        raise NotImplementedError

    def _is_ready(self, run: Running) -> bool:
        return run.ready.is_set()

    def _await_ready(self, run: Running) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while not self._is_ready(run):
            left = deadline - time.monotonic()
            if run.exited.is_set() or run.error or left <= 0:
                detail = self._start_failure(run, left <= 0)
                self._kill(run)
                raise ChildStartError(self.name, detail)
            run.settled.wait(min(left, PROBE_INTERVAL_S))

    def _start_failure(self, run: Running, timed_out: bool) -> str:
        if run.error:
            detail = run.error
        elif run.exited.is_set() and run.status is not None:
            detail = f"{run.status.describe()} before it was ready"
        else:
            detail = f"not ready within {self.ready_timeout_s:g} s"
        return detail + self._tail(run)

    def _tail(self, run: Running) -> str:
        lines = list(getattr(run, "tail", []))[-3:]
        return f"; last output: {' | '.join(lines)}" if lines else ""

    def _kill(self, run: Running) -> None:
        run.send_signal(signal.SIGKILL)
        run.exited.wait(KILL_WAIT_S)

    def _ended(self, run: Running) -> None:
        with self._lock:
            report = self._armed and run is self._run
            self._armed = self._armed and not report
            on_exit = self._on_exit
        if report and on_exit is not None and run.status is not None:
            reason, detail = exit_reason(run.status)
            if run.error:
                detail += f" ({run.error})"
            name = self.name
            _notifier().post(lambda: on_exit(name, reason, detail))


class ProcessNode(_ProcessChild):
    """A Python target in its own OS process, forked from a zygote when one is alive."""

    def __init__(
        self,
        name: str,
        target: str,
        config: dict[str, Any] | None = None,
        *,
        zygote: Zygote | None = None,
        python: str = sys.executable,
        env: dict[str, str] | None = None,
        log: Path | None = None,
        ready_timeout_s: float = 10.0,
        standby: bool = False,
    ) -> None:
        super().__init__(name, ready_timeout_s)
        self.standby = standby  # restart on the zygote's warm standby of this target
        self.target = target
        self.config = config or {}
        self.zygote = zygote
        self.python = python
        self.env = env or {}
        self.log = log
        self.started_via = ""  # "zygote", "zygote standby" or "python": the last start's way

    def _launch(self) -> Running:
        if self.zygote is not None and self.zygote.alive():
            try:
                child = self.zygote.spawn(
                    self.name, self.target, self.config, log=self.log, standby=self.standby
                )
                self.started_via = "zygote standby" if child.standby else "zygote"
                return child
            except ZygoteError:
                pass  # it died meanwhile: a fresh interpreter still works
        self.started_via = "python"
        argv = [self.python, "-m", "roboscale.runtime.forkserver", "run", self.target]
        argv += [json.dumps(self.config), "--parent-pid", str(os.getpid())]
        env = {**os.environ, **self.env}
        return _launch_direct(self.name, _Launch(argv, env, None, None, self.log, True))


class CommandChild(_ProcessChild):
    """Any command as a child: ready when started, on an output line, or when probed."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        ready_line: str | None = None,
        probe: Callable[[], bool] | None = None,
        log: Path | None = None,
        ready_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(name, ready_timeout_s)
        if not argv:
            raise ValueError(f"command child {name!r}: argv is empty")
        self.argv = list(argv)
        self.env = env or {}
        self.cwd = cwd
        self.ready_line = re.compile(ready_line) if ready_line is not None else None
        self.probe = probe
        self.log = log

    def _launch(self) -> Running:
        argv = self.argv
        setpriv = shutil.which("setpriv")
        if setpriv is not None:  # dies with us; survives exec, unlike a Python hook
            argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
        env = {**os.environ, **self.env}
        request = _Launch(argv, env, self.cwd, self.ready_line, self.log, False)
        return _launch_direct(self.name, request)

    def _is_ready(self, run: Running) -> bool:
        if self.ready_line is not None:
            return run.ready.is_set()
        if self.probe is not None:
            return not run.exited.is_set() and self._probe()
        return not run.exited.is_set()

    def _probe(self) -> bool:
        assert self.probe is not None
        try:
            return bool(self.probe())
        except Exception:  # a probe that fails means "not yet"; the timeout still bounds it
            return False


def _launch_direct(name: str, request: _Launch) -> _Proc:
    lifeline.ensure()  # here, not on the monitor thread, which must not wait on it
    try:
        return _monitor().launch(request)
    except OSError as exc:
        raise ChildStartError(name, f"cannot run {request.argv[0]}: {exc}") from None
