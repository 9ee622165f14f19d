"""The death notice's robust mutex with real processes: what the kernel guarantees (the
mutex is released as the holding thread dies, before its process can be reaped), the
waiter's wake-up, its fallbacks, and its owner joining it. Ordering only, never timing."""

from __future__ import annotations

import errno
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator

import pytest
from tests.conftest import EVENT_TIMEOUT_S

from roboscale.runtime.deathnotice import DeathWatch, NoticeMutex

# A holder: maps the page it was given (its fd in argv) and locks it in the thread the test asks
# for, says "held", and then does what the test tells it on stdin, line by line.
HOLDER = textwrap.dedent(
    """
    import os, sys, threading
    from roboscale.runtime.deathnotice import NoticePage
    page = NoticePage(int(sys.argv[1]))
    where = sys.argv[2]
    if where == "thread":  # held by a thread that then ends; the process lives on
        t = threading.Thread(target=page.hold)
        t.start()
        t.join()
    else:
        page.hold()
    print("held", flush=True)
    for line in sys.stdin:
        if line.strip() == "fork":  # a child of the holder comes and goes
            pid = os.fork()
            if pid == 0:
                os._exit(0)
            os.waitpid(pid, 0)
            print("reaped", flush=True)
        elif line.strip() == "exit":
            break
    """
)


class Holder:
    """A real process holding a notice mutex (see HOLDER)."""

    def __init__(self, mutex: NoticeMutex, where: str = "main") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(mutex.fd), where],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            pass_fds=(mutex.fd,),
        )
        self.pidfd = os.pidfd_open(self.proc.pid)

    def expect(self, word: str) -> None:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], EVENT_TIMEOUT_S)
        assert ready, f"no {word!r} from the holder"
        assert self.proc.stdout.readline().decode().strip() == word

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"{line}\n".encode())
        self.proc.stdin.flush()

    def reapable(self) -> bool:
        return bool(select.select([self.pidfd], [], [], 0)[0])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(EVENT_TIMEOUT_S)
        os.close(self.pidfd)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


@pytest.fixture
def watch() -> Iterator[tuple[DeathWatch, list[tuple[str, str]]]]:
    reported: list[tuple[str, str]] = []
    deaths = DeathWatch(lambda who, what: reported.append((who, what)))
    try:
        yield deaths, reported
    finally:
        assert deaths.close() == []  # every waiter joined


def holding(where: str = "main") -> tuple[NoticeMutex, Holder]:
    mutex = NoticeMutex()
    holder = Holder(mutex, where)
    mutex.given()
    holder.expect("held")
    return mutex, holder


def test_a_killed_holders_mutex_is_released_before_its_pidfd_is_readable() -> None:
    """do_exit walks the dying thread's robust list (exit_mm_release) before the memory
    teardown and long before exit_notify makes the pidfd readable: so once readable,
    the mutex is owner-dead, never still held."""
    for _ in range(5):
        mutex, holder = holding()
        try:
            os.kill(holder.proc.pid, signal.SIGKILL)
            assert select.select([holder.pidfd], [], [], EVENT_TIMEOUT_S)[0]
            assert mutex.wait(0.0) == errno.EOWNERDEAD  # not ETIMEDOUT: released already
            mutex.release()
        finally:
            holder.close()
            mutex.close()


def test_the_waiter_wakes_when_the_holding_thread_dies_while_its_process_lives(
    watch: tuple[DeathWatch, list[tuple[str, str]]],
) -> None:
    """The notice follows the holding thread, not the process: here the process cannot
    end (it waits for the test) and its pidfd is still not readable at the notice."""
    deaths, reported = watch
    noticed = threading.Event()
    mutex, holder = holding("thread")
    try:
        waiter = deaths.prepare(mutex, "t")
        assert waiter is not None
        waiter.arm(noticed.set)
        assert noticed.wait(EVENT_TIMEOUT_S)
        assert not holder.reapable()
        holder.tell("exit")
        assert select.select([holder.pidfd], [], [], EVENT_TIMEOUT_S)[0]
    finally:
        holder.close()
    assert reported == []


def test_a_sigkill_wakes_the_waiter_once(
    watch: tuple[DeathWatch, list[tuple[str, str]]],
) -> None:
    deaths, reported = watch
    calls: list[int] = []
    woke = threading.Event()
    mutex, holder = holding()
    try:
        waiter = deaths.prepare(mutex, "k")
        assert waiter is not None
        waiter.arm(lambda: (calls.append(1), woke.set()))
        os.kill(holder.proc.pid, signal.SIGKILL)
        assert woke.wait(EVENT_TIMEOUT_S)
    finally:
        holder.close()
    assert deaths.close() == [] and calls == [1] and reported == []


def test_a_process_the_holder_forks_does_not_release_its_mutex() -> None:
    """glibc gives a forked child an empty robust list of its own: the holder's child
    ending (reaped before the holder says so) leaves the mutex held."""
    mutex, holder = holding()
    try:
        holder.tell("fork")
        holder.expect("reaped")
        assert mutex.wait(0.0) == errno.ETIMEDOUT  # still held by the holder
    finally:
        holder.close()
        mutex.close()


def test_a_waiter_armed_on_a_mutex_nobody_holds_falls_back_with_a_report(
    watch: tuple[DeathWatch, list[tuple[str, str]]],
) -> None:
    deaths, reported = watch
    waiter = deaths.prepare(NoticeMutex(), "nobody")
    assert waiter is not None
    waiter.arm(lambda: pytest.fail("no one died"))
    assert deaths.close() == []
    assert reported == [
        (
            "nobody",
            "no death notice (its instance did not hold it): the zygote's exit report stands",
        )
    ]


def test_close_joins_waiters_cancelled_unarmed_and_still_waiting(
    watch: tuple[DeathWatch, list[tuple[str, str]]],
) -> None:
    deaths, reported = watch
    cancelled = deaths.prepare(NoticeMutex(), "cancelled")
    assert cancelled is not None
    cancelled.cancel()
    assert deaths.prepare(NoticeMutex(), "never armed") is not None
    mutex, holder = holding()
    try:
        waiter = deaths.prepare(mutex, "alive")
        assert waiter is not None
        waiter.arm(lambda: pytest.fail("it lives"))
        assert deaths.close() == []  # within its wait slice, its holder still alive
        assert deaths.prepare(NoticeMutex(), "late") is None  # closed: none is started
    finally:
        holder.close()
    assert reported == []


def test_what_runs_first_on_an_armed_waiter_runs_before_the_death_and_its_failure_is_said(
    watch: tuple[DeathWatch, list[tuple[str, str]]],
) -> None:
    """`arm(first=...)` (the next standby asked for, off the restart's path) runs on the
    waiter's thread before it waits, whenever the death comes; a failure of it is
    reported, and the death is still noticed."""
    deaths, reported = watch
    order: list[str] = []
    woke = threading.Event()
    mutex, holder = holding()

    def first() -> None:
        order.append("first")
        raise RuntimeError("no zygote today")

    try:
        waiter = deaths.prepare(mutex, "f")
        assert waiter is not None
        waiter.arm(lambda: (order.append("death"), woke.set()), first=first)
        os.kill(holder.proc.pid, signal.SIGKILL)
        assert woke.wait(EVENT_TIMEOUT_S)
    finally:
        holder.close()
    assert order == ["first", "death"]
    assert reported == [("f", "before waiting: RuntimeError('no zygote today')")]
