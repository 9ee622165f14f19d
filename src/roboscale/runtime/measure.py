"""Measurements of the in-process runtime, for the benchmarks (bench/restart.py, bench/scale.py).

Each function builds a fresh `Runtime`, runs its loop in the calling thread,
measures with `time.perf_counter_ns` and returns raw samples, so that the
benchmark computes and prints percentiles side by side with its baselines.

- `inprocess_restart_samples`: a one_for_one supervisor over `workers`
  permanent nodes (intensity high enough never to give up, as in the OTP
  baseline). A random worker is failed; a sample is the time from the failure
  (just before the exception is raised in its callback, or the kill) to the
  new instance's `on_start`.
- `inprocess_echo_samples`: a ping node and an echo node on one loop; a sample
  is the time from a publish on /ping until the echoed message reaches the
  ping node's callback on /pong.
- `idle_node_memory`: start `n` idle nodes (one subscription each, on its own
  topic) under one supervisor; Python heap bytes per node (tracemalloc, a
  separate pass so that tracing does not slow down the timed start), RSS
  growth per node, and start time per node.
"""

from __future__ import annotations

import asyncio
import gc
import random
import resource
import time
import tracemalloc
from typing import Any

from roboscale.errors import UserError
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.node import Node
from roboscale.runtime.nodehandle import NodeHandle, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor

KILLS = ("exception", "kill")
NEVER_GIVE_UP = Intensity(max_restarts=10**9, period_s=1.0)


class _Stamps:
    """Where the measured nodes leave their timestamps (no allocation per sample)."""

    __slots__ = ("killed_ns", "started_ns")

    def __init__(self) -> None:
        self.killed_ns = 0
        self.started_ns = 0


class _Worker(Node):
    """Crashes when told to; stamps the time it starts."""

    stamps = _Stamps()

    def on_start(self) -> None:
        _Worker.stamps.started_ns = time.perf_counter_ns()
        self.subscribe(f"/{self.name}/cmd", self._crash)

    def _crash(self, _msg: object) -> None:
        _Worker.stamps.killed_ns = time.perf_counter_ns()
        raise RuntimeError("chaos")


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise UserError(f"{name} must be at least 1, got {value}")


def inprocess_restart_samples(
    n: int, *, workers: int = 100, kill: str = "exception"
) -> list[float]:
    """`n` restart times in microseconds (failure until the new instance's on_start)."""
    _check_positive("n", n)
    _check_positive("workers", workers)
    if kill not in KILLS:
        raise UserError(f"unknown kill {kill!r}: allowed are {', '.join(KILLS)}")
    runtime = Runtime()
    try:
        return runtime.run(_restarts(runtime, n, workers, kill))
    finally:
        runtime.close()


async def _restarts(runtime: Runtime, n: int, workers: int, kill: str) -> list[float]:
    names = [f"w{i}" for i in range(workers)]
    specs = [ChildSpec(NodeRecipe(name, _Worker)) for name in names]
    sup = Supervisor(runtime, "bench", specs, intensity=NEVER_GIVE_UP)
    await sup.start_async()
    stamps, pick = _Worker.stamps, random.Random(1)
    topics = [runtime.bus.topic(f"/w{i}/cmd") for i in range(workers)]
    samples: list[float] = []
    deadline = time.monotonic() + 60.0  # bounded even if a restart never happens
    try:
        for _ in range(n):
            i = pick.randrange(workers)
            before = stamps.started_ns
            if kill == "kill":
                handle: NodeHandle = sup.instance(names[i])  # each restart makes a new one
                stamps.killed_ns = time.perf_counter_ns()
                handle.kill()
            else:
                topics[i].publish(None)
            while stamps.started_ns == before:
                if time.monotonic() > deadline:
                    raise UserError("an in-process restart did not happen within 60 s")
                await asyncio.sleep(0)
            samples.append((stamps.started_ns - stamps.killed_ns) / 1000.0)
    finally:
        await sup.stop_async()
    return samples


