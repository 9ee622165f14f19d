"""Raw zenoh-python ping-pong between two processes, a baseline of bench/scale.py.

    zenoh_echo.py echo LISTEN                 peer listening on LISTEN; puts every sample of
                                              bench/ping back unchanged on bench/pong
    zenoh_echo.py ping CONNECT COUNT SIZE...  peer connecting to CONNECT; per SIZE: probes until
                                              the path is up, WARMUP pings, then COUNT pings one
                                              after the other; one JSON line per size:
                                              {"size": SIZE, "rtt_us": [...]}
    zenoh_echo.py echo-loop LISTEN            the same, but each received sample crosses from a
    zenoh_echo.py ping-loop CONNECT COUNT SIZE...   reader thread to an event loop (the runtime's
                                              loop kind), which puts the reply / times the round
                                              trip and sends the next ping

The -loop pair is the floor of any one-executor-per-process runtime on zenoh-python: the
one thread hop from Zenoh's channel to the loop, and no runtime code at all.

Peer to peer on explicit tcp/127.0.0.1 endpoints, multicast and gossip scouting off.
Subscribers use FIFO channel handlers read by the main thread (no Python callback per
sample); publishers are express (no batching) with congestion control BLOCK. The
benchmark bounds each process with a timeout and kills its process group.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import zenoh

from roboscale.runtime.executor import new_event_loop
from roboscale.runtime.zenoh_config import zenoh_config, zenoh_settings

WARMUP = 20
MATCH_TIMEOUT_S = 30.0
REPLY_TIMEOUT_S = 10.0


def session(listen: list[str], connect: list[str]) -> Any:
    return zenoh.open(zenoh_config(zenoh_settings(listen, connect)))


def publisher(s: Any, key: str) -> Any:
    return s.declare_publisher(key, congestion_control=zenoh.CongestionControl.BLOCK, express=True)


def echo(listen: str) -> None:
    # A blocking recv() in Rust never returns to let Python handle a signal: die at once.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    s = session([listen], [])
    pong = publisher(s, "bench/pong")
    sub = s.declare_subscriber("bench/ping", zenoh.handlers.FifoChannel(1024))
    print("ready", flush=True)
    while True:
        pong.put(sub.recv().payload)


def report(size: int, samples: list[float], rate_hz: float | None = None) -> None:
    """One size's line; `rate_hz`: the rate a paced ping achieved."""
    line: dict[str, object] = {"size": size, "rtt_us": samples}
    if rate_hz is not None:
        line["rate_hz"] = rate_hz
    print(json.dumps(line), flush=True)


def match(ping: Any, sub: Any, payload: bytes) -> None:
    """Probe until a reply comes back, then drop replies to earlier probes."""
    deadline = time.monotonic() + MATCH_TIMEOUT_S
    while time.monotonic() < deadline:
        ping.put(payload)
        until = time.monotonic() + 0.1
        while time.monotonic() < until:
            if sub.try_recv() is not None:
                time.sleep(0.2)
                while sub.try_recv() is not None:
                    pass
                return
            time.sleep(0.001)
    sys.exit(f"zenoh ping: no echo within {MATCH_TIMEOUT_S:g} s")


