"""Zenoh through the thinnest native binding, to one event loop: a baseline of bench/scale.py.

    zenoh_native_echo.py echo LISTEN                 peer listening on LISTEN; its loop puts
                                                     every sample of bench/ping back on
                                                     bench/pong
    zenoh_native_echo.py ping CONNECT COUNT SIZE...  peer connecting to CONNECT; per SIZE:
                                                     probes until the path is up, WARMUP pings,
                                                     then COUNT pings, each sent by the loop
                                                     when the last reply reaches it; one JSON
                                                     line per size: {"size": SIZE, "rtt_us": [...]}
    zenoh_native_echo.py ping --rate HZ CONNECT COUNT SIZE...
                                                     the same, each ping (warm-up too) sent at
                                                     start + i / HZ by a loop timer (or at
                                                     once when its reply came later); the line
                                                     also gives "rate_hz", the rate achieved

Shaped as zenoh_echo.py's -loop pair (the same settings, publishers, pinger and timing),
but the binding is `zenoh_min` (baselines/zenoh_pyo3, built by bench/scale.py into
bench/out/zenoh-rs/python/): Zenoh's callback queues each sample in Rust and wakes the
loop through an eventfd, so no Python thread stands between Zenoh and the loop. What a
pair of these costs is what Zenoh and one Python event loop per hop cost, with no runtime
code: the floor of any runtime that runs Python callbacks on one loop per process.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from zenoh_echo import LoopPinger, match, report

from roboscale.runtime.executor import new_event_loop
from roboscale.runtime.zenoh_config import zenoh_settings

MODULE_DIR = Path(__file__).resolve().parents[1] / "out" / "zenoh-rs" / "python"
BATCH = 256
sys.path.insert(0, str(MODULE_DIR))
try:
    import zenoh_min  # type: ignore[import-not-found]
except ImportError:
    sys.exit(f"zenoh_min is not built in {MODULE_DIR}: bench/scale.py builds it (needs cargo)")


class Polled:
    """An inbox read without the loop, for `match` (probing before the loop runs)."""

    def __init__(self, inbox: Any) -> None:
        self.inbox = inbox

    def try_recv(self) -> bytes | None:
        taken = self.inbox.take(1)
        return taken[0] if taken else None


def session(listen: list[str], connect: list[str]) -> Any:
    return zenoh_min.Session(zenoh_settings(listen, connect))


def on_loop(loop: Any, inbox: Any, handle: Callable[[bytes], None]) -> None:
    """Each payload of `inbox` to `handle`, on the loop, as the eventfd wakes it."""

    def ready() -> None:
        for payload in inbox.take(BATCH):
            handle(payload)

    loop.add_reader(inbox.fileno(), ready)


def echo(listen: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    s = session([listen], [])
    pong, inbox = s.publisher("bench/pong"), s.inbox("bench/ping")
    loop = new_event_loop()
    on_loop(loop, inbox, pong.put)
    print("ready", flush=True)
    loop.run_forever()


def ping(connect: str, count: int, sizes: list[int], rate_hz: float | None = None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    s = session([], [connect])
    try:
        out, inbox = s.publisher("bench/ping"), s.inbox("bench/pong")
        match(out, Polled(inbox), bytes(sizes[0]))
        loop = new_event_loop()
        pinger = LoopPinger(out, loop, rate_hz)
        on_loop(loop, inbox, pinger.pong)
        for size in sizes:
            samples = pinger.run(bytes(size), count)
            report(size, samples, pinger.achieved_hz)
    finally:
        s.close()


def rate_of(args: list[str]) -> tuple[float | None, list[str]]:
    """`--rate HZ` at the head of ping's arguments: the rate and the arguments after it."""
    if args[:1] != ["--rate"]:
        return None, args
    try:
        rate = float(args[1])
    except (IndexError, ValueError):
        rate = 0.0
    if not 0 < rate < float("inf"):
        sys.exit("zenoh_native_echo.py: --rate: a rate in Hz above 0")
    return rate, args[2:]


if __name__ == "__main__":
    role, args = sys.argv[1:2], sys.argv[2:]
    rate, args = rate_of(args) if role == ["ping"] else (None, args)
    if role == ["echo"] and len(args) == 1:
        echo(args[0])
    elif role == ["ping"] and len(args) >= 3:
        ping(args[0], int(args[1]), [int(s) for s in args[2:]], rate)
    else:
        sys.exit(__doc__)
