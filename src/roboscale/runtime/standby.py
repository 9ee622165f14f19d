"""The warm standbys a zygote's client holds (`runtime/zygote.py`): which one waits for
each target, which is being made, which were handed over. State only, under one lock;
the zygote's reader thread and `Zygote.spawn` do the I/O."""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

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

    def send(self, data: bytes) -> bool:
        """The hand-over: one write. False when it died (or is being closed)."""
        with self.lock:
            try:
                self.sock.sendall(data)
                return True
            except OSError:
                return False

    def close(self) -> None:
        with self.lock:
            self.sock.close()


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

    def take(self, target: str, child: ForkedChild) -> Standby | None:
        """The waiting standby of `target`, now `child`'s (None if none waits)."""
        with self._lock:
            standby = self._waiting.pop(target, None)
            if standby is not None:
                self._unused.pop(standby.pid, None)
                standby.child = child
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

    def clear(self) -> None:
        with self._lock:
            self._waiting.clear()
            self._handed.clear()
            self._making.clear()
            self._promised.clear()
