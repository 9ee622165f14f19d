"""Background load, like the lab report's extra workload: CPU busy loops at a duty
cycle, and a paced UDP stream between hosts. Every load stops by itself after its
duration, and the handles stop it early (and are context managers).

    python -m roboscale.env.load cpu --duty 0.5 --duration 10
    python -m roboscale.env.load udp --to ADDR --port P --mbit 5 --duration 10
    python -m roboscale.env.load sink --port P --duration 10
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import selectors
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from types import TracebackType

from roboscale import lifeline
from roboscale.env.hosts import Host
from roboscale.errors import UserError

DUTY_PERIOD_S = 0.01  # busy for duty * 10 ms, idle for the rest
MAX_DURATION_S = 3600.0
LISTENING = "LISTENING"  # the sink's first line: bound, the stream may start
SINK_START_S = 60.0  # a bound for a hang: an interpreter's start on a loaded machine
DATAGRAM = 1200


def busy(duty: float, duration: float, period: float = DUTY_PERIOD_S) -> int:
    """Spin `duty` of every period until duration; returns the periods run."""
    end = time.monotonic() + duration
    periods = 0
    while (start := time.monotonic()) < end:
        while time.monotonic() - start < duty * period:
            pass
        idle = start + period - time.monotonic()
        if idle > 0:
            time.sleep(idle)
        periods += 1
    return periods


def udp_stream(to: str, port: int, mbit: float, duration: float, size: int = DATAGRAM) -> int:
    """Send datagrams paced on absolute deadlines at mbit Mbit/s; returns bytes sent."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    interval = size * 8 / (mbit * 1e6)
    block = b"\0" * size
    start = time.monotonic()
    sent = 0
    i = 0
    while (now := time.monotonic()) < start + duration:
        ahead = start + i * interval - now
        if ahead > 0:
            time.sleep(ahead)
        with contextlib.suppress(OSError):  # a full queue is the load doing its job
            sent += sock.sendto(block, (to, port))
        i += 1
    return sent


def udp_sink(port: int, duration: float, bound: Callable[[], None] = lambda: None) -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", port))
    bound()
    end = time.monotonic() + duration
    got = 0
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            got += len(sock.recv(65536))
        except TimeoutError:
            break
    return got


def _check(duration: float, duty: float | None = None, mbit: float | None = None) -> None:
    if not 0 < duration <= MAX_DURATION_S:
        raise UserError(f"load duration {duration!r} s; allowed: above 0 and at most 3600")
    if duty is not None and not 0 < duty <= 1:
        raise UserError(f"cpu load duty {duty!r}; allowed: a fraction above 0 and at most 1")
    if mbit is not None and not 0 < mbit <= 10_000:
        raise UserError(f"network load {mbit!r} Mbit/s; allowed: above 0 and at most 10000")


class Load:
    """Running load processes; stop() ends them early, they also end on their own."""

    def __init__(self, procs: list[subprocess.Popen[str]], duration: float) -> None:
        self.procs = procs
        self.deadline = time.monotonic() + duration

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def wait(self) -> list[dict[str, object]]:
        """Wait for the loads to finish by themselves; their JSON results."""
        out = []
        for proc in self.procs:
            text, _ = proc.communicate(timeout=max(1.0, self.deadline - time.monotonic() + 10))
            lines = text.strip().splitlines() if text else []
            out.append(json.loads(lines[-1]) if lines else {})
        return out

    def __enter__(self) -> Load:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _module(*args: str) -> list[str]:
    return [sys.executable, "-m", "roboscale.env.load", *args]


def cpu_load(host: Host | None, duty: float, duration: float, workers: int = 1) -> Load:
    """Busy loops in the host (inside its namespace and CPU quota) or here if None."""
    _check(duration, duty=duty)
    argv = _module("cpu", "--duty", str(duty), "--duration", str(duration))
    prefix = host.argv_prefix() if host else []
    # One process per worker (not a pool): terminating each ends its loop at once.
    env = {**os.environ, **lifeline.child_env()}
    procs = [
        subprocess.Popen([*prefix, *argv], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(workers)
    ]
    return Load(procs, duration)


def net_load(src: Host, dst: Host, mbit: float, duration: float, port: int = 47_100) -> Load:
    """A paced UDP stream from src to dst; the sink counts what arrived."""
    _check(duration, mbit=mbit)
    sink = dst.popen(
        _module("sink", "--port", str(port), "--duration", str(duration + 1)),
        stdout=subprocess.PIPE,
        text=True,
    )
    _await_listening(sink)  # the stream starts once the sink is bound, however slow its start
    stream = src.popen(
        _module("udp", "--to", dst.address, "--port", str(port), "--mbit", str(mbit),
                "--duration", str(duration)),
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    return Load([stream, sink], duration + 1)


def _await_listening(sink: subprocess.Popen[str]) -> None:
    assert sink.stdout is not None
    with selectors.DefaultSelector() as sel:
        sel.register(sink.stdout, selectors.EVENT_READ)
        ready = sel.select(SINK_START_S) and sink.stdout.readline().strip() == LISTENING
    if not ready:
        sink.kill()
        sink.wait()
        raise UserError(f"the UDP load sink did not start within {SINK_START_S:.0f} s")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="roboscale.env.load")
    parser.add_argument("kind", choices=["cpu", "udp", "sink"])
    parser.add_argument("--duration", type=float, required=True)
    parser.add_argument("--duty", type=float, default=1.0)
    parser.add_argument("--to", default="")
    parser.add_argument("--port", type=int, default=47_100)
    parser.add_argument("--mbit", type=float, default=1.0)
    a = parser.parse_args(argv)
    _check(a.duration, duty=a.duty if a.kind == "cpu" else None)
    if a.kind == "cpu":
        print(json.dumps({"periods": busy(a.duty, a.duration)}), flush=True)
    elif a.kind == "udp":
        print(json.dumps({"sent": udp_stream(a.to, a.port, a.mbit, a.duration)}), flush=True)
    else:
        received = udp_sink(a.port, a.duration, lambda: print(LISTENING, flush=True))
        print(json.dumps({"received": received}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
