"""The settings every Zenoh session of roboscale is opened with (the runtime's bridge, the
zenoh backend, its routers and bench/): explicit endpoints, scouting off.

They live in the runtime, the lowest layer that opens sessions, so that the backends and
bench/ take them from here and the runtime imports nothing above it.
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from pathlib import Path
from typing import Any

Settings = list[tuple[str, str]]  # (config key, JSON5 value), inserted in order

# Zenoh's thread pools (tokio runtimes: rx, tx, acc, net, app), its own setting. A socket
# is registered with the reactor of the pool that made it: the acceptor's (acc) for a
# listened link, net's for a connected one. By default each received message therefore
# wakes acc's or net's thread first, which then wakes an rx worker: one thread hop more
# per message (bench/native_hops.py counted 1.4-1.8 switches per message on acc-0 or
# net-0). Handed over to rx, the rx worker reads its sockets itself.
THREADS_ENV = "ZENOH_RUNTIME"
THREAD_LAYOUT = "(acc: (handover: rx), net: (handover: rx))"


# Shared memory between the sessions of one host (zenoh 1.10's transport optimization,
# spelled out rather than left to its defaults): a payload of SHM_THRESHOLD bytes or more
# is copied once into a pool of SHM_POOL bytes that the sending session makes (mapped
# and mlock()ed, on its first such payload: that one still goes over TCP) and only its
# descriptor crosses the TCP link; the receiver maps the pool and reads the payload in
# place. Both sides must enable shared memory (a probe at session opening checks that
# they share /dev/shm), else payloads go over TCP. No API change for the publisher: the
# runtime's native link and zenoh-python both send bytes this way
# (tests/runtime/test_bridge_shm.py counts the bytes on the socket). Zenoh creates the
# segments in /dev/shm as *.zenoh, mode 0600 (only their user can open them).
SHM_THRESHOLD = 3072
SHM_POOL = 16 * 1024 * 1024
SHM_SETTINGS = (
    ("transport/shared_memory/mode", json.dumps("lazy")),
    ("transport/shared_memory/transport_optimization/enabled", "true"),
    ("transport/shared_memory/transport_optimization/pool_size", str(SHM_POOL)),
    ("transport/shared_memory/transport_optimization/message_size_threshold", str(SHM_THRESHOLD)),
)


# Zenoh's `lowlatency` unicast transport (no queue, no batching: the put writes the socket
# from the caller's thread, one thread hop less each way; `qos` off, which it requires).
# Opt-in (bridge `transport: lowlatency`): it does not fragment, so a message larger than
# one batch that does not go through shared memory is dropped by Zenoh with only a log
# line (eclipse-zenoh/zenoh#1087). A link is lowlatency only if both peers ask for it:
# zenoh 1.10 falls back to the queued transport otherwise (measured with raw sessions:
# puts of 60 and 200 KB cross a mixed link both ways, and vanish on a lowlatency one).
TRANSPORTS = ("queued", "lowlatency")
LOWLATENCY_SETTINGS = (
    ("transport/unicast/lowlatency", "true"),
    ("transport/unicast/qos/enabled", "false"),
)
# The largest payload a lowlatency bridge sends or takes. Zenoh's batch is 65,535 B on
# paper (transport/link/tx/batch_size), but with zenoh 1.10 on lowlatency the largest put
# that arrives was measured at 49,144 B of payload + attachment (49,114 + 30; 49,115 +
# 30 vanished), whatever the key's length (1 to 1,003 B: the key is declared once), i.e.
# 49,152 (48 KiB) less 8 B of framing. The cap keeps 1,152 B below that for the runtime's
# 22 B header and Zenoh's per-message extensions; tests/runtime/test_bridge_lowlatency.py
# sends a message at the cap and one byte over on both links.
LOWLATENCY_MAX_PAYLOAD = 48_000


SHM_DIR = Path("/dev/shm")
# Locked memory a bridge process with one peer needs: its pool and the peer's, both
# mlock()ed, and a 1.3 MB metadata segment each (VmLck 35,376 kB measured for a pair).
SHM_LOCKED_NEED = 2 * SHM_POOL + 4 * 1024 * 1024
CAP_IPC_LOCK = 14  # linux/capability.h


def shared_memory_blocked() -> str | None:
    """Why this process's sessions cannot use shared memory, or None.

    Zenoh mlock()s its pools; without CAP_IPC_LOCK and with RLIMIT_MEMLOCK below what a
    pool needs it fails to make one and every payload goes over TCP, with nothing said
    to the application (measured: the 8 MiB limit common for users, 4 MiB messages
    crossed the socket whole).
    """
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    if soft == resource.RLIM_INFINITY or soft >= SHM_LOCKED_NEED or _capable(CAP_IPC_LOCK):
        return None
    return (
        f"shared memory is on, but this process may lock only {soft // 1024} KiB "
        f"(RLIMIT_MEMLOCK, no CAP_IPC_LOCK) and Zenoh locks its {SHM_POOL >> 20} MiB pools: "
        f"payloads of {SHM_THRESHOLD} B or more go over TCP. For shared memory allow "
        f"{SHM_LOCKED_NEED >> 20} MiB or more (ulimit -l, memlock in limits.conf, "
        "systemd's LimitMEMLOCK)"
    )


def _capable(capability: int) -> bool:
    """Whether this process holds `capability` (its effective set, /proc/self/status)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> capability & 1)
    return False


