"""The settings every Zenoh session of roboscale is opened with (the runtime's bridge, the
zenoh backend, its routers and bench/): explicit endpoints, scouting off.

They live in the runtime, the lowest layer that opens sessions, so that the backends and
bench/ take them from here and the runtime imports nothing above it.
"""

from __future__ import annotations

import json
import os
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
) -> Settings:
    """The (key, JSON5 value) settings of a session on explicit endpoints, scouting off.

    Zenoh moves messages above 3 KB between processes of one machine through shared
    memory by default; emulated hosts share one kernel, so there it must be off, or
    large messages would bypass the emulated link.
    """
    settings = [
        ("mode", json.dumps(mode)),
        ("scouting/multicast/enabled", "false"),
        ("scouting/gossip/enabled", "false"),
        ("listen/endpoints", json.dumps(list(listen))),
        ("connect/endpoints", json.dumps(list(connect))),
        ("transport/shared_memory/enabled", json.dumps(shared_memory)),
    ]
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