class _Echo(Node):
    def on_start(self) -> None:
        self.subscribe("/ping", self.publisher("/pong").publish)


class _Pinger(Node):
    """Sends `count` pings one after the other; each RTT is one sample."""

    __slots__ = ("count", "done", "payload", "ping", "samples", "sent_ns")

    def on_start(self) -> None:
        self.count = int(self.get_param("count"))
        self.payload = bytes(int(self.get_param("size")))
        self.samples: list[float] = []
        self.done: asyncio.Future[list[float]] = self.get_param("done")
        self.ping = self.publisher("/ping")
        self.subscribe("/pong", self._pong)
        self.runtime.loop.call_soon(self._send)

    def _send(self) -> None:
        self.sent_ns = time.perf_counter_ns()
        self.ping.publish(self.payload)

    def _pong(self, _msg: object) -> None:
        self.samples.append((time.perf_counter_ns() - self.sent_ns) / 1000.0)
        if len(self.samples) >= self.count:
            if not self.done.done():
                self.done.set_result(self.samples)
            return
        self._send()


def inprocess_echo_samples(n: int, size: int) -> list[float]:
    """`n` in-process echo round-trip times in microseconds for `size`-byte payloads."""
    _check_positive("n", n)
    if size < 0:
        raise UserError(f"size must be >= 0 bytes, got {size}")
    runtime = Runtime()
    try:
        return runtime.run(_echo(runtime, n, size))
    finally:
        runtime.close()


async def _echo(runtime: Runtime, n: int, size: int) -> list[float]:
    done: asyncio.Future[list[float]] = runtime.loop.create_future()
    params = {"count": n, "size": size, "done": done}
    sup = Supervisor(
        runtime,
        "round_trip",
        [
            ChildSpec(NodeRecipe("echoer", _Echo)),
            ChildSpec(NodeRecipe("ping", _Pinger, params)),
        ],
    )
    await sup.start_async()
    try:
        return await asyncio.wait_for(done, timeout=max(10.0, n * 0.001))
    finally:
        await sup.stop_async()


class _Idle(Node):
    def on_start(self) -> None:
        self.subscribe(f"/{self.name}/in", _ignore)


def _ignore(_msg: object) -> None:
    return None


def idle_node_memory(n: int) -> dict[str, Any]:
    """Start `n` idle nodes; bytes per node (heap and RSS) and start time per node."""
    _check_positive("n", n)
    timed = Runtime()
    try:
        start_s, rss_bytes = timed.run(_start_idle(timed, n, traced=False))
    finally:
        timed.close()
    traced = Runtime()
    try:
        _, heap_bytes = traced.run(_start_idle(traced, n, traced=True))
    finally:
        traced.close()
    return {
        "nodes": n,
        "heap_bytes_per_node": heap_bytes / n,
        "rss_bytes_per_node": rss_bytes / n,
        "start_us_per_node": start_s * 1e6 / n,
    }


async def _start_idle(runtime: Runtime, n: int, *, traced: bool) -> tuple[float, int]:
    """Start and stop n idle nodes; return (start seconds, bytes grown while starting)."""
    gc.collect()
    if traced:
        tracemalloc.start()
        before = tracemalloc.get_traced_memory()[0]
    else:
        before = _rss_bytes()
    t0 = time.perf_counter()
    # The specs and their recipes count too, and the check of them all: what the tree
    # keeps per node (the handles are made when the nodes start).
    sup = Supervisor(runtime, "idle", [ChildSpec(NodeRecipe(f"n{i}", _Idle)) for i in range(n)])
    await sup.start_async()
    elapsed = time.perf_counter() - t0
    if traced:
        grown = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
    else:
        grown = _rss_bytes() - before
    await sup.stop_async()
    return elapsed, grown


def _rss_bytes() -> int:
    # Current RSS from /proc (ru_maxrss is a peak, which never shrinks).
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
