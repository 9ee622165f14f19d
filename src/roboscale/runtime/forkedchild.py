"""A child of the zygote as its client sees it (`runtime/zygote.py`), and how a process ended."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from roboscale.runtime.zygote import Zygote


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
    # Its early death notice (runtime/deathnotice.py): set by its waiter before the exit.
    dead: threading.Event = field(default_factory=threading.Event)
    on_end: Callable[[], None] | None = None
    on_dead: Callable[[], None] | None = None
    zygote: Zygote | None = None
    standby: bool = False  # handed to a warm standby, not forked for this start
    refill: str = ""  # the target whose next standby is made once this child settles
    # Monotonic ns of its life's steps: "handed_over" (by this client), "ready_target"
    # (the standby's ready(), its own clock), "ready_zygote" and "exit_zygote" (the
    # zygote's), "ready_seen" and "exit_seen" (this client's reader), "notice_seen"
    # (its death notice's waiter).
    stamps: dict[str, int] = field(default_factory=dict)
    # Handed to a waiting standby by this client: reads its READY on the calling thread
    # (`wait_settled`) until it settled; None: the reader thread sets the events.
    reply: Callable[[float], None] | None = None
    # SIGKILL to its process at once (its standby's pidfd); False if it cannot.
    kill_now: Callable[[], bool] | None = None

    def wait_settled(self, timeout_s: float) -> None:
        """Until ready, error or exit, at most `timeout_s`. After a hand-over to a
        waiting standby only the thread that spawned it may call it: that thread reads
        the READY, and `ready` is set only then (`wait_ready` for a plain wait)."""
        reply = self.reply
        if reply is not None and not self.settled.is_set():
            reply(timeout_s)
        else:
            self.settled.wait(timeout_s)

    def wait_ready(self, timeout_s: float) -> bool:
        """Whether it became ready within `timeout_s` (the spawning thread)."""
        deadline = time.monotonic() + timeout_s
        while not self.settled.is_set() and (left := deadline - time.monotonic()) > 0:
            self.wait_settled(left)
        return self.ready.is_set()

    def send_signal(self, sig: int) -> None:
        if self.zygote is not None and not self.exited.is_set():
            self.zygote.signal(self.pid, sig)

    def kill_at_once(self) -> None:
        """SIGKILL without the zygote's wake-up when its pidfd is held (the zygote still
        kills its group when it reaps it); else its group, through the zygote."""
        kill_now = self.kill_now
        if kill_now is None or not kill_now():
            self.send_signal(signal.SIGKILL)
