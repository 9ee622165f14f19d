"""Cyclone DDS's own benchmark beside the dds backend, zenoh and ros1, in one run.

Round-trip latency on loopback at the lab report's sizes (256 B to 4 MB):

- `ddsperf`: `ddsperf ping R size S` against `ddsperf pong` (Debian's
  cyclonedds-tools, C), the native anchor. ddsperf prints HALF the round trip
  (`update_roundtrip` divides by 2): every figure of it here is doubled. It
  prints percentiles per second of run, not samples: its p50 here is the
  count-weighted median of the per-second medians, after the first second.
- the `dds` backend's echo (a sender and an echoer process, the lab's own trial),
  and the same echo on `zenoh` and `ros1`.

ddsperf and the dds backend use the same Cyclone configuration (`cyclone_xml`:
interface lo, multicast off, peer 127.0.0.1, each in a domain leased for it).
Rate: 200 Hz below 256 KB, 50 Hz from 256 KB, for everyone alike. The dds echo runs
with ddsperf's ping/pong QoS (reliable, keep-last 1: a late sample is replaced, not
queued); zenoh and ros1 with their own. Goal: the dds backend's p50 at most 1.5x
ddsperf's at 64 KB and above; below, the ratio is reported (docs/dds.md says where
the time goes).

Each size is measured in rounds (`--rounds`, 3 by default): every system once, in
turn, then again; each system's rounds are pooled into its row (`p50_rounds` shows
each round's own p50). On a shared machine a system's p50 drifts by tens of percent
from one minute to the next: rounds put every system into every minute alike. The
goal's figure is the ratio of the pooled p50s; its verdict comes from the 95 % interval
of the rounds' ratios (bench/goals.py): PASS or FAIL when the whole interval lies on one
side of the target, "not judged" when it straddles it or there is one round (--quick).
Its line also gives each round's ratio and their range (`by_round`).

A second, small table prices the octet fast path: the library's own packing of
`sequence<uint8>` against the backend's machine, same bytes.

    .venv/bin/python bench/dds.py [--quick] [--json bench/out/dds.json] [--check]
        [--rounds 3] [--sizes 64KB,256KB] [--systems ddsperf,dds]   (a subset, for quick iterations;
        no serializer table then) [--ddsperf-also PATH]
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import goals as judge
from common import attempt, counted_args, finish, header, stop_group, table
from roboscale.backends.base import Backend, get_backend
from roboscale.backends.dds import cyclone_xml, lease_domain
from roboscale.lab.trial import run_here
from roboscale.spec.payloads import format_size, parse_payload
from roboscale.spec.planner import TrialPlan

SIZES = [256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20]
QUICK_SIZES = [256, 65536]
GOAL_FROM = 65536
LARGE = 262144  # from here on 50 Hz, for everyone alike
# ddsperf's ping/pong QoS ("always keep-last-1", reliable): the dds echo runs with it too.
DDSPERF_QOS = {"reliability": "reliable", "history": "keep_last 1"}
GOAL_RATIO = 1.5
DEFAULT_ROUNDS = 3
BACKENDS = ["dds", "zenoh", "ros1"]
SYSTEMS = ["ddsperf", "ddsperf-waitset", *BACKENDS]
ALSO = "ddsperf-also"  # another ddsperf build (--ddsperf-also), beside the anchor
DDSPERF = "ddsperf"
LINE = re.compile(
    r"size (?P<size>\d+) mean \S+ min \S+ 50% (?P<p50>[\d.]+)(?P<unit>[mun]?s) "
    r"90% \S+ 99% (?P<p99>[\d.]+)(?P<unit99>[mun]?s) max \S+ cnt (?P<cnt>\d+)"
)
UNITS = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def rate_for(size: int) -> float:
    return 200.0 if size < LARGE else 50.0


def ddsperf_point(
    size: int, messages: int, trigger: str = "listener", binary: str = DDSPERF
) -> dict[str, Any]:
    """One size of ddsperf ping/pong; round trips (its printed figures doubled). ddsperf
    takes samples in a listener on Cyclone's receive thread by default; `waitset` makes
    it wake a thread of its own, as the dds backend's readers do."""
    lease = lease_domain()
    env = {**os.environ, "CYCLONEDDS_URI": cyclone_xml(lease.domain, "lo", ["127.0.0.1"], 4)}
    rate = rate_for(size)
    seconds = max(3, int(messages / rate) + 2)
    base = [binary, "-i", str(lease.domain)]
    pong = subprocess.Popen(
        [*base, "pong", trigger], env=env, stdout=subprocess.DEVNULL, start_new_session=True
    )
    try:
        ping = subprocess.run(
            [*base, "-D", str(seconds), "ping", f"{rate:g}Hz", "size", str(size), trigger],
            env=env,
            capture_output=True,
            text=True,
            timeout=seconds + 30,
            check=False,
        )
    finally:
        stop_group(pong, grace_s=5.0)
        lease.release()
    point = summarize_ddsperf(ping.stdout, size, rate)
    point["system"] = "ddsperf" if trigger == "listener" else f"ddsperf-{trigger}"
    if binary != DDSPERF:
        point["system"], point["binary"] = ALSO, binary
    return point


