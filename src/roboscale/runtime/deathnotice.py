"""An early, exact death notice for a process node: a robust, process-shared mutex.

Linux frees a dying process's address space (exit_mm → mmput → exit_mmap, about
0.15 ms per MB on this VM) before the process becomes a zombie, closes its files or
makes its pidfd readable: a warm standby's death is 1.5-3 ms of that. But each exiting
thread first walks its robust futex list (exit_mm → exit_mm_release →
futex_exit_release → exit_robust_list, kernel/exit.c and kernel/futex/core.c): a robust
mutex the thread holds gets FUTEX_OWNER_DIED and one waiter is woken, before any of the
teardown. A waiter blocked in `pthread_mutex_timedlock` gets EOWNERDEAD microseconds
after the owner thread began to die.

So each handed-over instance holds one such mutex, locked by the thread that runs its
node's callbacks, before it says READY (`hold`). Once the mutex is released, that thread
is in do_exit: no callback of the old instance can run again, and a new instance may
start. The client (the supervisor's process) makes the mutex (`NoticeMutex`: one page
of a memfd it maps shared and passes to the standby with the hand-over, SCM_RIGHTS) and
waits on it in one thread per live instance (`DeathWatch`, owned by a `ThreadScope`).
The client makes it, not the zygote: the waiting side must map it too, the standby's
socket already joins the two, the zygote is on no step of a hand-over, and every
instance gets a fresh mutex (an owner-died mutex is never reused).

glibc (2.34+: pthread in libc) gives a forked child an empty robust list of its own
(fork re-registers it, `set_robust_list`), and the kernel gives every new task none
(copy_process), so a process forked by the instance never releases its mutex. Linux
only, as the runtime is (pidfd); ctypes on libc, no compiled part. What cannot be made
(no memfd, no robust mutexes) falls back to the zygote's exit report, with an event.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from roboscale.runtime.threads import ThreadScope

ATTR_BYTES = 16  # a pthread_mutexattr_t is 4
PTHREAD_PROCESS_SHARED = 1
PTHREAD_MUTEX_ROBUST = 1
CLOCK_MONOTONIC = 1
# A waiter's bounded wait: only to notice that its owner closes; a death wakes it at once.
WAIT_SLICE_S = 1.0

NoticeReporter = Callable[[str, str], None]  # (who, what happened): an event for the owner


class DeathNoticeError(Exception):
    """A robust mutex could not be made, mapped or locked."""


class _Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


_lib: Any = None
_lib_lock = threading.Lock()


def _pthread() -> Any:
    """glibc's pthread functions (in libc since 2.34), typed once per process."""
    global _lib
    with _lib_lock:
        if _lib is None:
            try:
                lib = ctypes.CDLL(None)  # calls release the GIL (CDLL, not PyDLL)
                one_pointer = [
                    "pthread_mutex_lock",
                    "pthread_mutex_unlock",
                    "pthread_mutexattr_init",
                    "pthread_mutexattr_destroy",
                ]
                for name in one_pointer:
                    fn = getattr(lib, name)
                    fn.argtypes, fn.restype = [ctypes.c_void_p], ctypes.c_int
                for name in ("pthread_mutexattr_setpshared", "pthread_mutexattr_setrobust"):
                    fn = getattr(lib, name)
                    fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_int], ctypes.c_int
                fn = lib.pthread_mutex_init
                fn.argtypes, fn.restype = [ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int
                fn = lib.pthread_mutex_clocklock
                fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.POINTER(_Timespec)]
                fn.restype = ctypes.c_int
            except (OSError, AttributeError) as exc:
                raise DeathNoticeError(f"no robust pthread mutexes in this libc: {exc}") from None
            _lib = lib
        return _lib


def warm() -> None:
    """Load the functions now (the zygote, before it forks standbys), not in a restart."""
    with contextlib.suppress(DeathNoticeError):  # said as an event when a notice is made
        _pthread()


def _check(rc: int, what: str) -> None:
    if rc != 0:
        raise DeathNoticeError(f"{what}: {os.strerror(rc)}")


class _Mapped:
    """One page of a memfd, mapped shared, with a mutex at its start (a pthread_mutex_t
    is 40 bytes on x86-64, 48 on aarch64: a page holds it on any)."""

    def __init__(self, fd: int) -> None:
        self._map = mmap.mmap(fd, mmap.PAGESIZE)
        self._anchor: Any = ctypes.c_char.from_buffer(self._map)  # pins the mapping
        self.addr = ctypes.addressof(self._anchor)

    def unmap(self) -> None:
        self._anchor = None  # the buffer export ends with it: the mapping may close
        self._map.close()


