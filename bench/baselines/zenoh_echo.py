"""Raw zenoh-python ping-pong between two processes, a baseline of bench/scale.py.

    zenoh_echo.py echo LISTEN                 peer listening on LISTEN; puts every sample of
                                              bench/ping back unchanged on bench/pong
    zenoh_echo.py ping CONNECT COUNT SIZE...  peer connecting to CONNECT; per SIZE: probes until
                                              the path is up, WARMUP pings, then COUNT pings one
                                              after the other; one JSON line per size:
                                              {"size": SIZE, "rtt_us": [...]}

Peer to peer on explicit tcp/127.0.0.1 endpoints, multicast and gossip scouting off.
Subscribers use FIFO channel handlers read by the main thread (no Python callback per
sample); publishers are express (no batching) with congestion control BLOCK. The
benchmark bounds each process with a timeout and kills its process group.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from typing import Any

import zenoh

from roboscale.backends.zenoh import zenoh_config

WARMUP = 20
MATCH_TIMEOUT_S = 30.0


def session(listen: list[str], connect: list[str]) -> Any:
    return zenoh.open(zenoh_config(listen, connect))


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
            print(json.dumps({"size": size, "rtt_us": samples}), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["echo"] and len(sys.argv) == 3:
        echo(sys.argv[2])
    elif sys.argv[1:2] == ["ping"] and len(sys.argv) >= 5:
        ping(sys.argv[2], int(sys.argv[3]), [int(s) for s in sys.argv[4:]])
    else:
        sys.exit(__doc__)