def ping(connect: str, count: int, sizes: list[int]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    with session([], [connect]) as s:
        out = publisher(s, "bench/ping")
        sub = s.declare_subscriber("bench/pong", zenoh.handlers.FifoChannel(1024))
        for size in sizes:
            payload = bytes(size)
            match(out, sub, payload)
            samples = []
            for i in range(WARMUP + count):
                t0 = time.perf_counter_ns()
                out.put(payload)
                sub.recv()
                if i >= WARMUP:
                    samples.append((time.perf_counter_ns() - t0) / 1000.0)
            report(size, samples)


def hand_to_loop(sub: Any, loop: asyncio.AbstractEventLoop, handle: Callable[[Any], None]) -> None:
    """A reader thread that gives each sample's payload to `handle`, on the loop."""

    def read() -> None:
        while True:
            try:
                payload = sub.recv().payload
                loop.call_soon_threadsafe(handle, payload)
            except Exception:
                return  # the subscriber or the loop closed: the process is ending

    threading.Thread(target=read, daemon=True).start()


def echo_loop(listen: str) -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    s = session([listen], [])
    pong = publisher(s, "bench/pong")
    loop = new_event_loop()
    sub = s.declare_subscriber("bench/ping", zenoh.handlers.FifoChannel(1024))
    hand_to_loop(sub, loop, pong.put)
    print("ready", flush=True)
    loop.run_forever()


class LoopPinger:
    """Ping-pong on the loop: each reply, handed over by the reader thread, sends the next;
    with `rate_hz`, the next leaves at start + i / rate_hz (a loop timer: up to a
    millisecond late, so `achieved_hz` says what rate it kept), or at once when the reply
    came later than that."""

    def __init__(
        self, out: Any, loop: asyncio.AbstractEventLoop, rate_hz: float | None = None
    ) -> None:
        self.out, self.loop = out, loop
        self.period = None if rate_hz is None else 1.0 / rate_hz
        self.achieved_hz: float | None = None

    def run(self, payload: bytes, count: int) -> list[float]:
        self.payload, self.count, self.i, self.samples = payload, count, 0, []
        self.done: asyncio.Future[None] = self.loop.create_future()
        self.start = self.loop.time()  # the loop's clock paces (uvloop's: whole milliseconds)
        self.first_sent = time.perf_counter_ns() / 1e9  # ... this clock says what it kept
        self.loop.call_soon(self.send)
        paced = (WARMUP + count) * (self.period or 0.0)
        try:
            self.loop.run_until_complete(
                asyncio.wait_for(self.done, REPLY_TIMEOUT_S + count + paced)
            )
        except TimeoutError:
            sys.exit(f"zenoh ping-loop: {len(payload)} B round trips did not finish")
        if self.period is not None:  # sends per second, first to last, warm-up included
            span = max(self.last_sent - self.first_sent, 1e-9)
            self.achieved_hz = (WARMUP + count - 1) / span
        return self.samples

    def send(self) -> None:
        self.t0 = time.perf_counter_ns()
        self.last_sent = self.t0 / 1e9
        self.out.put(self.payload)

    def send_next(self) -> None:
        due = None if self.period is None else self.start + self.i * self.period
        if due is None or due <= self.loop.time():
            self.send()
        else:
            self.loop.call_at(due, self.send)

    def pong(self, _payload: Any) -> None:
        now = time.perf_counter_ns()
        if self.done.done():
            return
        if self.i >= WARMUP:
            self.samples.append((now - self.t0) / 1000.0)
        self.i += 1
        if self.i >= WARMUP + self.count:
            self.done.set_result(None)
        else:
            self.send_next()


def ping_loop(connect: str, count: int, sizes: list[int]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    with session([], [connect]) as s:
        out = publisher(s, "bench/ping")
        sub = s.declare_subscriber("bench/pong", zenoh.handlers.FifoChannel(1024))
        match(out, sub, bytes(sizes[0]))  # the path is up; from here on the reader owns sub
        loop = new_event_loop()
        pinger = LoopPinger(out, loop)
        hand_to_loop(sub, loop, pinger.pong)
        for size in sizes:
            samples = pinger.run(bytes(size), count)
            report(size, samples)


if __name__ == "__main__":
    role, args = sys.argv[1:2], sys.argv[2:]
    if role in (["echo"], ["echo-loop"]) and len(args) == 1:
        (echo if role == ["echo"] else echo_loop)(args[0])
    elif role in (["ping"], ["ping-loop"]) and len(args) >= 3:
        run = ping if role == ["ping"] else ping_loop
        run(args[0], int(args[1]), [int(s) for s in args[2:]])
    else:
        sys.exit(__doc__)
