"""Where the bridge's round trip goes: each step of one direction, timed in both processes.

    .venv/bin/python bench/bridge_hops.py [--quick] [--echoes N] [--json bench/out/hops.json]

Runs the bench/scale.py echo pair (baselines/runtime_echo.py: two runtimes joined by the
Zenoh bridge, 11 B, 4250 B and 307,200 B one message at a time) with perf_counter_ns
taken around the bridge's steps in both processes, and prints the median of each step.
It traces the python link ($ROBOSCALE_BRIDGE_PATH=python: the drain thread's hop is what
it shows; the native link has no Python frame to time between Zenoh and the loop):

    zenoh → loop      the drain thread took the sample from Zenoh's channel until
                      `_on_samples` starts on the loop (one thread hop)
    to drain          header, decode, inject, until the inbox drains (same loop turn)
    to callback       drain start until the node's callback publishes
    encode            codec and header of the outgoing message
    put               the export's Zenoh put, from the loop thread

The timing wraps the methods from outside (monkeypatching in the traced processes only);
it adds about a microsecond per step. Diagnosis, not a goal: nothing here passes or fails.
"""

from __future__ import annotations

import atexit
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import counted_args, finish, header, table

FULL = {"echoes": 3000}
QUICK = {"echoes": 300}
STEPS = ("zenoh_to_loop", "to_drain", "to_callback", "encode", "put")
TRACE_ENV = "ROBOSCALE_HOPS_OUT"


def trace_into(out: Path) -> None:
    """In a traced process: wrap the bridge's steps and write the medians (µs) at exit."""
    from roboscale.runtime import bridge, bus, zlink

    os.environ[zlink.PATH_ENV] = "python"

    spans: dict[int, dict[str, list[int]]] = {}  # payload size -> step -> durations
    marks: dict[str, int] = {}
    clock = time.perf_counter_ns
    row, on_samples = zlink.Drain.row, bridge.Bridge._on_samples
    drain, hand_now = bus.Inbox.drain, bus.Inbox.hand_now

    def add(step: str, ns: int) -> None:
        size = marks.get("size")
        if size is not None:  # probes published before any sample came back: no hop yet
            spans.setdefault(size, {s: [] for s in STEPS})[step].append(ns)

    def traced_row(self: zlink.Drain, sample: Any) -> tuple[str, bytes, bytes]:
        marks["recv"] = clock()  # the only mark this (drain) thread writes
        return row(self, sample)

    def traced_on_samples(
        self: bridge.Bridge, batch: list[tuple[str, bytes, bytes]], first: int = 0
    ) -> None:
        marks["loop"] = start = clock()
        marks["size"] = len(batch[0][1])
        add("zenoh_to_loop", start - marks.get("recv", start))
        on_samples(self, batch, first)

    def traced_drain(self: bus.Inbox) -> None:
        marks["drain"] = start = clock()
        add("to_drain", start - marks.get("loop", start))
        drain(self)

    def traced_hand_now(self: bus.Inbox, seq: int, msg: Any) -> bool:
        # A sample handed over at once is timed as a drain's start (no drain follows; when
        # it is not handed over, the drain marks its own start again).
        marks["drain"] = start = clock()
        handed: bool = hand_now(self, seq, msg)
        if handed:
            add("to_drain", start - marks.get("loop", start))
        return handed

    def traced_export(self: Any, msg: Any) -> None:
        start = clock()
        add("to_callback", start - marks.get("drain", start))
        codec, tag, data = self.encode(msg)
        encoded = clock()
        self.pub.send(data, codec, tag)
        marks["size"] = len(data)
        add("encode", encoded - start)
        add("put", clock() - encoded)

    def write() -> None:
        medians = {
            str(size): {k: statistics.median(v) / 1e3 for k, v in steps.items() if v}
            | {"n": len(steps["put"])}
            for size, steps in sorted(spans.items())
        }
        out.write_text(json.dumps({"median_us": medians}))

    zlink.Drain.row = traced_row  # type: ignore[method-assign]
    bridge.Bridge._on_samples = traced_on_samples  # type: ignore[method-assign]
    bus.Inbox.drain = traced_drain  # type: ignore[method-assign]
    bus.Inbox.hand_now = traced_hand_now  # type: ignore[method-assign]
    bridge._Export.__call__ = traced_export  # type: ignore[method-assign]
    atexit.register(write)


def traced_role(argv: list[str]) -> None:
    """`bridge_hops.py echo LISTEN` or `ping CONNECT COUNT SIZE...`, traced."""
    from baselines import runtime_echo

    trace_into(Path(os.environ[TRACE_ENV]))
    if argv[0] == "echo":
        runtime_echo.echo(argv[1])
    else:
        runtime_echo.ping(argv[1], int(argv[2]), [int(s) for s in argv[3:]])


def measure(count: int, work: Path) -> dict[str, Any]:
    import scale
    from roboscale.backends.base import free_port

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    program = [sys.executable, __file__]
    env = dict(os.environ, **{TRACE_ENV: str(work / "echo.json")})
    with scale.echo_process([*program, "echo", endpoint], env):
        env = dict(os.environ, **{TRACE_ENV: str(work / "ping.json")})
        rtt = scale.ping([*program, "ping", endpoint], count, env)
    # echo_process waited for the echo program to exit: its figures are written.
    sides = {side: json.loads((work / f"{side}.json").read_text()) for side in ("echo", "ping")}
    return {"rtt_p50_us": {s: statistics.median(v) for s, v in rtt.items()}, "sides": sides}


def main() -> None:
    import tempfile

    args, n = counted_args(__doc__ or "", FULL, QUICK, judged=False)
    report = header()
    report["counts"] = n
    with tempfile.TemporaryDirectory(prefix="roboscale-hops-") as tmp:
        result = measure(n["echoes"], Path(tmp))
    print("\nround trip p50 (µs):", {s: round(v, 1) for s, v in result["rtt_p50_us"].items()})
    print("\none direction, median per step and payload size (µs):")
    rows = [
        {"side": side, "size": int(size), **{k: round(v, 1) for k, v in steps.items()}}
        for side, got in result["sides"].items()
        for size, steps in got["median_us"].items()
    ]
    table(rows, ["side", "size", *STEPS, "n"])
    report["raw"] = result
    finish(report, [], args)


if __name__ == "__main__":
    if sys.argv[1:2] in (["echo"], ["ping"]):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        traced_role(sys.argv[1:])
    else:
        main()
