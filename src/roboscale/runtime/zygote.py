"""A zygote: a pre-loaded parent that forks process nodes in milliseconds.

Starting a Python node from scratch pays the interpreter start and its imports
(about 17 ms for python + zenoh + a session, far more with numpy). Like
Android's zygote, `Zygote` keeps one process that has already imported the
heavy modules and forks a child per request; the child runs a target
`module:callable` with a JSON config and reports ready over a pipe.

Fork safety. Forking a process that has threads copies only the forking thread,
so any lock another thread held stays locked forever in the child. The zygote
therefore imports but never opens a Zenoh session, never starts a thread, and
refuses to serve if its preloads started one (numpy's BLAS pools are held to
one thread through the environment). A child opens its own Zenoh session
after the fork.

Protocol: one JSON object per line. On the zygote's stdin:
  {"op": "spawn", "id": 7, "target": "pkg.mod:main", "config": {...}, "log": path|null}
  {"op": "signal", "pid": 1234, "sig": 15}     (to the child's process group)
  {"op": "quit"}                               (or EOF: kill every child, exit)
On its stdout:
  {"event": "hello", "pid": P, "preloaded": [...], "threads": 1}  or {"event": "fatal", ...}
  {"event": "spawned", "id": 7, "pid": 1234}  or {"event": "spawn_failed", "id": 7, ...}
  {"event": "ready", "pid": 1234}             the child called ready()
  {"event": "error", "pid": 1234, "detail": "..."}   e.g. its target could not be imported
  {"event": "exit", "pid": 1234, "code": 0|null, "signal": null|9}
The zygote reaps every child (SIGCHLD, waitid); children run in their own
session and die with the zygote (PR_SET_PDEATHSIG), and the zygote dies when
its client goes away (EOF on stdin, or its own death signal).

A target is `def main(config: dict, ready: Callable[[], None]) -> int | None`.
List its module in the preloads too, so that children do not import it each time.
The same runner serves fresh interpreters: `python -m roboscale.runtime.zygote
run TARGET CONFIG_JSON --ready-fd N`.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import importlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

PR_SET_PDEATHSIG = 1
# Held to one thread so that preloading numpy starts no BLAS thread pool before fork.
SINGLE_THREAD_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
ReadyFn = Callable[[], None]
Target = Callable[[dict[str, Any], ReadyFn], int | None]


class ZygoteError(Exception):
    """The zygote could not start, died, or refused a request."""


_libc: Any = None


def die_with_parent(parent_pid: int) -> None:
    """Ask for SIGKILL when the parent dies; exit at once if it already has."""
    global _libc
    with contextlib.suppress(OSError, AttributeError):
        _libc = _libc or ctypes.CDLL(None, use_errno=True)  # loaded once, in the zygote
        _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:
        os._exit(1)


def load_target(spec: str) -> Target:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"target {spec!r} is not of the form 'module:callable'")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"target {spec!r} is not callable")
    fn: Target = target
    return fn


def run_target(spec: str, config: dict[str, Any], ready_fd: int) -> int:
    """Run a target in this process; READY or ERROR goes to `ready_fd`. Returns the exit code."""
    try:
        fn = load_target(spec)
    except Exception as exc:  # the parent gets the reason instead of a bare exit code
        _report(ready_fd, f"ERROR {type(exc).__name__}: {exc}")
        return 1
    lock = threading.Lock()
    said = [False]

    def ready() -> None:
        with lock:
            if not said[0]:
                said[0] = True
                _report(ready_fd, "READY")

    result = fn(config, ready)
    return result if isinstance(result, int) else 0


def _report(fd: int, line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, (line.replace("\n", " ") + "\n").encode())


# --------------------------------------------------------------------------- server


class _Server:
    """The zygote's loop: one thread, one selector, no threads ever started."""

    def __init__(self, proto_in: int, proto_out: int) -> None:
        self.proto_in, self.proto_out = proto_in, proto_out
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.ready_fds: dict[int, int] = {}  # pid -> read end of its ready pipe
        self.live: set[int] = set()
        self.buffer = b""

    def emit(self, event: dict[str, Any]) -> None:
        os.write(self.proto_out, (json.dumps(event) + "\n").encode())

    def serve(self) -> int:
        signal.signal(signal.SIGCHLD, lambda _s, _f: None)
        signal.set_wakeup_fd(self.wake_w)
        self.sel.register(self.proto_in, selectors.EVENT_READ, "control")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "sigchld")
        try:
            while True:
                for key, _ in self.sel.select():
                    if key.data == "control" and not self._control():
                        return 0
                    if key.data == "sigchld":
                        with contextlib.suppress(BlockingIOError):
                            os.read(self.wake_r, 4096)
                        self._reap()
                    if isinstance(key.data, int):
                        self._ready_pipe(key.data, key.fd)
        finally:
            self._kill_all()

    def _control(self) -> bool:
        chunk = os.read(self.proto_in, 65536)
        if not chunk:
            return False
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        requests = [json.loads(raw) for raw in lines if raw.strip()]
        return all(self._request(req) for req in requests)

    def _request(self, req: dict[str, Any]) -> bool:
        op = req.get("op")
        if op == "spawn":
            self._spawn(req)
        elif op == "signal":
            pid = int(req["pid"])
            if pid in self.live:  # not yet reaped, so the pid cannot have been reused
                _signal_group(pid, int(req["sig"]))
        elif op == "quit":
            return False
        return True

    def _spawn(self, req: dict[str, Any]) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        r, w = os.pipe()
        zygote_pid = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:
            os.close(r)
            os.close(w)
            self.emit({"event": "spawn_failed", "id": req["id"], "detail": str(exc)})
            return
        if pid == 0:
            os.close(r)
            self._child(req, w, zygote_pid)
        os.close(w)
        self.live.add(pid)
        self.ready_fds[pid] = r
        self.sel.register(r, selectors.EVENT_READ, pid)
        self.emit({"event": "spawned", "id": req["id"], "pid": pid})

    def _child(self, req: dict[str, Any], ready_fd: int, zygote_pid: int) -> NoReturn:
        code = 1
        try:
            os.setsid()
            die_with_parent(zygote_pid)
            self._forget_server()
            if req.get("log"):
                log = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.close(log)
            code = run_target(req["target"], req.get("config") or {}, ready_fd)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except BaseException:
            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)

    def _forget_server(self) -> None:
        """In a fresh child: drop the zygote's signal handling and every fd of its loop."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.sel.close()
        for fd in (
            self.proto_in,
            self.proto_out,
            self.wake_r,
            self.wake_w,
            *self.ready_fds.values(),
        ):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _ready_pipe(self, pid: int, fd: int) -> None:
        data = b""
        with contextlib.suppress(OSError):
            data = os.read(fd, 4096)
        for line in data.decode(errors="replace").splitlines():
            if line == "READY":
                self.emit({"event": "ready", "pid": pid})
            elif line.startswith("ERROR "):
                self.emit({"event": "error", "pid": pid, "detail": line[6:]})
        if not data:
            self._close_ready(pid)

    def _close_ready(self, pid: int) -> None:
        fd = self.ready_fds.pop(pid, None)
        if fd is not None:
            self.sel.unregister(fd)
            os.close(fd)

    def _reap(self) -> None:
        while True:
            try:
                # WNOWAIT: look first, so the group is killed while its pid is still held.
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            pid = info.si_pid
            _signal_group(pid, signal.SIGKILL)  # orphans of the child's group go too
            _, status = os.waitpid(pid, 0)
            self.live.discard(pid)
            fd = self.ready_fds.get(pid)
            if fd is not None:
                self._ready_pipe(pid, fd)  # a READY written just before exit still counts
                self._close_ready(pid)
            code = os.waitstatus_to_exitcode(status)
            sig = -code if code < 0 else None
            self.emit({"event": "exit", "pid": pid, "code": None if sig else code, "signal": sig})

    def _kill_all(self) -> None:
        for pid in list(self.live):
            _signal_group(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while self.live and time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, 0)
            except ChildProcessError:
                break
            self.live.discard(pid)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        # Between fork and the child's setsid its group does not exist yet.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def serve(preload: Sequence[str], parent_pid: int) -> int:
    die_with_parent(parent_pid)
    # The protocol gets private fds; stray prints of preloaded modules go to stderr.
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    server = _Server(proto_in, proto_out)
    t0 = time.perf_counter()
    try:
        for name in preload:
            importlib.import_module(name)
    except Exception as exc:
        server.emit({"event": "fatal", "detail": f"preloading {name!r} failed: {exc}"})
        return 1
    threads = len(os.listdir("/proc/self/task"))  # every thread, not only Python's
    if threads > 1:
        detail = f"preloading {list(preload)} started {threads - 1} thread(s); fork would be unsafe"
        server.emit({"event": "fatal", "detail": detail})
        return 1
    import_ms = (time.perf_counter() - t0) * 1000
    # Objects that exist now are never collected: a GC pass in a child would write to
    # every page of the inherited heap and undo copy-on-write (as Instagram found).
    gc.freeze()
    hello = {"event": "hello", "pid": os.getpid(), "preloaded": list(preload), "threads": threads}
    server.emit({**hello, "import_ms": import_ms})
    return server.serve()


# --------------------------------------------------------------------------- client


@dataclass
class ExitStatus:
    """How a process ended: an exit code, or the signal that killed it."""

    code: int | None
    signal: int | None

    def describe(self) -> str:
        if self.signal is not None:
            return f"killed by {signal.Signals(self.signal).name}"
        return f"exit code {self.code}"


@dataclass
class ForkedChild:
    """One child of the zygote, as its client sees it. Events are set by the reader thread."""

    name: str
    pid: int = 0
    error: str = ""
    status: ExitStatus | None = None
    forked: threading.Event = field(default_factory=threading.Event)  # pid known, or failed
    settled: threading.Event = field(default_factory=threading.Event)  # ready, error or exit
    ready: threading.Event = field(default_factory=threading.Event)
    exited: threading.Event = field(default_factory=threading.Event)
    on_end: Callable[[], None] | None = None
    zygote: Zygote | None = None

    def send_signal(self, sig: int) -> None:
        if self.zygote is not None and not self.exited.is_set():
            self.zygote.signal(self.pid, sig)


class Zygote:
    """A running zygote process and the one thread that reads its events."""

    def __init__(
        self,
        preload: Sequence[str] = ("zenoh",),
        *,
        python: str = sys.executable,
        log: Path | None = None,
        env: dict[str, str] | None = None,
        start_timeout_s: float = 30.0,
    ) -> None:
        self.preload = list(preload)
        self.env = {**os.environ, **(env or {}), **SINGLE_THREAD_ENV}
        self.python = python
        self.log = log
        self.start_timeout_s = start_timeout_s
        self.pid = 0
        self.hello: dict[str, Any] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._write_lock = threading.Lock()
        self._lock = threading.Lock()
        self._next_id = 0
        self._pending: dict[int, ForkedChild] = {}
        self._children: dict[int, ForkedChild] = {}
        self._started = threading.Event()
        self._fatal = ""
        self._reader: threading.Thread | None = None

    def start(self) -> None:
        # The reader thread forks the zygote: PR_SET_PDEATHSIG follows the thread that
        # forked, and this one lives exactly as long as the zygote does.
        self._reader = threading.Thread(target=self._run, name="zygote-reader", daemon=True)
        self._reader.start()
        if not self._started.wait(self.start_timeout_s) or self._fatal:
            detail = self._fatal or f"no answer within {self.start_timeout_s:g} s"
            self.close()
            raise ZygoteError(f"zygote did not start: {detail}")

    def _launch(self) -> subprocess.Popen[bytes]:
        argv = [self.python, "-m", "roboscale.runtime.zygote", "serve"]
        argv += ["--parent-pid", str(os.getpid()), "--preload", ",".join(self.preload)]
        err = self.log.open("ab") if self.log is not None else None
        try:
            return subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env=self.env,
                start_new_session=True,
            )
        finally:
            if err is not None:
                err.close()

    def __enter__(self) -> Zygote:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and not self._fatal

    def spawn(
        self,
        name: str,
        target: str,
        config: dict[str, Any] | None = None,
        *,
        log: Path | None = None,
        timeout_s: float = 5.0,
    ) -> ForkedChild:
        """Fork a child running `target`; returns once its pid is known (not yet ready)."""
        child = ForkedChild(name, zygote=self)
        with self._lock:
            self._next_id += 1
            req_id = self._next_id
            self._pending[req_id] = child
        req = {"op": "spawn", "id": req_id, "target": target, "config": config or {}}
        self._send({**req, "log": str(log) if log else None})
        if not child.forked.wait(timeout_s) or not child.pid:
            with self._lock:
                self._pending.pop(req_id, None)
            raise ZygoteError(f"zygote did not fork {name!r}: {child.error or 'no answer'}")
        return child

    def signal(self, pid: int, sig: int) -> None:
        self._send({"op": "signal", "pid": pid, "sig": int(sig)})

    def close(self, timeout_s: float = 5.0) -> None:
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(ZygoteError):
            self._send({"op": "quit"})
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout_s)
        if proc.stdout is not None:
            proc.stdout.close()

    def _send(self, req: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise ZygoteError("zygote is not running")
        with self._write_lock:
            try:
                proc.stdin.write((json.dumps(req) + "\n").encode())
                proc.stdin.flush()
            except (BrokenPipeError, OSError, ValueError) as exc:
                raise ZygoteError(f"zygote is gone: {exc}") from None

    def _run(self) -> None:
        try:
            proc = self._launch()
        except OSError as exc:
            self._fatal = f"cannot run {self.python}: {exc}"
            self._started.set()
            return
        with self._lock:
            self._proc = proc
            self.pid = proc.pid
        assert proc.stdout is not None
        for raw in proc.stdout:
            with contextlib.suppress(ValueError, KeyError):
                self._event(json.loads(raw))
        self._fatal = self._fatal or "zygote exited"
        self._started.set()
        self._orphan_all()

    def _event(self, ev: dict[str, Any]) -> None:
        kind = ev["event"]
        if kind in ("hello", "fatal"):
            self.hello = ev
            self._fatal = ev.get("detail", "") if kind == "fatal" else ""
            self._started.set()
            return
        if kind in ("spawned", "spawn_failed"):
            with self._lock:
                child = self._pending.pop(ev["id"])
                if kind == "spawned":
                    child.pid = ev["pid"]
                    self._children[child.pid] = child
            child.error = ev.get("detail", "")
            child.forked.set()
            return
        with self._lock:
            found = self._children.get(ev["pid"])
            if kind == "exit":
                self._children.pop(ev["pid"], None)
        if found is not None:
            self._child_event(found, kind, ev)

    def _child_event(self, child: ForkedChild, kind: str, ev: dict[str, Any]) -> None:
        if kind == "ready":
            child.ready.set()
        elif kind == "error":
            child.error = ev["detail"]
        elif kind == "exit":
            child.status = ExitStatus(ev["code"], ev["signal"])
            child.exited.set()
        child.settled.set()
        if kind == "exit" and child.on_end is not None:
            child.on_end()

    def _orphan_all(self) -> None:
        """The zygote died: its children died with it (PR_SET_PDEATHSIG)."""
        with self._lock:
            children = list(self._children.values()) + list(self._pending.values())
            self._children.clear()
            self._pending.clear()
        for child in children:
            child.error = child.error or "the zygote died"
            child.forked.set()
            self._child_event(child, "exit", {"code": None, "signal": int(signal.SIGKILL)})


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m roboscale.runtime.zygote")
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("serve", help="pre-load modules, then fork children on request")
    s.add_argument("--preload", default="", help="comma-separated modules to import")
    s.add_argument("--parent-pid", type=int, default=os.getppid())
    r = sub.add_parser("run", help="run one target in this fresh interpreter")
    r.add_argument("target")
    r.add_argument("config", help="JSON object")
    r.add_argument("--ready-fd", type=int, required=True)
    r.add_argument("--parent-pid", type=int, default=os.getppid())
    args = p.parse_args(argv)
    if args.mode == "serve":
        code = serve([m for m in args.preload.split(",") if m], args.parent_pid)
        os._exit(code)  # a preload's threads (refused above) must not keep it alive
    die_with_parent(args.parent_pid)
    return run_target(args.target, json.loads(args.config), args.ready_fd)


if __name__ == "__main__":
    sys.exit(main())
