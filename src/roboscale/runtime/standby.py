"""The warm standbys a zygote's client holds (`runtime/zygote.py`): which one waits for
each target, which is being made, which were handed over. State only, under one lock;
the zygote's reader thread and `Zygote.spawn` do the I/O.

Warm standby: with `spawn(..., standby=True)` the client keeps, per target, one child
already forked, with the target imported and its optional `prepare()` run (`main.prepare
= lambda: open_session()`; the target is then called `main(config, ready, prepared)`).
Prepared, the standby announces itself on a datagram socket the client gave the zygote
(`--announce-fd`), passing one end of a socket pair of its own, and blocks on the other.
A spawn then hands the config over with one write to that socket, and the standby's
READY comes back on it, read by the spawning thread itself (`ForkedChild.wait_settled`):
neither the zygote nor the client's reader thread is on a step of a hand-over (the
zygote forks standbys when asked, reaps them, and reports their exits as any child's).
The next standby is asked for once the handed-over child settled (ready, error or exit;
after a READY by the new instance's notice waiter, off the restart's path). A standby
runs none of the target before its hand-over, so it is never a second live instance of
its node, whatever kills it; and a hand-over only follows the previous instance's end:
its exit as the zygote reported it (after it reaped it and killed its group), or its
death notice.
A killed standby is made again, one whose target fails is not (the next start forks
and reports why).

A hand-over carries the instance's death notice (`runtime/deathnotice.py`): a robust
mutex the client made when the standby announced itself and sent it then (a "NOTICE"
line and the memfd, SCM_RIGHTS), locked by the instance in `ready()`; READY says
"notice" if it holds it.
The client's waiter then reports the death as soon as the holding thread dies, before
the zygote can reap it; a node restarted on that notice (`ProcessNode.early_death`)
no longer waits for the exit report, which is then recognised by its pid and not
reported again. The zygote still reaps the old process and kills its group.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from roboscale.runtime.deathnotice import (
    DeathNoticeError,
    DeathWatch,
    NoticeMutex,
    NoticeReporter,
    Waiter,
)

if TYPE_CHECKING:
    from roboscale.runtime.zygote import ForkedChild


@dataclass(eq=False)
class Standby:
    """One standby: prepared, blocked on its end of `sock` until a hand-over arrives."""

    target: str
    pid: int
    sock: socket.socket
    child: ForkedChild | None = None  # once handed over
    buffer: bytes = b""
    lock: threading.Lock = field(default_factory=threading.Lock)  # send against close
    # The death notice its instance will hold (made when it announced; None: it could
    # not be made), offered to it at once, and the waiter that owns it from then on.
    notice: NoticeMutex | None = None
    waiter: Waiter | None = None
    # Handed over directly, its reply (READY) is read by the thread that wrote the
    # hand-over (`await_reply`), not the reader: no second thread on a restart's path.
    # Its socket is closed only when that thread is not in a wait on it.
    awaited: bool = False
    close_wanted: bool = False
    # Its pidfd (-1: none), opened when it announced itself and known then to be its
    # own (`open_pidfd`): a death notice kills it at once, no zygote on the way.
    pidfd: int = -1
    # The child a hand-over to it becomes, made when it announced itself (a ForkedChild
    # and its five events cost a restart about 30 µs).
    spare: ForkedChild | None = None

    def open_pidfd(self) -> None:
        """Open its pidfd; kept only if the standby is still there after it (no EOF on
        its socket: nothing else comes before a hand-over), so the pid was not reused."""
        try:
            pidfd = os.pidfd_open(self.pid)
        except OSError:
            return
        if readable(self.sock):
            os.close(pidfd)
        else:
            self.pidfd = pidfd

    def kill(self) -> bool:
        """SIGKILL its process through its pidfd (the zygote reaps it and kills its
        group later); False if it has none (or it was closed)."""
        with self.lock:
            if self.pidfd < 0:
                return False
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            return True

    def send(self, data: bytes) -> bool:
        """The hand-over: one write. False when it died (or is being closed)."""
        with self.lock:
            try:
                self.sock.sendall(data)
                return True
            except OSError:
                return False

    def offer_notice(self) -> None:
        """Its death notice's page, sent as soon as it announced ("NOTICE" and the fd):
        it maps it before any hand-over. Nothing is sent if none could be made."""
        with self.lock:
            notice = self.notice
            if notice is not None and notice.fd >= 0:
                with contextlib.suppress(OSError):  # it died: its EOF follows
                    socket.send_fds(self.sock, [b"NOTICE\n"], [notice.fd])
                notice.given()

    def take_waiter(self) -> Waiter | None:
        """Its notice's waiter, now the caller's to arm or cancel."""
        with self.lock:
            waiter, self.waiter = self.waiter, None
            return waiter

    def await_reply(self, timeout_s: float) -> bytes | None:
        """What it says within `timeout_s`, read on the calling thread: b"" once it is
        gone, None if nothing came yet (or another thread is reading it)."""
        with self.lock:
            if self.awaited:
                return None
            if self.sock.fileno() < 0:
                return b""
            self.awaited = True
        try:
            poller = select.poll()
            poller.register(self.sock, select.POLLIN)
            if not poller.poll(max(0, int(timeout_s * 1000))):
                return None
            return self.sock.recv(65536)
        except OSError:
            return b""
        finally:
            with self.lock:
                self.awaited = False
                if self.close_wanted:
                    self.sock.close()

    def lines(self, data: bytes) -> list[tuple[str, str]]:
        """Its complete lines so far, as (first word, the rest)."""
        *lines, self.buffer = (self.buffer + data).split(b"\n")
        said = [raw.decode(errors="replace").partition(" ") for raw in lines]
        return [(word, rest) for word, _, rest in said]

    def close(self) -> None:
        with self.lock:
            if self.awaited:  # the thread reading it closes it once out of its wait
                self.close_wanted = True
            else:
                self.sock.close()
            if self.pidfd >= 0:
                os.close(self.pidfd)
                self.pidfd = -1
            if self.waiter is not None:  # never handed over: its waiter ends
                self.waiter.cancel()
                self.waiter = None


class StandbyBook:
    """Per target at most one standby waiting and one being made."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, Standby] = {}
        self._making: dict[str, int] = {}  # target -> pid (0 until the zygote forked it)
        self._unused: dict[int, str] = {}  # pid -> target: forked, not handed over
        self._handed: dict[int, Standby] = {}  # pid -> handed-over standby, until its exit
        # pid -> (child, order): handed over while still preparing; sent once it announces
        self._promised: dict[int, tuple[ForkedChild, bytes]] = {}
        self.last: dict[str, int] = {}  # target -> pid of its last standby (0: failed)

    def want(self, target: str) -> bool:
        """Whether one must be asked for: none waits and none is being made."""
        with self._lock:
            if target in self._waiting or target in self._making:
                return False
            self._making[target] = 0
            return True

    def unwanted(self, target: str) -> None:
        """The request could not be sent."""
        with self._lock:
            self._making.pop(target, None)

    def forked(self, target: str, pid: int) -> None:
        with self._lock:
            self._unused[pid] = target
            if self._making.get(target) == 0:
                self._making[target] = pid

    def failed(self, target: str, pid: int = 0) -> ForkedChild | None:
        """Its fork or its target failed: none is made until a spawn asks again. The
        child it was promised to, if any."""
        with self._lock:
            self._making.pop(target, None)
            self.last[target] = 0
            promised = self._promised.pop(pid, None)
            return promised[0] if promised is not None else None

    def announced(self, standby: Standby) -> tuple[Standby | None, bytes]:
        """A standby is prepared. Either it was promised a hand-over (the order to send
        it, and `standby.child` is set), or it now waits (and the one it replaces, to be
        closed, is returned)."""
        with self._lock:
            if self._making.get(standby.target) in (0, standby.pid):
                del self._making[standby.target]
            self.last[standby.target] = standby.pid
            promised = self._promised.pop(standby.pid, None)
            if promised is not None:
                standby.child, order = promised
                self._handed[standby.pid] = standby
                return None, order
            surplus = self._waiting.get(standby.target)
            self._waiting[standby.target] = standby
            return surplus, b""

    def take(self, target: str) -> Standby | None:
        """The waiting standby of `target`, now its spare child's (None if none waits)."""
        with self._lock:
            standby = self._waiting.pop(target, None)
            if standby is not None:
                self._unused.pop(standby.pid, None)
                standby.child = standby.spare
                self._handed[standby.pid] = standby
            return standby

    def promise(self, target: str, child: ForkedChild, order: bytes) -> int:
        """None waits: the pid of the standby of `target` being made, now `child`'s, to
        be sent `order` once prepared (0 if none is being made, or its pid is unknown)."""
        with self._lock:
            pid = self._making.get(target, 0)
            if pid > 0:
                del self._making[target]
                self._unused.pop(pid, None)
                self._promised[pid] = (child, order)
            return pid

    def untake(self, standby: Standby) -> None:
        """Its hand-over failed: it is dead; its exit needs no more than its EOF."""
        with self._lock:
            self._handed.pop(standby.pid, None)

    def exited(self, pid: int) -> tuple[list[Standby], str | None, ForkedChild | None]:
        """The standbys of a process that exited (handed over or waiting), the target
        whose standby it was if it died before any hand-over, and the child it was
        promised to if it died preparing."""
        with self._lock:
            promised = self._promised.pop(pid, None)
            gone = [s for s in (self._handed.pop(pid, None),) if s is not None]
            target = self._unused.pop(pid, None)
            if target is not None:
                waiting = self._waiting.get(target)
                if waiting is not None and waiting.pid == pid:
                    gone.append(self._waiting.pop(target))
                if self._making.get(target) == pid:
                    del self._making[target]
            return gone, target, promised[0] if promised is not None else None

    def dropped(self, standby: Standby) -> None:
        """Its socket ended (or was replaced): it waits no more."""
        with self._lock:
            if self._waiting.get(standby.target) is standby:
                del self._waiting[standby.target]

    def mark_failed(self, target: str) -> None:
        with self._lock:
            self.last[target] = 0

    def clear(self) -> list[Standby]:
        """Forget everything (the zygote died); the standbys it held, to be closed."""
        with self._lock:
            held = [*self._waiting.values(), *self._handed.values()]
            self._waiting.clear()
            self._handed.clear()
            self._making.clear()
            self._promised.clear()
            return held