class NoticeMutex:
    """The client's side of one instance's death notice: the mutex it made, and the fd
    to hand to the instance (`fd`, -1 once given away)."""

    def __init__(self) -> None:
        lib = _pthread()
        try:
            fd = os.memfd_create("roboscale-death-notice", os.MFD_CLOEXEC)
        except (OSError, AttributeError) as exc:
            raise DeathNoticeError(f"no memfd: {exc}") from None
        try:
            os.ftruncate(fd, mmap.PAGESIZE)
            self._page: _Mapped | None = _Mapped(fd)
        except OSError as exc:
            os.close(fd)
            raise DeathNoticeError(f"cannot map the notice page: {exc}") from None
        self.fd = fd
        self._addr = self._page.addr
        attr = ctypes.create_string_buffer(ATTR_BYTES)
        try:
            _check(lib.pthread_mutexattr_init(attr), "pthread_mutexattr_init")
            try:
                _check(lib.pthread_mutexattr_setpshared(attr, PTHREAD_PROCESS_SHARED), "pshared")
                _check(lib.pthread_mutexattr_setrobust(attr, PTHREAD_MUTEX_ROBUST), "robust")
                _check(lib.pthread_mutex_init(self._addr, attr), "pthread_mutex_init")
            finally:
                lib.pthread_mutexattr_destroy(attr)
        except DeathNoticeError:
            self.close()
            raise

    def given(self) -> None:
        """The fd was sent to the instance: this side needs only its mapping."""
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def wait(self, timeout_s: float) -> int:
        """Lock, waiting at most `timeout_s`: 0 (taken: its owner never held it or let
        it go), EOWNERDEAD (its owner died: now ours), ETIMEDOUT, or another error."""
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC) + int(timeout_s * 1e9)
        until = _Timespec(now // 1_000_000_000, now % 1_000_000_000)
        rc: int = _pthread().pthread_mutex_clocklock(
            self._addr, CLOCK_MONOTONIC, ctypes.byref(until)
        )
        return rc

    def release(self) -> None:
        """After a wait that took it: unlock it, which also takes it off this thread's
        robust list (the page must not be unmapped while on it)."""
        _pthread().pthread_mutex_unlock(self._addr)

    def close(self) -> None:
        """Only once no thread waits on it (its waiter closes it on its way out)."""
        self.given()
        if self._page is not None:
            self._page.unmap()
            self._page = None


class NoticePage:
    """The instance's side: the page mapped when the standby is offered it (before any
    hand-over: a forked child pays a copy-on-write fault for each page it first writes,
    so nothing of this is left for the restart), its mutex locked by `hold`."""

    def __init__(self, fd: int) -> None:
        self.lib = _pthread()
        try:
            self._page = _Mapped(fd)
        except OSError as exc:
            raise DeathNoticeError(f"cannot map the notice page: {exc}") from None
        finally:
            os.close(fd)
        self.held = False

    def hold(self) -> None:
        """Lock it in the calling thread (the node's callback thread) until that thread
        ends: never unlocked. Keep the page referenced for the process's life."""
        rc = self.lib.pthread_mutex_lock(self._page.addr)
        if rc != 0:  # a fresh mutex is never owner-dead: anything else is a broken page
            raise DeathNoticeError(f"cannot lock the notice mutex: {os.strerror(rc)}")
        self.held = True


def warm_instance() -> None:
    """In a standby before it announces itself: take a notice's whole way once on a
    throwaway mutex (make, map, lock, unlock), so that its pages are its own by then."""
    with contextlib.suppress(DeathNoticeError, OSError):
        mutex = NoticeMutex()
        page = NoticePage(os.dup(mutex.fd))
        page.hold()
        page.lib.pthread_mutex_unlock(page._page.addr)
        page._page.unmap()
        mutex.close()


class Waiter:
    """One instance's waiter thread: started when its standby announced itself, armed
    when the instance said READY holding the mutex (a thread start is too slow for a
    restart's path; an event is not), or cancelled if it never will."""

    def __init__(self, mutex: NoticeMutex) -> None:
        self.mutex = mutex
        self.on_death: Callable[[], None] | None = None
        self.first: Callable[[], None] | None = None
        self.go = threading.Event()

    def arm(self, on_death: Callable[[], None], first: Callable[[], None] | None = None) -> None:
        """Wait for its death; `first` runs on the waiter's thread before it blocks."""
        self.on_death, self.first = on_death, first
        self.go.set()

    def cancel(self) -> None:
        self.go.set()  # with no on_death: it ends


class DeathWatch:
    """The client's waiters: one thread per prepared or live instance, each blocked on
    its mutex once armed, all owned by one ThreadScope (joined on close, errors surfaced
    through `report`)."""

    def __init__(self, report: NoticeReporter) -> None:
        self.report = report
        self._closing = threading.Event()
        self.threads = ThreadScope(
            "death notices", on_error=lambda name, exc: report(name, f"waiter failed: {exc!r}")
        )

    def prepare(self, mutex: NoticeMutex, name: str) -> Waiter | None:
        """A waiter for `mutex` (its thread now owns it), to be armed or cancelled."""
        waiter = Waiter(mutex)
        try:
            self.threads.spawn(self._wait, waiter, name, name=f"death-notice {name}")
        except RuntimeError:  # closed meanwhile: the exit report still comes
            mutex.close()
            return None
        return waiter

    def _wait(self, waiter: Waiter, name: str) -> None:
        mutex = waiter.mutex
        try:
            while not waiter.go.wait(WAIT_SLICE_S):
                if self._closing.is_set():
                    return
            if waiter.first is not None:
                try:
                    waiter.first()
                except Exception as exc:  # said, and the death is still waited for
                    self.report(name, f"before waiting: {exc!r}")
            if waiter.on_death is not None:
                self._until_death(mutex, name, waiter.on_death)
        finally:
            mutex.close()

    def _until_death(self, mutex: NoticeMutex, name: str, on_death: Callable[[], None]) -> None:
        while True:
            rc = mutex.wait(WAIT_SLICE_S)
            if rc == errno.ETIMEDOUT:
                if self._closing.is_set():
                    return
                continue
            if rc in (0, errno.EOWNERDEAD):
                mutex.release()
            if rc == errno.EOWNERDEAD:
                on_death()
                return
            # Taken without a death (its holder never locked it), or a broken page.
            why = "its instance did not hold it" if rc == 0 else os.strerror(rc)
            self.report(name, f"no death notice ({why}): the zygote's exit report stands")
            return

    def close(self, timeout_s: float = 5.0) -> list[str]:
        """Stop waiting (each waiter within WAIT_SLICE_S); the names of those not joined."""
        self._closing.set()
        return self.threads.close(timeout_s + WAIT_SLICE_S)
