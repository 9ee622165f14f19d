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

Protocol: one JSON object per line on each of its pipes (`runtime/zygoteprocess.py`).
The zygote reaps every child (SIGCHLD, waitid); children run in their own
session and die with the zygote (PR_SET_PDEATHSIG), and the zygote dies when
its client goes away (EOF on stdin, or its own death signal). The zygote carries
its client's lifeline token (`roboscale/lifeline.py`), and so do its children:
whatever they start in sessions of their own ends with the client too.

A target is `def main(config: dict, ready: Callable[[], None]) -> int | None`.
List its module in the preloads too, so that children do not import it each time.

Warm standby (`spawn(..., standby=True)`): `runtime/standby.py`.
The same runner serves fresh interpreters: `python -m roboscale.runtime.forkserver
run TARGET CONFIG_JSON --ready-fd N`.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from roboscale.runtime.deathnotice import DeathWatch
from roboscale.runtime.events import EventSubscriber, SupervisionEvent, log_event
from roboscale.runtime.forkedchild import ExitStatus, ForkedChild
from roboscale.runtime.forkserver import SINGLE_THREAD_ENV, ZygoteError
from roboscale.runtime.standby import (
    Standby,
    StandbyBook,
    arm_notice,
    prepare_notice,
    readable,
    registered,
)
from roboscale.runtime.zygoteprocess import end_zygote, launch_zygote, read_some, write_request

