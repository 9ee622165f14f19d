"""Context switches of the processes of an echo pair: the thread hops, counted.

Linux counts, per thread, the switches it asked for (it blocked: voluntary) and those the
scheduler imposed (nonvoluntary), in /proc/PID/task/TID/status. A process's count is the
sum over its threads; a waited-for child's count, threads included, is in getrusage.
"""

from __future__ import annotations

import resource
import threading
from pathlib import Path
from types import TracebackType

SAMPLE_S = 0.02


def of_threads(pid: int) -> dict[int, int]:
    """Voluntary and nonvoluntary switches of each live thread of a process so far."""
    counts: dict[int, int] = {}
    for status in Path(f"/proc/{pid}/task").glob("*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue  # the thread ended meanwhile
        counts[int(status.parent.name)] = sum(
            int(line.split()[1])
            for line in text.splitlines()
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
        )
    return counts


class Watch:
    """The switches of a live process's threads while the block runs, sampled every
    SAMPLE_S by a thread the block owns: a thread that ends (rospy's per-connection
    thread ends with its peer) keeps the count it had at its last sample."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.base = of_threads(pid)
        self.last = dict(self.base)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="switches-watch")

    def _run(self) -> None:
        while not self._done.wait(SAMPLE_S):
            self.last.update(of_threads(self.pid))

    def __enter__(self) -> Watch:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done.set()
        self._thread.join()
        self.last.update(of_threads(self.pid))

    def total(self) -> int:
        return sum(n - self.base.get(tid, 0) for tid, n in self.last.items())


def of_children() -> int:
    """Switches of the children this process has waited for (each counted once)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_nvcsw + usage.ru_nivcsw


def of_self() -> int:
    """Switches of this process's threads so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_nvcsw + usage.ru_nivcsw
