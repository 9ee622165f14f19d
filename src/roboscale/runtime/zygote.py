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
  {"op": "spawn", ..., "standby": true}       (hand over to the target's warm standby)
  {"op": "standby", "target": "pkg.mod:main"}  (keep one warm standby of that target)
  {"op": "signal", "pid": 1234, "sig": 15}     (to the child's process group)
  {"op": "quit"}                               (or EOF: kill every child, exit)
On its stdout:
  {"event": "hello", "pid": P, "preloaded": [...], "threads": 1}  or {"event": "fatal", ...}
  {"event": "spawned", "id": 7, "pid": 1234}  or {"event": "spawn_failed", "id": 7, ...}
  {"event": "standby", "target": "...", "pid": 1235}   a standby is prepared and waits
  {"event": "ready", "pid": 1234}             the child called ready()
  {"event": "error", "pid": 1234, "detail": "..."}   e.g. its target could not be imported
  {"event": "exit", "pid": 1234, "code": 0|null, "signal": null|9}
The zygote reaps every child (SIGCHLD, waitid); children run in their own
session and die with the zygote (PR_SET_PDEATHSIG), and the zygote dies when
its client goes away (EOF on stdin, or its own death signal). The zygote carries
its client's lifeline token (`roboscale/lifeline.py`), and so do its children:
whatever they start in sessions of their own ends with the client too.

A target is `def main(config: dict, ready: Callable[[], None]) -> int | None`.
List its module in the preloads too, so that children do not import it each time.

Warm standby (restarts in about a millisecond): with `spawn(..., standby=True)` the
zygote keeps, per target, one child already forked, with the target imported and its
optional `prepare()` run (`main.prepare = lambda: open_session()`; the target is then
called `main(config, ready, prepared)`), blocked on a pipe. A spawn hands the config
over to it instead of forking, and the next standby is forked once that child settled
(ready, error or exit). A standby runs none of the target before its hand-over, so it is
never a second live instance of its node, whatever kills it; a killed standby is made
again, one whose target fails is not (the next start forks and reports why).
The same runner serves fresh interpreters: `python -m roboscale.runtime.forkserver
run TARGET CONFIG_JSON --ready-fd N`.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roboscale import lifeline
from roboscale.runtime.forkserver import SINGLE_THREAD_ENV, ZygoteError
from roboscale.safewrite import open_stream

__all__ = ["ExitStatus", "ForkedChild", "Zygote", "ZygoteError"]


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
    standby: bool = False  # handed to a warm standby, not forked for this start

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
        self.standbys: dict[str, int] = {}  # target -> pid of its last standby (0: failed)

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
        argv = [self.python, "-m", "roboscale.runtime.forkserver", "serve"]
        argv += ["--parent-pid", str(os.getpid()), "--preload", ",".join(self.preload)]
        err = os.fdopen(open_stream(self.log, append=True), "ab") if self.log is not None else None
        try:
            return subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=err,
                env={**self.env, **lifeline.child_env()},
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
        standby: bool = False,
    ) -> ForkedChild:
        """Fork a child running `target` (with `standby`: hand it to the target's warm
        standby, and keep one); returns once its pid is known (not yet ready)."""
        child = ForkedChild(name, zygote=self)
        with self._lock:
            self._next_id += 1
            req_id = self._next_id
            self._pending[req_id] = child
        req = {"op": "spawn", "id": req_id, "target": target, "config": config or {}}
        self._send({**req, "log": str(log) if log else None, "standby": standby})
        if not child.forked.wait(timeout_s) or not child.pid:
            with self._lock:
                self._pending.pop(req_id, None)
            raise ZygoteError(f"zygote did not fork {name!r}: {child.error or 'no answer'}")
        return child

    def keep_standby(self, target: str) -> None:
        """Fork a warm standby of `target` now (else the first standby spawn makes one)."""
        self._send({"op": "standby", "target": target})

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
        if kind in ("standby", "standby_failed"):
            with self._lock:
                self.standbys[ev["target"]] = ev.get("pid", 0)
            return
        if kind in ("spawned", "spawn_failed"):
            with self._lock:
                child = self._pending.pop(ev["id"])
                if kind == "spawned":
                    child.pid = ev["pid"]
                    child.standby = bool(ev.get("standby"))
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
