"""Many publishing nodes in one runtime, for bench/nodes.py (run in a fresh process).

    node_crowd.py N TICKS     N in-process nodes under one supervisor; node i publishes a
                              timestamp on /t{i} at 1 Hz and subscribes to /t{i+1 mod N}.
                              Once every node has started, node i's timer begins at a phase
                              spread over one second, and it publishes TICKS messages; then
                              one JSON line with what was published, delivered and missed

Delivery is counted per message (publish to the subscriber's callback, on the loop's
clock); the process's CPU time while the nodes publish, and the part the cyclic garbage
collector took, say where the time goes; `missed` sums the ticks the timers skipped
because the loop was late (the runtime's rule: a tick due before the previous one could
fire is skipped and counted).
The run is bounded: it stops at TICKS + 60 s whatever happened.
"""

from __future__ import annotations

import asyncio
import gc
import json
import random
import sys
import time
from array import array
from contextlib import suppress
from typing import Any

from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeHandle, NodeRecipe, Timer
from roboscale.runtime.supervisor import ChildSpec, Supervisor

PERIOD_S = 1.0
GRACE_S = 60.0


class Tally:
    """Shared by the nodes: counts and latencies, no object per message."""

    def __init__(self, nodes: int, ticks: int) -> None:
        self.published = 0
        self.delivered = 0
        self.latency_us = array("d")
        self.ticks = ticks
        self.running = nodes  # nodes still publishing
        self.done: asyncio.Future[None] | None = None


class Crowd(Node):
    __slots__ = ("left", "pub", "tally", "ticker")

    def on_start(self) -> None:
        i, n = int(self.get_param("i")), int(self.get_param("n"))
        self.tally: Tally = self.get_param("tally")
        self.left = self.tally.ticks
        self.pub = self.publisher(f"/t{i}")
        self.subscribe(f"/t{(i + 1) % n}", self._got)

    def begin(self) -> None:
        if self.alive:
            self.ticker: Timer = self.timer(PERIOD_S, self._tick)
            self._tick()

    def _tick(self) -> None:
        tally = self.tally
        if self.left <= 0:
            return
        self.left -= 1
        tally.published += 1
        self.pub.publish(time.perf_counter_ns())
        if self.left == 0:
            self.ticker.cancel()
            tally.running -= 1
            if tally.running == 0 and tally.done is not None and not tally.done.done():
                tally.done.set_result(None)

    def _got(self, stamp_ns: int) -> None:
        tally = self.tally
        tally.delivered += 1
        tally.latency_us.append((time.perf_counter_ns() - stamp_ns) / 1000.0)


class GcClock:
    """Time spent in the cyclic garbage collector (gc.callbacks), and its collections."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = 0
        self.started = 0.0

    def __call__(self, phase: str, _info: dict[str, int]) -> None:
        if phase == "start":
            self.started = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self.started
            self.collections += 1


def rss_bytes() -> int:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * 4096


async def crowd(runtime: Runtime, n: int, ticks: int) -> dict[str, Any]:
    tally, pick = Tally(n, ticks), random.Random(7)
    tally.done = runtime.loop.create_future()
    recipes = [NodeRecipe(f"c{i}", Crowd, {"i": i, "n": n, "tally": tally}) for i in range(n)]
    sup = Supervisor(runtime, "crowd", [ChildSpec(r) for r in recipes])
    t0 = time.perf_counter()
    await sup.start_async()
    started_s = time.perf_counter() - t0
    handles: list[NodeHandle] = [h for _, h in sup.which_children()]
    rss_started = rss_bytes()
    alive = sum(1 for h in handles if h.alive())
    begin = runtime.loop.time() + 0.5
    clock, cpu0 = GcClock(), time.process_time()
    gc.callbacks.append(clock)
    for h in handles:
        assert isinstance(h.node, Crowd)
        runtime.loop.call_at(begin + pick.random() * PERIOD_S, h.node.begin)
    with suppress(TimeoutError):  # reported: published falls short of due
        await asyncio.wait_for(tally.done, ticks * PERIOD_S + GRACE_S)
    elapsed_s = runtime.loop.time() - begin
    cpu_s = time.process_time() - cpu0
    gc.callbacks.remove(clock)
    await asyncio.sleep(0.5)  # the last messages reach their subscribers
    missed = sum((getattr(h.node, "ticker", None) and h.node.ticker.missed) or 0 for h in handles)
    rss_end = rss_bytes()
    await sup.stop_async()
    lat = sorted(tally.latency_us)
    pick_at = lambda q: lat[min(len(lat) - 1, int(q * (len(lat) - 1)))] if lat else None  # noqa: E731
    return {
        "nodes": n,
        "started": alive,
        "ticks_per_node": ticks,
        "due": n * ticks,
        "published": tally.published,
        "delivered": tally.delivered,
        "missed_ticks": missed,
        "elapsed_s": elapsed_s,
        "start_s": started_s,
        "cpu_s": cpu_s,  # every thread of the process, while the nodes published
        "cpu_us_per_message": cpu_s * 1e6 / max(1, tally.published),
        "gc_s": clock.seconds,
        "gc_collections": clock.collections,
        "rss_started_bytes": rss_started,
        "rss_end_bytes": rss_end,
        "latency_p50_us": pick_at(0.5),
        "latency_p99_us": pick_at(0.99),
        "latency_max_us": lat[-1] if lat else None,
    }


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    n, ticks = int(sys.argv[1]), int(sys.argv[2])
    runtime = Runtime()
    try:
        print(json.dumps(runtime.run(crowd(runtime, n, ticks))), flush=True)
    finally:
        runtime.close()


if __name__ == "__main__":
    main()