def summarize_ddsperf(output: str, size: int, rate: float) -> dict[str, Any]:
    seconds = [m.groupdict() for m in LINE.finditer(output)]
    if not seconds:
        raise RuntimeError(f"ddsperf printed no latency line: {output[-400:]!r}")
    kept = seconds[1:] or seconds  # the first second holds discovery and warm-up
    p50s = [float(s["p50"]) * UNITS[s["unit"]] * 2 for s in kept]
    p99s = [float(s["p99"]) * UNITS[s["unit99"]] * 2 for s in kept]
    counts = [int(s["cnt"]) for s in kept]
    weighted = [p for p, c in zip(p50s, counts, strict=True) for _ in range(c)]
    return {
        "system": "ddsperf",
        "bytes": size,
        "rate_hz": rate,
        "n": sum(counts),
        "p50_us": statistics.median(weighted),
        "p99_us": max(p99s),
        "raw_lines": [m.group(0) for m in LINE.finditer(output)],
        "second_p50s_us": p50s,
        "second_counts": counts,
    }


def lab_rtt_us(backend: Backend, t: TrialPlan) -> list[float]:
    """Run one echo trial of the lab here, as `roboscale bench` runs it (the backend's
    infrastructure, its sender and echoer nodes, their records): the round trip of every
    message that came back, in µs (also bench/scale_dds.py's)."""
    backend.check()
    with tempfile.TemporaryDirectory(prefix="roboscale-bench-echo-") as work:
        tables, _ = run_here(backend, t, Path(work))
    rows = tables[0].to_pydict()
    return [
        (r - s) / 1e3
        for s, r in zip(rows["t_sent"], rows["t_received"], strict=True)
        if r is not None
    ]


def echo_point(backend_name: str, size: int, messages: int, warmup: int) -> dict[str, Any]:
    """One size of the lab's echo trial (one pair) on a backend: round trips of every
    message, from the records the lab writes."""
    t = TrialPlan(
        index=1,
        trial=f"bench-{backend_name}-{size}",
        backend=backend_name,
        rate_hz=rate_for(size),
        payload=format_size(size),
        payload_bytes=size,
        pairs=1,
        run=0,
        messages=messages,
        warmup=warmup,
        drain_s=2.0,
        pause_s=0.0,
        publisher_queue=1000,
        subscriber_queue=0,
        mode="standard",
        match_timeout_s=20.0,
        seed=0,
        **(DDSPERF_QOS if backend_name == "dds" else {}),
    )
    rtt = lab_rtt_us(get_backend(backend_name), t)
    if not rtt:
        raise RuntimeError(f"{backend_name}: no echo came back at {size} B")
    return {
        "system": backend_name,
        "bytes": size,
        "rate_hz": t.rate_hz,
        "n": len(rtt),
        "lost": messages - len(rtt),
        "p50_us": float(np.percentile(rtt, 50)),
        "p99_us": float(np.percentile(rtt, 99)),
        "rtt_us": rtt,
    }