def remove_orphaned_segments(directory: Path = SHM_DIR) -> list[str]:
    """Remove this user's Zenoh segments (`*.zenoh`) that no live process holds; the
    paths removed.

    Zenoh's segments live as long as the process, not the session, and a process that
    ends leaves some behind (its 1.3 MB metadata segment and 12 KB ones, its pool when
    killed: tests/runtime/test_bridge_shm.py). Zenoh removes them when the next process
    of the user first uses shared memory; this does the same for the last one. Every
    process that maps a segment holds a shared flock(2) on it, so the exclusive lock
    taken here succeeds only on orphans (Zenoh's own test), and it is held while the
    name is unlinked. Links and other users' files are never touched.
    """
    removed = []
    for path in sorted(directory.glob("*.zenoh")):
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue  # gone meanwhile, a link, or another user's
        try:
            own = os.fstat(fd)
            if own.st_uid != os.getuid() or not stat.S_ISREG(own.st_mode):
                continue
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # OSError: a process holds it
            if os.lstat(path).st_ino == own.st_ino:  # still the file locked
                os.unlink(path)
                removed.append(str(path))
        except OSError:
            continue
        finally:
            os.close(fd)
    return removed


def use_thread_layout() -> None:
    """Zenoh's pools as THREAD_LAYOUT in this process and its children, unless the user
    set ZENOH_RUNTIME (theirs wins). Zenoh reads it once, when it first starts a pool:
    call before the process's first session."""
    os.environ.setdefault(THREADS_ENV, THREAD_LAYOUT)


def zenoh_settings(
    listen: list[str] | tuple[str, ...],
    connect: list[str] | tuple[str, ...],
    *,
    mode: str = "peer",
    shared_memory: bool = True,
    retry_ms: int | None = None,
    transport: str = "queued",
) -> Settings:
    """The (key, JSON5 value) settings of a session on explicit endpoints, scouting off.

    `shared_memory`: payloads of SHM_THRESHOLD bytes or more go between sessions of one
    host through shared memory (SHM_SETTINGS); emulated hosts share one kernel, so there
    it must be off, or large messages would bypass the emulated link.
    `transport`: "queued" (Zenoh's default) or "lowlatency" (LOWLATENCY_SETTINGS; every
    peer of the session must be on the same one).
    """
    if transport not in TRANSPORTS:
        raise ValueError(f"transport {transport!r}: allowed are {', '.join(TRANSPORTS)}")
    settings = [
        ("mode", json.dumps(mode)),
        ("scouting/multicast/enabled", "false"),
        ("scouting/gossip/enabled", "false"),
        ("listen/endpoints", json.dumps(list(listen))),
        ("connect/endpoints", json.dumps(list(connect))),
        ("transport/shared_memory/enabled", json.dumps(shared_memory)),
    ]
    if shared_memory:
        settings += SHM_SETTINGS
    if transport == "lowlatency":
        settings += LOWLATENCY_SETTINGS
    if retry_ms is not None:
        # Peers started together connect to each other: retry soon, not after 1-4 s.
        retry = {"period_init_ms": retry_ms, "period_max_ms": 4 * retry_ms}
        settings.append(("connect/retry", json.dumps(retry)))
    return settings


def zenoh_config(settings: Settings) -> Any:
    """A zenoh.Config of `zenoh_settings` (and of runtime.security's settings)."""
    import zenoh

    conf = zenoh.Config()
    for key, value in settings:
        conf.insert_json5(key, value)
    return conf