__all__ = ["ExitStatus", "ForkedChild", "Zygote", "ZygoteError"]


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
        on_event: EventSubscriber = log_event,
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
        self._announce: socket.socket | None = None  # where standbys announce themselves
        self._book = StandbyBook()
        self.standbys = self._book.last  # target -> pid of its last standby (0: failed)
        self.on_event = on_event  # "death_notice" events: a notice that fell back
        self._deaths = DeathWatch(self._notice_event)  # one waiter per handed-over instance

    def start(self) -> None:
        # The reader thread forks the zygote: PR_SET_PDEATHSIG follows the thread that
        # forked, and this one lives exactly as long as the zygote does.
        self._reader = threading.Thread(target=self._run, name="zygote-reader", daemon=True)
        self._reader.start()
        if not self._started.wait(self.start_timeout_s) or self._fatal:
            detail = self._fatal or f"no answer within {self.start_timeout_s:g} s"
            self.close()
            raise ZygoteError(f"zygote did not start: {detail}")

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
        if standby:
            handed = self._hand_over(name, target, config, log)
            if handed is not None:
                return handed
        child = ForkedChild(name, zygote=self, refill=target if standby else "")
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

    def _hand_over(
        self, name: str, target: str, config: dict[str, Any] | None, log: Path | None
    ) -> ForkedChild | None:
        """Start `target` on its waiting standby: one write to the standby's socket, no
        zygote on the way. None when none waits (or it just died): the caller forks."""
        order = json.dumps({"config": config or {}, "log": str(log) if log else None})
        waiting = self._book.take(target)
        if waiting is None:
            child = ForkedChild(name, zygote=self, standby=True, refill=target)
            # One being made takes it once prepared (as soon as a fork would be ready).
            with self._lock:  # registered with the promise: its exit finds the child
                child.pid = self._book.promise(target, child, order.encode() + b"\n")
                if child.pid:
                    self._children[child.pid] = child
            if child.pid:
                child.forked.set()
            return child if child.pid else None
        handed = waiting.child
        assert handed is not None  # its spare, made when it announced itself
        handed.name = name
        with self._lock:  # before the write: the standby's exit cannot come before it
            self._children[handed.pid] = handed
        if not waiting.send(order.encode() + b"\n"):
            self._book.untake(waiting)
            with self._lock:
                self._children.pop(handed.pid, None)
            return None
        handed.stamps["handed_over"] = time.monotonic_ns()
        handed.forked.set()
        return handed

    def keep_standby(self, target: str) -> None:
        """Have a warm standby of `target` made now (else the first standby spawn makes
        one once its child settled), unless one waits or is being made."""
        if not self._book.want(target):
            return
        try:
            self._send({"op": "standby", "target": target})
        except ZygoteError:
            self._book.unwanted(target)

    def signal(self, pid: int, sig: int) -> None:
        self._send({"op": "signal", "pid": pid, "sig": int(sig)})

    def close(self, timeout_s: float = 5.0) -> None:
        proc = self._proc
        if proc is None:
            return
        with contextlib.suppress(ZygoteError):
            self._send({"op": "quit"})
        end_zygote(proc, timeout_s)
        if self._reader is not None and self._reader is not threading.current_thread():
            self._reader.join(timeout_s)
        if proc.stdout is not None:
            proc.stdout.close()
        self._deaths.close(timeout_s)  # every child is dead: each waiter woke or wakes

    def _send(self, req: dict[str, Any]) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise ZygoteError("zygote is not running")
        with self._write_lock:
            write_request(proc.stdin, req)

    # ----------------------------------------------------------------- the reader thread

    def _run(self) -> None:
        try:
            proc, self._announce = launch_zygote(self.python, self.preload, self.env, self.log)
        except OSError as exc:
            self._fatal = f"cannot run {self.python}: {exc}"
            self._started.set()
            return
        with self._lock:
            self._proc = proc
            self.pid = proc.pid
        sel = selectors.DefaultSelector()
        try:
            self._read_all(proc, sel)
        finally:
            for key in list(sel.get_map().values()):
                if isinstance(key.data, Standby):
                    key.data.close()
            sel.close()
            if self._announce is not None:
                self._announce.close()
            self._fatal = self._fatal or "zygote exited"
            self._started.set()
            self._orphan_all()

    def _read_all(self, proc: subprocess.Popen[bytes], sel: selectors.BaseSelector) -> None:
        """Until the zygote's stdout ends: its events, the standbys' announcements, and
        what each standby says on its socket after its hand-over."""
        assert proc.stdout is not None and self._announce is not None
        out = proc.stdout.fileno()
        sel.register(out, selectors.EVENT_READ, "events")
        sel.register(self._announce, selectors.EVENT_READ, "announce")
        buffer = b""
        while True:
            for key, _ in sel.select():
                if sel.get_map().get(key.fd) is not key:
                    continue  # a standby's socket closed earlier in this round
                if key.data == "events":
                    chunk = read_some(out)
                    if not chunk:
                        return
                    *lines, buffer = (buffer + chunk).split(b"\n")
                    for raw in lines:
                        with contextlib.suppress(ValueError, KeyError):
                            self._event(json.loads(raw), sel)
                elif key.data == "announce":
                    self._announced(sel)
                else:
                    self._standby_says(key.data, sel)

    def _event(self, ev: dict[str, Any], sel: selectors.BaseSelector) -> None:
        kind = ev["event"]
        if kind in ("hello", "fatal"):
            self.hello = ev
            self._fatal = ev.get("detail", "") if kind == "fatal" else ""
            self._started.set()
            return
        if kind in ("standby_forked", "standby_failed"):
            self._standby_forked(ev)
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
        if kind == "exit":
            found = self._standby_exited(ev, sel) or found
        if found is not None:
            self._child_event(found, kind, ev)

    def _child_event(self, child: ForkedChild, kind: str, ev: dict[str, Any]) -> None:
        if "at_ns" in ev:
            child.stamps[f"{kind}_seen"] = time.monotonic_ns()
            child.stamps[f"{kind}_zygote"] = ev["at_ns"]
        if kind == "ready":
            child.ready.set()
        elif kind == "error":
            child.error = ev["detail"]
        elif kind == "exit":
            child.status = ExitStatus(ev["code"], ev["signal"])
            child.exited.set()
        child.settled.set()
        self._refill(child)
        if kind == "exit" and child.on_end is not None:
            child.on_end()

    def _refill(self, child: ForkedChild) -> None:
        """A child started by a standby spawn settled: its target gets a standby again
        (not before, so that its start had the machine's attention)."""
        target, child.refill = child.refill, ""
        if target:
            self.keep_standby(target)

    # ----------------------------------------------------------------- standbys (reader)

    def _standby_forked(self, ev: dict[str, Any]) -> None:
        if ev["event"] == "standby_failed":
            self._book.failed(ev["target"])
        else:
            self._book.forked(ev["target"], ev["pid"])

    def _announced(self, sel: selectors.BaseSelector) -> None:
        """A standby is prepared (or its target failed): it waits on the socket it sent."""
        assert self._announce is not None
        try:
            msg, fds, _flags, _addr = socket.recv_fds(self._announce, 65536, 1)
        except OSError:
            msg, fds = b"", []
        if not msg and not fds:  # no one can announce any more
            sel.unregister(self._announce)
            return
        socks = [socket.socket(fileno=fd) for fd in fds]
        try:
            info = json.loads(msg)
            target, pid = str(info["target"]), int(info["pid"])
        except (ValueError, KeyError, TypeError):
            for s in socks:
                s.close()
            return
        if "error" in info or not socks:
            promised = self._book.failed(target, pid)
            for s in socks:
                s.close()
            if promised is not None:  # its exit follows
                promised.error = f"its standby failed: {info.get('error', 'no socket')}"
                promised.settled.set()
            return
        standby = Standby(target, pid, socks[0])
        prepare_notice(standby, self._deaths, self._notice_event)  # before any order
        spare = ForkedChild("", pid=pid, zygote=self, standby=True, refill=target)
        spare.reply = lambda timeout_s: self._await_reply(standby, spare, timeout_s)
        spare.kill_now, standby.spare = standby.kill, spare
        # Unwatched while it waits (its exit report says if it dies): a spawn's thread
        # reads its READY (`_await_reply`); this one only a promised standby's.
        surplus, order = self._book.announced(standby)
        if surplus is not None:  # one waits per target: EOF ends the older one
            self._drop(surplus, sel)
        if order:
            sel.register(standby.sock, selectors.EVENT_READ, standby)
            if standby.child is not None:
                standby.child.kill_now = standby.kill
            if standby.send(order) and standby.child is not None:
                standby.child.stamps["handed_over"] = time.monotonic_ns()

    def _standby_says(self, standby: Standby, sel: selectors.BaseSelector) -> None:
        """READY or ERROR of a handed-over standby; EOF: it is gone (its exit follows)."""
        try:
            data = standby.sock.recv(65536)
        except OSError:
            data = b""
        if not data:
            self._drop(standby, sel)
            return
        self._heard(standby, data)

    def _await_reply(self, standby: Standby, child: ForkedChild, timeout_s: float) -> None:
        """`child.wait_settled` on the spawning thread, which wrote the hand-over: no
        GIL hand-off to the reader and back on a restart's path. EOF: the exit follows."""
        data = standby.await_reply(timeout_s)
        if data is None:
            return
        if data:
            self._heard(standby, data)
        if not data or child.settled.is_set():
            child.reply = None  # from now on its events are all the reader's

    def _heard(self, standby: Standby, data: bytes) -> None:
        """READY or ERROR of a handed-over standby, on whichever thread read it. After a
        READY the next standby is asked for by the new instance's notice waiter, once
        armed (off the restart's path: the zygote's fork and the standby's preparing
        would take a core from it); without a notice, here."""
        child = standby.child
        for word, rest in standby.lines(data):
            if child is None or word not in ("READY", "ERROR"):
                continue  # nothing counts before a hand-over
            stamp, _, notice = rest.partition(" ")
            if word == "READY":
                child.stamps["ready_seen"] = time.monotonic_ns()
                child.stamps["ready_target"] = int(stamp) if stamp.isdigit() else 0
                child.ready.set()
            else:
                child.error = rest
            child.settled.set()
            if word == "READY":
                arm_notice(standby, child, notice, self._notice_event, self._refill)
            else:
                self._refill(child)

    def _standby_exited(
        self, ev: dict[str, Any], sel: selectors.BaseSelector
    ) -> ForkedChild | None:
        """A handed-over child's last words count (READY just before it died); a standby
        killed before its hand-over is made again, one that failed by itself is not.
        The child promised this standby, if it died preparing."""
        gone, target, promised = self._book.exited(ev["pid"])
        for standby in gone:
            while registered(sel, standby) and readable(standby.sock):
                self._standby_says(standby, sel)
            while not registered(sel, standby) and (data := standby.await_reply(0)):
                self._heard(standby, data)  # unless its spawning thread is reading it
            self._drop(standby, sel)
        if target is not None:
            if ev["signal"] is not None:
                self.keep_standby(target)
            elif ev["code"] != 0:  # 0: told to go (EOF on its socket), not a failure
                self._book.mark_failed(target)
        return promised

    # ----------------------------------------------------------------- death notices

    def _notice_event(self, who: str, detail: str) -> None:
        self.on_event(SupervisionEvent("death_notice", f"zygote {self.pid}", who, detail=detail))

    def _drop(self, standby: Standby, sel: selectors.BaseSelector) -> None:
        self._book.dropped(standby)
        if registered(sel, standby):
            sel.unregister(standby.sock)
        standby.close()

    def _orphan_all(self) -> None:
        """The zygote died: its children died with it (PR_SET_PDEATHSIG)."""
        with self._lock:
            children = list(self._children.values()) + list(self._pending.values())
            self._children.clear()
            self._pending.clear()
        for standby in self._book.clear():
            standby.close()
        for child in children:
            child.error = child.error or "the zygote died"
            child.forked.set()
            self._child_event(child, "exit", {"code": None, "signal": int(signal.SIGKILL)})
