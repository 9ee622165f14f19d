"""Where a round trip on the bridge's native path goes: every stage, matched across processes.

    .venv/bin/python bench/native_hops.py [--quick] [--echoes N] [--json bench/out/nhops.json]

Runs the bench/scale.py echo pair (baselines/runtime_echo.py: two runtimes joined by the
Zenoh bridge on its native path, `make native`) with CLOCK_MONOTONIC stamps
(`time.perf_counter_ns`; the extension stamps with the same clock) taken in both
processes, and joins them by the wire's sequence numbers: the ping's /ping seq k is the
echo's received seq k, whose reply the echo sends as its /pong seq j, which the ping
receives. One host, one clock: the stamps of two processes can be subtracted. Stages of
one round trip, in order:

    ping encode        the Pinger's publish reached the export tap → codec and header done
    ping put           the export's put (Rust, GIL released) until it returned
    wire → echo        the put returned → Zenoh's thread in the echo called the extension
                       (Zenoh's transmit task, TCP over loopback, its receive task)
    echo wake-up       the extension queued the row and wrote the eventfd → the loop thread
                       runs `_on_native` (a thread wake-up)
    echo to callback   take, decode, inject, until the inbox drains or hands the sample
                       over at once (`Inbox.hand_now`): the node's callback
    echo callback      drain or hand-over start → the Echo node's publish reaches the
                       export tap
    echo encode, echo put, wire → ping, ping wake-up, ping to callback: the same way back

It also counts each thread's context switches (voluntary + nonvoluntary,
/proc/self/task/*/status), by thread name, per message received (the probes and
warm-up round trips included: an upper bound by a few percent).

`ZENOH_RUNTIME` (zenoh's own setting of its thread pools) passes through to both
processes: `--zenoh-runtime '(rx: (worker_threads: 1))'` compares thread layouts.
The timing wraps the bridge's methods from outside, in the traced processes only; it
adds about a microsecond per stage. Diagnosis, not a goal: nothing passes or fails.
"""

from __future__ import annotations

import argparse
import atexit
import itertools
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from common import finish, header, table

FULL = 2000
QUICK = 300
TRACE_ENV = "ROBOSCALE_NHOPS_OUT"
INTERVAL_ENV = "ROBOSCALE_NHOPS_INTERVAL_S"
STAGES = (
    "ping encode",
    "ping put",
    "wire → echo",
    "echo wake-up",
    "echo to callback",
    "echo callback",
    "echo encode",
    "echo put",
    "wire → ping",
    "ping wake-up",
    "ping to callback",
)


def thread_switches() -> dict[str, int]:
    """Context switches of this process's live threads so far, by "name/tid"."""
    out: dict[str, int] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            text = (task / "status").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        out[f"{name}/{task.name}"] = sum(
            int(line.split()[1])
            for line in text.splitlines()
            if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches"))
        )
    return out