# ----------------------------------------------------------------- death notices (reader)

FELL_BACK = "no death notice ({}): the exit report stands"


def prepare_notice(standby: Standby, deaths: DeathWatch, report: NoticeReporter) -> None:
    """A standby announced itself: make its death notice, offer it the page (it maps it
    while it waits) and start the waiter that owns the mutex from now on (a thread start
    is off any restart's path here)."""
    try:
        notice = NoticeMutex()
    except DeathNoticeError as exc:
        report(standby.target, FELL_BACK.format(exc))
        return
    standby.notice = notice
    standby.open_pidfd()  # before the offer: only EOF can make its socket readable yet
    standby.offer_notice()
    standby.waiter = deaths.prepare(notice, f"{standby.target} (pid {standby.pid})")


def arm_notice(
    standby: Standby,
    child: ForkedChild,
    said: str,
    report: NoticeReporter,
    then: Callable[[ForkedChild], None],
) -> None:
    """Its instance said READY holding the notice ("notice"), or why not ("nonotice
    ..."). `then(child)` runs first on the armed waiter's thread (after the restart
    that woke it let go of the GIL), else here."""
    waiter = standby.take_waiter()
    if waiter is None or said != "notice":
        then(child)
        if waiter is not None:
            waiter.cancel()
            report(child.name, FELL_BACK.format(said.removeprefix("nonotice ") or "none held"))
        return  # (none made: reported then)
    waiter.arm(lambda: _noticed(child), first=lambda: then(child))


def _noticed(child: ForkedChild) -> None:
    """Its waiter woke: the thread that held the notice is in do_exit."""
    child.stamps["notice_seen"] = time.monotonic_ns()
    child.dead.set()
    if child.on_dead is not None:
        child.on_dead()


def registered(sel: selectors.BaseSelector, standby: Standby) -> bool:
    """Whether `sel` (the zygote client's reader) watches its socket."""
    fd = standby.sock.fileno()  # -1 once closed
    key = sel.get_map().get(fd) if fd >= 0 else None
    return key is not None and key.data is standby


def readable(sock: socket.socket) -> bool:
    with selectors.DefaultSelector() as probe:
        probe.register(sock, selectors.EVENT_READ)
        return bool(probe.select(0))
