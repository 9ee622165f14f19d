"""What a put of a large frame costs the sender, concatenated or composed in the pool.

    .venv/bin/python bench/compose_put.py [--count 1000] [--rounds 3] [--rate-hz 1000]
        [--sizes 307200,4194304] [--json bench/out/zcopy/compose-put.json]

Two runtime processes joined by the bridge on its native path (shared memory on,
loopback), the lab's native-proc sender's way: a frame is a 16-byte header and a body,
put from the sending thread through the topic's plain export, paced at `rate_hz` (the
receiver, a node that drops each frame, keeps up). Four ways, interleaved round by round
in the same minutes:

    concat      `export(header + body)`: the lab's sender before (a bytes of the frame,
                lent to Zenoh, which copies it into its pool): two copies
    parts       `export.send_parts((header, body))`: each part written once into the pool
    bytes       `export(body)`: the bridge's own export of one bytes (lent; Zenoh copies
                it into its pool): one copy
    one part    `export.send_parts((body,))`: the same, written into the pool by the bridge

Per way: the wall time of the call on the sending thread (median and p90 over `count`
frames per round, microseconds), how many frames went through shared memory (the
receiver's count of shared memory samples) and how many `send_parts` composed in the
pool. Diagnosis, not a goal: nothing passes or fails.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import finish, header, table

WAYS = ("concat", "parts", "bytes", "one part")


def receive(endpoint: str) -> None:
    """The receiver process: a runtime importing /big whose node drops every frame; each
    line on stdin is answered with "<frames received> <through shared memory>"."""
    from roboscale.runtime.bridge import Bridge, bridge_config
    from roboscale.runtime.executor import Runtime
    from roboscale.runtime.node import Node, NodeRecipe
    from roboscale.runtime.supervisor import ChildSpec, Supervisor

    got = [0]

    class Drops(Node):
        def on_start(self) -> None:
            def on_frame(msg: Any) -> None:
                got[0] += 1

            self.subscribe("/big", on_frame, msg_type=memoryview, queue_size=1 << 20)

    b = Runtime().start()
    try:
        sup = Supervisor(b, "s", [ChildSpec(NodeRecipe("drops", Drops, {}))])
        b.wait(sup.start_async())
        with Bridge(b, bridge_config({"connect": [endpoint], "import": ["/big"]})) as into:
            print("ready", flush=True)
            for _ in sys.stdin:
                print(got[0], into.link.inbox.shm_received(), flush=True)
    finally:
        b.close()


class Pair:
    """The sending runtime (listening, exporting /big) and the receiver process."""

    def __init__(self) -> None:
        from roboscale.backends.base import free_port
        from roboscale.runtime.bridge import Bridge, bridge_config
        from roboscale.runtime.executor import Runtime

        endpoint = f"tcp/127.0.0.1:{free_port()}"
        self.a = Runtime().start()
        self.bridge = Bridge(self.a, bridge_config({"listen": [endpoint], "export": ["/big"]}))
        self.bridge.open()
        cmd = [sys.executable, __file__, "--receiver", endpoint]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.out, self.inp = self.proc.stdout, self.proc.stdin
        if self.out.readline().strip() != "ready":
            raise SystemExit("the receiver did not start")
        deadline = time.monotonic() + 30
        while not self.counts()[0]:
            self.a.call(lambda: self.a.bus.topic("/big").publish(b"hi"))
            time.sleep(0.01)
            if time.monotonic() > deadline:
                raise SystemExit("the bridges did not join in 30 s")
        self.export: Any = self.a.bus.topic("/big").taps[0]

    def counts(self) -> tuple[int, int]:
        self.inp.write("\n")
        self.inp.flush()
        received, shm = self.out.readline().split()
        return int(received), int(shm)

    def close(self) -> None:
        self.inp.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.bridge.close()
            self.a.close()


def run_way(way: str, export: Any, body: bytes, count: int, period_ns: int) -> list[float]:
    samples = []
    next_ns = time.perf_counter_ns()
    for seq in range(count):
        head = (seq + 1).to_bytes(8, "little") + time.perf_counter_ns().to_bytes(8, "little")
        t0 = time.perf_counter_ns()
        if way == "concat":
            export(head + body)
        elif way == "parts":
            export.send_parts((head, body))
        elif way == "bytes":
            export(body)
        else:
            export.send_parts((body,))
        samples.append((time.perf_counter_ns() - t0) / 1000)
        next_ns += period_ns
        pause = next_ns - time.perf_counter_ns()
        if pause > 0:
            time.sleep(pause / 1e9)
    return samples


def measure(size: int, count: int, rounds: int, rate_hz: float) -> list[dict[str, Any]]:
    link = Pair()
    export = link.export
    body = os.urandom(size - 16)
    rows = []
    try:
        run_way("parts", export, body, 50, int(1e9 / rate_hz))  # pools made and mapped
        last, deadline = -1, time.monotonic() + 30
        while (now := link.counts()[0]) != last and time.monotonic() < deadline:
            last = now  # until the probes and the warm-up frames all came through
            time.sleep(0.1)
        for rnd in range(rounds):
            for way in WAYS:
                load = os.getloadavg()[0]
                (n0, shm0), comp0 = link.counts(), export.pub.composed()[0]
                samples = run_way(way, export, body, count, int(1e9 / rate_hz))
                deadline = time.monotonic() + 30
                while (counts := link.counts())[0] < n0 + count and time.monotonic() < deadline:
                    time.sleep(0.01)
                samples.sort()
                rows.append(
                    {
                        "size": size,
                        "round": rnd + 1,
                        "way": way,
                        "put_us_p50": statistics.median(samples),
                        "put_us_p90": samples[int(0.9 * len(samples))],
                        "received": counts[0] - n0,
                        "through_shm": counts[1] - shm0,
                        "composed": export.pub.composed()[0] - comp0,
                        "load_1min": load,
                    }
                )
    finally:
        link.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--count", type=int, default=1000, help="frames per way per round (default 1000)"
    )
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument(
        "--rate-hz", type=float, default=1000.0, help="puts per second (default 1000)"
    )
    parser.add_argument(
        "--sizes", default="307200,4194304", help="frame bodies, bytes (default 307200,4194304)"
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="write command, environment and raw figures"
    )
    parser.add_argument("--check", action="store_true", help="accepted; nothing is judged")
    parser.add_argument("--receiver", help=argparse.SUPPRESS)  # the receiver process
    args = parser.parse_args()
    if args.receiver:
        receive(args.receiver)
        return
    report = header()
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        rate = min(args.rate_hz, 2e9 / size)  # at most about 2 GB/s: the receiver keeps up
        print(f"\n{size} B at {rate:.0f} Hz, {args.count} frames per way and round")
        got = measure(size, args.count, args.rounds, rate)
        table(
            got,
            [
                "round",
                "way",
                "put_us_p50",
                "put_us_p90",
                "received",
                "through_shm",
                "composed",
                "load_1min",
            ],
        )
        rows += got
    report["rows"] = rows
    finish(report, [], args)


if __name__ == "__main__":
    main()
