"""runtime/heap.py: freed memory of another thread's arena goes back to the OS."""

from __future__ import annotations

import ctypes
import threading
import time

from roboscale.runtime.executor import Runtime
from roboscale.runtime.heap import heap_trimmer

BLOCK = 4096
BLOCKS = 12_000  # 48 MB in small blocks, far below glibc's mmap threshold


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def leave_a_fragmented_arena() -> None:
    """As a burst does: a thread allocates many blocks and frees all but the last, which
    pins the top of its arena, so glibc cannot give the free memory back by itself."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    blocks = [libc.malloc(BLOCK) for _ in range(BLOCKS)]
    for block in blocks:
        libc.memset(block, 1, BLOCK)  # touched: resident
    for block in blocks[:-1]:
        libc.free(block)


def test_trim_gives_a_thread_arenas_free_memory_back() -> None:
    trim = heap_trimmer()
    assert trim is not None  # glibc (Debian)
    thread = threading.Thread(target=leave_a_fragmented_arena)
    thread.start()
    thread.join()
    before = rss_bytes()
    trim()
    freed = before - rss_bytes()
    assert freed > BLOCK * BLOCKS // 2, f"only {freed} bytes given back"


def test_the_runtime_trims_on_its_watchdog_thread_unless_told_not_to() -> None:
    with Runtime(trim_period_s=0.05) as trimming, Runtime(trim_period_s=None) as never:
        deadline = time.monotonic() + 10.0
        while trimming.heap_trims < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert trimming.heap_trims >= 2
        assert never.heap_trims == 0  # its watchdog ran as long
