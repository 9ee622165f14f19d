"""What a backlog of large samples costs the bridge's native path (issue 26, zero copy).

    .venv/bin/python bench/zcopy_backlog.py [--size 307200] [--count 200] [--rounds 3]
        [--src LABEL=PATH ...] [--json bench/out/zcopy/backlog.json]

Two `_zbridge` sessions in one process on loopback (shared memory on, as between the
runtime's processes): `count` payloads of `size` bytes are put back to back while the
subscriber takes nothing, then taken 64 at a time. Reported per run: how many arrived
through shared memory (the sender's pool is 16 MB: a sample held by the receiver holds
its chunk, and a put that finds no free chunk goes over TCP), the put's time per
message, and the loop thread's CPU per message taken (`Inbox.take`: a copy into a bytes
before, a lent buffer after). `--src LABEL=PATH` runs the same probe against another
source tree (e.g. the old code, copied), interleaved round by round. Diagnosis, not a
goal: nothing passes or fails.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import finish, header, table

WARM = 20  # round trips first: both pools made and mapped
TAKE = 64


def probe(size: int, count: int) -> dict[str, Any]:
    from roboscale.backends.base import free_port
    from roboscale.runtime import _zbridge  # type: ignore[attr-defined]
    from roboscale.runtime.bridge import bridge_config, bridge_settings

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    a = _zbridge.Session(bridge_settings(bridge_config({"listen": [endpoint]})))
    b = _zbridge.Session(bridge_settings(bridge_config({"connect": [endpoint]})))
    inbox = b.inbox("rs", 16_384)
    inbox.import_topic("/x", 0)
    pub = a.publisher("rs/x", 1, True)
    payload = os.urandom(size)
    try:
        deadline = time.monotonic() + 10.0
        while not inbox.take(TAKE) and time.monotonic() < deadline:
            pub.send(payload, 0, 0)  # until the sessions are connected
            time.sleep(0.01)
        for _ in range(WARM):
            pub.send(payload, 0, 0)
            time.sleep(0.002)
            inbox.take(TAKE)
        shm_before = inbox.shm_received()
        started = time.perf_counter_ns()
        for _ in range(count):
            pub.send(payload, 0, 0)
        put_ns = time.perf_counter_ns() - started
        taken = 0
        cpu_before = time.thread_time_ns()
        deadline = time.monotonic() + 30.0
        while taken < count and time.monotonic() < deadline:
            rows = inbox.take(TAKE)
            taken += len(rows)
            del rows
            if taken < count:
                time.sleep(0.0005)
        take_cpu_ns = time.thread_time_ns() - cpu_before
        return {
            "size": size,
            "count": count,
            "taken": taken,
            "as_shm": inbox.shm_received() - shm_before,
            "put_us_per_msg": put_ns / count / 1000,
            "take_cpu_us_per_msg": take_cpu_ns / max(1, taken) / 1000,
        }
    finally:
        inbox.close()
        a.close()
        b.close()


def run_one(src: str, size: int, count: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": src}
    cmd = [sys.executable, __file__, "--probe", "--size", str(size), "--count", str(count)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--size", type=int, default=307_200, help="payload bytes (default 307200)")
    p.add_argument("--count", type=int, default=200, help="payloads put back to back (default 200)")
    p.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    p.add_argument("--src", action="append", default=[], help="LABEL=PATH of a source tree")
    p.add_argument("--json", type=Path, help="write command, environment and raw figures")
    p.add_argument("--probe", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--check", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.probe:
        print(json.dumps(probe(args.size, args.count)))
        return
    here = str(Path(__file__).resolve().parent.parent / "src")
    trees = [("this", here)] + [tuple(s.split("=", 1)) for s in args.src]
    report = header()
    report["load_before"] = os.getloadavg()
    rows: list[dict[str, Any]] = []
    for n in range(args.rounds):
        for label, src in trees:
            rows.append({"tree": label, "round": n, **run_one(src, args.size, args.count)})
    report["load_after"] = os.getloadavg()
    report["runs"] = rows
    print(f"load average before {report['load_before']}, after {report['load_after']}")
    table(
        rows, ["tree", "round", "size", "taken", "as_shm", "put_us_per_msg", "take_cpu_us_per_msg"]
    )
    finish(report, [], args)


if __name__ == "__main__":
    main()