def by_name(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The switches of the threads alive at the end since `before`, summed by name (the
    event loop's thread is one of the "python" ones)."""
    out: dict[str, int] = {}
    for key, n in after.items():
        name = key.rsplit("/", 1)[0]
        out[name] = out.get(name, 0) + n - before.get(key, 0)
    return out


def trace_into(out: Path) -> None:
    """In a traced process: stamp the bridge's stages; write them at exit."""
    from roboscale.runtime import bridge, bus, zlink

    if zlink.native_module() is None:
        raise SystemExit("native_hops: the extension is not built (make native)")
    os.environ[zlink.PATH_ENV] = "native"
    clock = time.perf_counter_ns
    received: dict[int, list[int]] = {}  # seq -> [rust, wake, drain]
    sent: dict[int, list[int]] = {}  # seq -> [tap, encoded, returned]
    replies: dict[int, int] = {}  # received seq -> the seq sent from its callback
    current: list[int] = [0]  # the seq of the sample being delivered, 0 outside
    base: dict[str, int] = {}
    end: dict[str, int] = {}
    close = bridge.Bridge.close
    on_native, drain, hand_now = bridge.Bridge._on_native, bus.Inbox.drain, bus.Inbox.hand_now

    class Stamped:
        """The inbox, with the stamps of the row it hands over."""

        def __init__(self, inbox: Any, wake: int) -> None:
            self.inbox, self.wake = inbox, wake

        def take(self, most: int) -> Any:
            rows = self.inbox.take(most)
            if len(rows) == 1:  # ping-pong: one row per wake-up; others are not stamped
                current[0] = rows[0][4]
                received[current[0]] = [self.inbox.received_ns(), self.wake, 0]
            return rows

        def counters(self) -> Any:
            return self.inbox.counters()

    def traced_on_native(self: bridge.Bridge, inbox: Any) -> None:
        if not base:
            base.update(thread_switches())
        on_native(self, Stamped(inbox, clock()))
        current[0] = 0

    def traced_drain(self: bus.Inbox) -> None:
        if current[0] in received:
            received[current[0]][2] = clock()
        drain(self)

    def traced_hand_now(self: bus.Inbox, seq: int, msg: Any) -> bool:
        # The sample handed over at once, no drain (when it is not, the drain stamps again).
        if current[0] in received:
            received[current[0]][2] = clock()
        handed: bool = hand_now(self, seq, msg)
        return handed

    def traced_export(self: Any, msg: Any) -> None:
        tap = clock()
        codec, tag, data = self.encode(msg)
        encoded = clock()
        seq = self.pub.send(data, codec, tag)
        sent[seq] = [tap, encoded, clock(), len(data)]
        if current[0]:
            replies[current[0]] = seq

    def traced_close(self: bridge.Bridge) -> None:
        end.update(thread_switches())  # while the loop's thread still runs
        close(self)

    def write() -> None:
        switches = by_name(base, end or thread_switches())
        out.write_text(
            json.dumps(
                {
                    "received": received,
                    "sent": sent,
                    "replies": replies,
                    "switches": switches,
                    "messages": len(received),
                }
            )
        )

    bridge.Bridge._on_native = traced_on_native  # type: ignore[method-assign]
    bus.Inbox.drain = traced_drain  # type: ignore[method-assign]
    bus.Inbox.hand_now = traced_hand_now  # type: ignore[method-assign]
    bridge.Bridge.close = traced_close  # type: ignore[method-assign]
    bridge._Export.__call__ = traced_export  # type: ignore[method-assign]
    atexit.register(write)


def traced_role(argv: list[str]) -> None:
    """`native_hops.py echo LISTEN` or `ping CONNECT COUNT SIZE...`, traced."""
    from baselines import runtime_echo

    trace_into(Path(os.environ[TRACE_ENV]))
    interval_s = float(os.environ.get(INTERVAL_ENV) or 0)
    if interval_s > 0:  # paced: each ping leaves `interval_s` after the last reply
        send = runtime_echo.Pinger._send

        def paced(self: runtime_echo.Pinger) -> None:
            self.runtime.loop.call_later(interval_s, send, self)

        runtime_echo.Pinger._send = paced  # type: ignore[method-assign]
    if argv[0] == "echo":
        runtime_echo.echo(argv[1])
    else:
        runtime_echo.ping(argv[1], int(argv[2]), [int(s) for s in argv[3:]])


def stages(echo: dict[str, Any], ping: dict[str, Any]) -> dict[int, list[list[float]]]:
    """The stages (µs) of every round trip both sides stamped, in STAGES order, by the
    ping's payload size, in the order sent."""
    trips: dict[int, list[list[float]]] = {}
    for k, j in echo["replies"].items():
        out_, in_ = ping["sent"].get(k), echo["received"].get(k)
        back, home = echo["sent"].get(str(j)), ping["received"].get(str(j))
        if not (out_ and in_ and back and home and in_[2] and home[2]):
            continue
        # tap, encoded, put returned, rust, wake, drain; and back the same way
        marks = [*out_[:3], *in_, *back[:3], *home]
        spans = [(b - a) / 1e3 for a, b in itertools.pairwise(marks)]
        trips.setdefault(out_[3], []).append(spans)
    return trips


def run_ping(argv: list[str], env: dict[str, str]) -> dict[int, list[float]]:
    """The traced ping program's round trips (µs) by payload size."""
    import subprocess

    import scale

    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, start_new_session=True
    )
    out = scale.wait_group(proc, 3600.0, "the traced ping")
    rows = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    return {row["size"]: row["rtt_us"] for row in rows}


def measure(count: int, work: Path, sizes: list[int]) -> dict[str, Any]:
    import scale
    from roboscale.backends.base import free_port

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    program = [sys.executable, __file__]
    env = dict(os.environ, **{TRACE_ENV: str(work / "echo.json")})
    with scale.echo_process([*program, "echo", endpoint], env):
        env = dict(os.environ, **{TRACE_ENV: str(work / "ping.json")})
        rtt = run_ping([*program, "ping", endpoint, str(count), *map(str, sizes)], env)
    # echo_process waited for the echo program to exit: its stamps are written.
    echo, ping = (json.loads((work / f"{s}.json").read_text()) for s in ("echo", "ping"))
    trips = stages(echo, ping)
    per_size: dict[str, Any] = {}
    for size in sizes:  # the last ones of each size: the probes and warm-up come first
        got = trips.get(size, [])[-len(rtt[size]) :]
        per_size[str(size)] = {
            "rtt_p50_us": statistics.median(rtt[size]),
            "n": len(got),
            "median_us": {s: statistics.median(t[i] for t in got) for i, s in enumerate(STAGES)},
        }
    switches = {
        side: {name: round(v / max(1, got["messages"]), 2) for name, v in got["switches"].items()}
        for side, got in (("echo", echo), ("ping", ping))
    }
    return {"per_size": per_size, "switches_per_message": switches}


def main() -> None:
    import tempfile

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--quick", action="store_true", help=f"{QUICK} round trips per size")
    p.add_argument("--echoes", type=int, help=f"round trips per size (default {FULL})")
    p.add_argument("--sizes", default="11,4250", help="payload sizes, comma-separated")
    p.add_argument("--zenoh-runtime", help="ZENOH_RUNTIME for both processes")
    p.add_argument(
        "--interval", type=float, default=0.0, help="seconds between a reply and the next ping"
    )
    p.add_argument("--json", type=Path, help="write the report here")
    p.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    count = args.echoes or (QUICK if args.quick else FULL)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.zenoh_runtime:
        os.environ["ZENOH_RUNTIME"] = args.zenoh_runtime
    report = header()
    report["counts"] = {"echoes": count, "sizes": sizes}
    report["zenoh_runtime"] = os.environ.get("ZENOH_RUNTIME", "")
    report["interval_s"] = args.interval
    os.environ[INTERVAL_ENV] = str(args.interval)
    with tempfile.TemporaryDirectory(prefix="roboscale-nhops-") as tmp:
        result = measure(count, Path(tmp), sizes)
    for size, got in result["per_size"].items():
        print(f"\n{size} B: round trip p50 {got['rtt_p50_us']:.1f} µs, {got['n']} matched;")
        rows = [{"stage": s, "median_us": round(v, 1)} for s, v in got["median_us"].items()]
        rows.append(
            {"stage": "sum of medians", "median_us": round(sum(got["median_us"].values()), 1)}
        )
        table(rows, ["stage", "median_us"])
    print("\ncontext switches per message received, by thread (probes and warm-up included):")
    for side, threads in result["switches_per_message"].items():
        shown = {k: v for k, v in sorted(threads.items(), key=lambda kv: -kv[1]) if v >= 0.05}
        print(f"  {side}: total {sum(threads.values()):.1f}  {shown}")
    report["raw"] = result
    finish(report, [], args)


if __name__ == "__main__":
    if sys.argv[1:2] in (["echo"], ["ping"]):
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        traced_role(sys.argv[1:])
    else:
        main()