def pooled(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """One system's rounds at one size as one row: the p50 of every round trip of every
    round (ddsperf: of its per-second medians, weighted by count, as in one round), the
    highest p99, and each round's own p50 beside it."""
    row = {**rounds[0], "rounds": len(rounds), "round_p50s_us": [r["p50_us"] for r in rounds]}
    row["n"] = sum(r["n"] for r in rounds)
    row["p99_us"] = max(r["p99_us"] for r in rounds)
    if "rtt_us" in row:
        row["rtt_us"] = [x for r in rounds for x in r["rtt_us"]]
        row["lost"] = sum(r["lost"] for r in rounds)
        row["p50_us"] = float(np.percentile(row["rtt_us"], 50))
    else:
        row["raw_lines"] = [line for r in rounds for line in r["raw_lines"]]
        row["second_p50s_us"] = [p for r in rounds for p in r["second_p50s_us"]]
        row["second_counts"] = [c for r in rounds for c in r["second_counts"]]
        pairs = zip(row["second_p50s_us"], row["second_counts"], strict=True)
        row["p50_us"] = statistics.median([p for p, c in pairs for _ in range(c)])
    row["p50_rounds"] = "/".join(f"{p:.0f}" for p in row["round_p50s_us"])
    return row


def serializer_point(size: int, repeats: int) -> dict[str, Any]:
    """The library's packing of sequence<uint8> against the fast machine (same bytes)."""
    from roboscale.backends.dds_types import LibraryStampedBytes, StampedBytes, Time

    data = bytes(size)
    ours = StampedBytes(id=1, t=Time(sec=1, nanosec=1), data=data)
    theirs = LibraryStampedBytes(id=1, t=Time(sec=1, nanosec=1), data=list(data))
    if ours.serialize() != theirs.serialize():
        raise RuntimeError(f"the fast path wrote other bytes at {size} B")

    def best_ms(message: Any) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            message.serialize()
            times.append(time.perf_counter() - t0)
        return min(times) * 1e3

    library_ms, fast_ms = best_ms(theirs), best_ms(ours)
    return {"bytes": size, "library_ms": library_ms, "fast_ms": fast_ms,
            "speedup": library_ms / fast_ms}  # fmt: skip


GOAL = judge.at_most(GOAL_RATIO)


def goals(rows: list[dict[str, Any]], sizes: list[int]) -> list[dict[str, Any]]:
    """The goal per size from 64 KB, on the pooled p50s, judged by the interval of the
    rounds' ratios (dds's round against ddsperf's round of the same minutes: ddsperf
    keeps medians per second, not samples); `by_round` gives each round's ratio."""
    by_system = {(r["system"], r["bytes"]): r for r in rows}
    out = []
    for size in (s for s in sizes if s >= GOAL_FROM):
        goal = f"dds p50 / ddsperf p50, {format_size(size)}"
        ours, anchor = by_system.get(("dds", size)), by_system.get(("ddsperf", size))
        if ours is None or anchor is None or not anchor["p50_us"]:
            out.append({**judge.not_measured(goal, GOAL), "by_round": "-"})
            continue
        pairs = zip(ours["round_p50s_us"], anchor["round_p50s_us"], strict=False)
        ratios = [a / b for a, b in pairs if b]
        ratio, n = ours["p50_us"] / anchor["p50_us"], (ours["n"], anchor["n"])
        line = judge.from_rounds(goal, ratio, ratios, GOAL, n)
        out.append({**line, "by_round": judge.round_range(ratios, GOAL)})
    return out


def measure_size(
    size: int,
    counts: dict[str, int],
    systems: list[str],
    missing: dict[str, str],
    also: str,
    rounds: int,
) -> list[Any]:
    """ddsperf, then every backend's echo at one size (those of `systems`), `rounds`
    times in turn, each system's rounds pooled into one row; what could not run is in
    `missing`. `also`: another ddsperf binary, measured after the anchor."""
    total, messages, warmup = counts["messages"] + counts["warmup"], *counts.values()
    label = format_size(size)
    runs: dict[str, Any] = {
        "ddsperf": functools.partial(ddsperf_point, size, total),
        ALSO: functools.partial(ddsperf_point, size, total, "listener", also),
        "ddsperf-waitset": functools.partial(ddsperf_point, size, total, "waitset"),
    }
    for name in BACKENDS:
        runs[name] = functools.partial(echo_point, name, size, messages, warmup)
    chosen = [n for n in runs if n in systems and (n != ALSO or also)]
    measured: dict[str, list[dict[str, Any]]] = {name: [] for name in chosen}
    for r in range(1, rounds + 1):
        for name in chosen:
            point = attempt(f"{name} {label}, round {r} of {rounds}", runs[name], missing)
            if point:
                measured[name].append(point)
    return [pooled(points) for points in measured.values() if points]


def add_subset(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", help="comma-separated sizes (e.g. 64KB,256KB); default: all")
    p.add_argument(
        "--systems", help=f"comma-separated, of {','.join(SYSTEMS)} (or none); default: all"
    )
    p.add_argument(
        "--rounds",
        type=int,
        help="rounds per size: every system in turn, then again, each system's rounds "
        "pooled, so that a minute's drift of the machine reaches all alike (default 3; "
        "--quick 1)",
    )
    p.add_argument(
        "--ddsperf-also",
        metavar="PATH",
        default="",
        help="another ddsperf binary (e.g. built from the Cyclone version the backend runs), "
        "measured beside the anchor as ddsperf-also; the goal stays against `ddsperf`",
    )


def parse_size(text: str) -> int:
    try:
        return parse_payload(text)[1]
    except ValueError as e:
        raise SystemExit(f"error: --sizes: {e}") from None


def chosen(args: argparse.Namespace) -> tuple[list[int], list[str]]:
    """The sizes and systems to measure: a subset when asked, else the full run."""
    sizes = QUICK_SIZES if args.quick else SIZES
    if args.sizes:
        sizes = [parse_size(s) for s in args.sizes.split(",")]
    systems = args.systems.split(",") if args.systems else SYSTEMS
    systems = [] if systems == ["none"] else systems  # --systems none: only --ddsperf-also
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        raise SystemExit(f"error: --systems: unknown {unknown}; allowed: {','.join(SYSTEMS)}")
    return sizes, systems


def main() -> None:
    args, counts = counted_args(
        __doc__ or "", {"messages": 450, "warmup": 50}, {"messages": 60, "warmup": 10}, add_subset
    )
    report = header()
    sizes, systems = chosen(args)
    report["sizes"], report["systems"] = sizes, systems
    missing: dict[str, str] = {}
    rows: list[dict[str, Any]] = []
    rounds = args.rounds or (1 if args.quick else DEFAULT_ROUNDS)
    if rounds < 1:
        raise SystemExit("error: --rounds: at least 1")
    report["rounds"] = rounds
    if "dds" in systems:  # which per-message path its nodes take ($ROBOSCALE_DDS_PATH)
        report["dds_backend"] = get_backend("dds").version()
        print(f"dds backend: {report['dds_backend']}")
    for size in sizes:
        rows += measure_size(size, counts, [*systems, ALSO], missing, args.ddsperf_also, rounds)
    anchor = {r["bytes"]: r["p50_us"] for r in rows if r["system"] == "ddsperf"}
    for r in rows:
        r["vs_ddsperf"] = r["p50_us"] / anchor[r["bytes"]] if r["bytes"] in anchor else None
    print("\nround trip on loopback (µs; ddsperf's printed figures doubled):")
    columns = ["system", "bytes", "rate_hz", "n", "lost", "p50_us", "p99_us", "vs_ddsperf"]
    table(rows, [*columns, "p50_rounds"])
    serial: list[dict[str, Any]] = []
    if not (args.sizes or args.systems):  # a subset run is an iteration on latency alone
        repeats = 3 if args.quick else 10
        serial = [serializer_point(s, repeats) for s in (256, 65536, 1 << 20, 4 << 20)]
        print("\nserializing StampedBytes: the library's sequence<uint8> against the fast path:")
        table(serial, ["bytes", "library_ms", "fast_ms", "speedup"])
    report.update({"rows": rows, "serializer": serial, "missing": missing})
    finish(report, goals(rows, sizes), args, ["by_round"])


if __name__ == "__main__":
    main()
