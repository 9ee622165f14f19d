"""Give freed heap memory back to the OS now and then (glibc's `malloc_trim`).

glibc gives threads that allocate arenas of their own and, by itself, hands memory
back to the OS only from the top of an arena. In a process node, Zenoh's receive
thread allocates every sample and the bridge's drain thread frees it; a burst (the
loop held up, the channel filling) grows that arena, and once drained the memory is
free but stays in the arena, fragmented: RSS keeps the peak for good. The 1 kHz soak
(bench/soak.py) saw process nodes step up by 2-3 MB at such moments and never come
down; `malloc_trim(0)` called from a debugger gave the memory back at once.
`malloc_trim(0)` returns every whole free page of every arena, so RSS follows the
memory in use. The runtime calls it every `TRIM_PERIOD_S` from its watchdog thread,
off the loop (ctypes releases the GIL during the call).
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

TRIM_PERIOD_S = 10.0


def heap_trimmer() -> Callable[[], object] | None:
    """`malloc_trim(0)` of this process's C library; None where there is none (musl,
    macOS): there is nothing to call and nothing is trimmed."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return functools.partial(trim, 0)
