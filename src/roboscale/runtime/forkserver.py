"""The zygote's own side: pre-load, then fork and reap children on request.

Runs in the zygote process (`python -m roboscale.runtime.forkserver serve`), and in a
fresh interpreter for one target (`... run TARGET CONFIG --ready-fd N`). Fork safety
and the client (`Zygote`) are described in `zygote.py`, the protocol in `zygoteprocess.py`.
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
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from roboscale.runtime import deathnotice

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


def run_standby(spec: str, announce_fd: int) -> int:
    """A warm standby: import the target and run its `prepare()` (if it has one: open a
    session, allocate), then announce itself to the zygote's client over `announce_fd`
    (a datagram socket every standby shares) with one end of a socket pair of its own,
    and wait on the other end for the client's hand-over, one JSON line {"config": ...,
    "log": ...}; then run the target, and say READY (with this process's monotonic ns)
    or ERROR on it. EOF before the hand-over: never needed, exit 0. Nothing of the target
    runs before the hand-over, so a standby is never a second live instance of its node;
    `prepare` must only get ready (no subscriptions). The zygote is on no step of a
    hand-over: the client writes to the standby and reads its READY itself."""
    announce = socket.socket(fileno=announce_fd)
    me = {"pid": os.getpid(), "target": spec}
    try:
        fn = load_target(spec)
        prepare = getattr(fn, "prepare", None)
        prepared = prepare() if callable(prepare) else None
    except Exception as exc:
        announce.send(json.dumps({**me, "error": f"{type(exc).__name__}: {exc}"}).encode())
        return 1
    own, theirs = socket.socketpair()
    json.loads(json.dumps({"config": {}, "log": None}))  # its pages too, before the order
    deathnotice.warm_instance()
    socket.send_fds(announce, [json.dumps(me).encode()], [theirs.fileno()])
    theirs.close()
    announce.close()
    got = _await_order(own)
    if got is None:
        return 0
    order, notice = got
    if order.get("log"):
        _log_to(order["log"])
    lock = threading.Lock()
    said = [False]

    def ready() -> None:
        """Holds the death notice in the calling thread (call it from the thread that
        runs the node's callbacks: a Runtime's loop, `rt.call(ready)`), then READY."""
        with lock:
            if not said[0]:
                said[0] = True
                at = time.monotonic_ns()
                _report(own.fileno(), f"READY {at} {_hold_notice(notice)}")

    config = order.get("config") or {}
    result = fn(config, ready) if prepare is None else fn(config, ready, prepared)  # type: ignore[call-arg]
    return result if isinstance(result, int) else 0


def _await_order(
    own: socket.socket,
) -> tuple[dict[str, Any], deathnotice.NoticePage | str] | None:
    """The hand-over (None at EOF: never needed), and the death notice's page the client
    offered first ("NOTICE" and its fd), mapped at once; or why there is none."""
    buffer = b""
    notice: deathnotice.NoticePage | str = "no notice was offered"
    while True:
        chunk, fds, _flags, _addr = socket.recv_fds(own, 65536, 1)
        for fd in fds:
            if isinstance(notice, str):
                try:
                    notice = deathnotice.NoticePage(fd)
                except deathnotice.DeathNoticeError as exc:
                    notice = str(exc)
            else:
                os.close(fd)
        if not chunk:
            return None
        buffer += chunk
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            if line != b"NOTICE":
                return json.loads(line), notice


_held: list[deathnotice.NoticePage] = []  # mapped for the process's life (on a robust list)


def _hold_notice(notice: deathnotice.NoticePage | str) -> str:
    """Lock the death notice in this thread: "notice", or "nonotice WHY"."""
    if isinstance(notice, str):
        return f"nonotice {notice}"
    try:
        notice.hold()
    except deathnotice.DeathNoticeError as exc:
        return f"nonotice {exc}"
    _held.append(notice)
    return "notice"


def _log_to(path: str) -> None:
    log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


def _report(fd: int, line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(fd, (line.replace("\n", " ") + "\n").encode())


# --------------------------------------------------------------------------- server


class _Server:
    """The zygote's loop: one thread, one selector, no threads ever started."""

    def __init__(self, proto_in: int, proto_out: int, announce: int) -> None:
        self.proto_in, self.proto_out = proto_in, proto_out
        self.announce = announce  # the standbys' socket to the client (-1: none)
        self.sel = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        self.ready_fds: dict[int, int] = {}  # pid -> read end of its ready pipe
        self.live: set[int] = set()
        self.buffer = b""

    def emit(self, event: dict[str, Any]) -> None:
        os.write(self.proto_out, (json.dumps(event) + "\n").encode())

    def emit_stamped(self, event: dict[str, Any], at_ns: int) -> None:
        """An event of a child's life, with the zygote's monotonic clock when it saw it
        (one clock for every process of the host: the client times each stage with it)."""
        self.emit({**event, "at_ns": at_ns})

    def serve(self) -> int:
        signal.signal(signal.SIGCHLD, lambda _s, _f: None)
        signal.set_wakeup_fd(self.wake_w)
        self.sel.register(self.proto_in, selectors.EVENT_READ, "control")
        self.sel.register(self.wake_r, selectors.EVENT_READ, "sigchld")
        try:
            while True:
                for key, _ in self.sel.select():
                    if self.sel.get_map().get(key.fd) is not key:
                        continue  # a reaped child's pipe, closed earlier in this round
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
        elif op == "standby":
            self._fork_standby(str(req["target"]))
        elif op == "signal":
            pid = int(req["pid"])
            if pid in self.live:  # not yet reaped, so the pid cannot have been reused
                _signal_group(pid, int(req["sig"]))
        elif op == "quit":
            return False
        return True

    def _spawn(self, req: dict[str, Any]) -> int:
        """Fork a child for `req`; its pid (0 if the fork failed)."""
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
            return 0
        if pid == 0:
            os.close(r)
            self._child(req, w, zygote_pid)
        os.close(w)
        self.live.add(pid)
        self.ready_fds[pid] = r
        self.sel.register(r, selectors.EVENT_READ, pid)
        self.emit({"event": "spawned", "id": req["id"], "pid": pid})
        return pid

    def _fork_standby(self, target: str) -> None:
        """Fork a warm standby of `target` (the client asks for each one, and keeps count):
        it prepares, then announces itself to the client, never to this loop."""
        if self.announce < 0:
            self.emit({"event": "standby_failed", "target": target, "detail": "no socket"})
            return
        sys.stdout.flush()
        sys.stderr.flush()
        zygote_pid = os.getpid()
        try:
            pid = os.fork()
        except OSError as exc:
            self.emit({"event": "standby_failed", "target": target, "detail": str(exc)})
            return
        if pid == 0:

            def standby() -> int:
                os.setsid()
                die_with_parent(zygote_pid)
                self._forget_server(keep=self.announce)
                return run_standby(target, self.announce)

            _exit_with(standby)
        self.live.add(pid)
        self.emit({"event": "standby_forked", "target": target, "pid": pid})

    def _child(self, req: dict[str, Any], ready_fd: int, zygote_pid: int) -> NoReturn:
        def child() -> int:
            os.setsid()
            die_with_parent(zygote_pid)
            self._forget_server()
            if req.get("log"):
                flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW  # no link followed
                log = os.open(req["log"], flags, 0o644)
                os.dup2(log, 1)
                os.dup2(log, 2)
                os.close(log)
            return run_target(req["target"], req.get("config") or {}, ready_fd)

        _exit_with(child)

    def _forget_server(self, keep: int = -1) -> None:
        """In a fresh child: drop the zygote's signal handling and every fd of its loop
        (but `keep`)."""
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        self.sel.close()
        for fd in (
            self.proto_in,
            self.proto_out,
            self.wake_r,
            self.wake_w,
            self.announce,
            *self.ready_fds.values(),
        ):
            if fd != keep:
                with contextlib.suppress(OSError):
                    os.close(fd)

    def _ready_pipe(self, pid: int, fd: int) -> None:
        data = b""
        with contextlib.suppress(OSError):
            data = os.read(fd, 4096)
        for line in data.decode(errors="replace").splitlines():
            if line == "READY":
                self.emit_stamped({"event": "ready", "pid": pid}, time.monotonic_ns())
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
            reaped_ns = time.monotonic_ns()
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
            exited = {"event": "exit", "pid": pid, "code": None if sig else code, "signal": sig}
            self.emit_stamped(exited, reaped_ns)

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


def _exit_with(body: Callable[[], int]) -> NoReturn:
    """A forked child's end: `body`'s code (or SystemExit's), flushed, never back in the zygote."""
    code = 1
    try:
        code = body()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        # Between fork and the child's setsid its group does not exist yet.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _loop_modules() -> list[str]:
    """The event loop every process node's runtime starts: imported once here rather than
    in each child, where importing uvloop took 45-80 ms of every restart (2 busy cores,
    bench/chaos_scale.py)."""
    from roboscale.eventloop import loop_kind

    return ["uvloop"] if loop_kind() == "uvloop" else []


def serve(preload: Sequence[str], parent_pid: int, announce: int = -1) -> int:
    die_with_parent(parent_pid)
    # The protocol gets private fds; stray prints of preloaded modules go to stderr.
    proto_in, proto_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    server = _Server(proto_in, proto_out, announce)
    t0 = time.perf_counter()
    try:
        preload = [*_loop_modules(), *preload]
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
    deathnotice.warm()  # its standbys' ready() locks the notice at once
    # Objects that exist now are never collected: a GC pass in a child would write to
    # every page of the inherited heap and undo copy-on-write (as Instagram found).
    gc.freeze()
    hello = {"event": "hello", "pid": os.getpid(), "preloaded": list(preload), "threads": threads}
    server.emit({**hello, "import_ms": import_ms})
    return server.serve()


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m roboscale.runtime.forkserver")
    sub = p.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("serve", help="pre-load modules, then fork children on request")
    s.add_argument("--preload", default="", help="comma-separated modules to import")
    s.add_argument("--parent-pid", type=int, default=os.getppid())
    s.add_argument("--announce-fd", type=int, default=-1, help="the standbys' socket")
    r = sub.add_parser("run", help="run one target in this fresh interpreter")
    r.add_argument("target")
    r.add_argument("config", help="JSON object")
    r.add_argument("--ready-fd", type=int, required=True)
    r.add_argument("--parent-pid", type=int, default=os.getppid())
    args = p.parse_args(argv)
    if args.mode == "serve":
        preload = [m for m in args.preload.split(",") if m]
        code = serve(preload, args.parent_pid, args.announce_fd)
        os._exit(code)  # a preload's threads (refused above) must not keep it alive
    die_with_parent(args.parent_pid)
    return run_target(args.target, json.loads(args.config), args.ready_fd)


if __name__ == "__main__":
    sys.exit(main())
