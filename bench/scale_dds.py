"""Echo between processes against dds, side by side: issue 26's goal "echo p50 between
processes at most dds's at every size of `make demo`'s sweep, at 10 Hz and at 1 kHz".

`bench/scale.py --against-dds [options]` (or this script itself). The trials are the
demo's own (experiments/demo.yaml, planned as `roboscale bench` plans them: its payloads
text 11 B, laserscan 4,250 B and image 307,200 B, its warm-up of 20 messages, its queues
and drain), at 10 Hz and at 1 kHz, with the counts given here. Each is run here with the
lab's runner (bench/dds.py's `lab_rtt_us`: the backend's infrastructure, a sender and an
echoer process, their records), on:

- `dds`: the lab's dds backend (Cyclone DDS), the anchor, as the demo runs it;
- `native-proc`: the runtime, one process per node, over its Zenoh bridge (the default
  queued transport);
- `native-proc, lowlatency`: the same on the bridge's opt-in lowlatency transport
  (NativeProcBackend("lowlatency")): the sizes up to its 48,000 B cap only.

And the floors at the same rates, pinging one message at a time (the next one due at
start + i / rate, or at once when a reply came later; each line gives the rate kept):

- `zenoh (Rust)`: raw Zenoh in Rust (baselines/zenoh_rs, built by bench/scale.py's cargo
  build into bench/out/zenoh-rs): what Zenoh costs any runtime, in any language;
- `zenoh_min + event loop`: Zenoh through the thinnest native binding to one Python event
  loop per process (baselines/zenoh_native_echo.py): what Zenoh and a Python callback per
  hop cost with no runtime code.

Interleaved: each round runs every system once at each rate and size (for each rate, for
each size: dds, native-proc, lowlatency, then the two floors), so every system is measured
in every minute alike; `--rounds N` repeats it (default 3, `--quick` 1). The goal lines
(bench/goals.py) are native-proc's p50 over dds's per rate and size, the lowlatency one
beside it, from the rounds both finished: the ratio of the pooled p50s with the 95 %
interval of a bootstrap over rounds, then messages; "not judged" when the interval
straddles 1 or the sample is short (10 Hz trials are slow: their n is printed). The
floors' ratios to dds are judged the same way in a table of their own: a floor above dds's
whole round trip means no runtime on that path can meet the goal. Percentiles only where
the sample supports them (p99 from 100 messages).

    .venv/bin/python bench/scale.py --against-dds [--quick] [--rounds 3]
        [--sizes 11,4250] [--messages-10hz 80] [--messages-1khz 1000] [--json PATH] [--check]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import goals as judge
import scale  # scale.py --against-dds registered itself as `scale` first: one copy
from common import attempt, finish, header, parser, table
from dds import lab_rtt_us
from restart_baselines import BASELINES
from roboscale.analysis.uncertainty import min_samples
from roboscale.backends.base import Backend, free_port, get_backend
from roboscale.backends.native import NativeProcBackend
from roboscale.backends.payload import HEADER
from roboscale.runtime.zenoh_config import LOWLATENCY_MAX_PAYLOAD
from roboscale.spec.loader import load_spec
from roboscale.spec.planner import TrialPlan, plan

DEMO = Path(__file__).resolve().parents[1] / "experiments" / "demo.yaml"
RATES = (10.0, 1000.0)
DDS, PROC, LOWLAT = "dds", "native-proc", "native-proc, lowlatency"
RUST, ZMIN = "zenoh (Rust)", "zenoh_min + event loop"
LAB = (DDS, PROC, LOWLAT)
FLOORS = (RUST, ZMIN)
SYSTEMS = (*LAB, *FLOORS)
# Messages per trial at each rate: a full --rounds 3 run in about 10 minutes on 2 cores.
FULL = {"messages_10hz": 80, "messages_1khz": 1000}
QUICK = {"messages_10hz": 30, "messages_1khz": 300}
DEFAULT_ROUNDS = 3
GOAL = judge.at_most(1.0)
PING_WARMUP = 20  # the floors' pings discard 20 (baselines), as the demo's trials do
FLOOR_GRACE_S = 60.0  # a floor's ping: its start, path probe and exit, beyond its pings

# One system's round trips: per (rate, size), one list of µs per round (None: it failed).
Samples = dict[tuple[float, int], list[list[float] | None]]


def count_option(rate: float, counts: dict[str, int]) -> int:
    return counts["messages_10hz" if rate < 100 else "messages_1khz"]


def sizes_option(text: str) -> list[int]:
    """--sizes: a subset of the demo's payload sizes."""
    demo = demo_sizes()
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or not set(sizes) <= set(demo):
        allowed = ",".join(map(str, demo))
        raise argparse.ArgumentTypeError(f"{text!r}: the demo's sizes in bytes, of {allowed}")
    return sizes


def parse(argv: Sequence[str]) -> tuple[argparse.Namespace, dict[str, int]]:
    """The options (scale.py's --against-dds taken out) and the message counts chosen."""
    p = parser(__doc__ or "")
    p.prog = "scale.py --against-dds"
    p.add_argument("--quick", action="store_true", help="one round, fewer messages")
    p.add_argument("--rounds", type=int, help=f"rounds (default {DEFAULT_ROUNDS}, --quick 1)")
    p.add_argument("--sizes", type=sizes_option, help="a subset of the demo's sizes, e.g. 11")
    for name in FULL:
        flag = name.replace("_", "-")
        p.add_argument(f"--{flag}", type=int, help=f"default {FULL[name]}, --quick {QUICK[name]}")
    args = p.parse_args(list(argv))
    if args.rounds is not None and args.rounds < 1:
        p.error("--rounds: at least 1")
    counts = {k: getattr(args, k) or (QUICK if args.quick else FULL)[k] for k in FULL}
    if min(counts.values()) < 1:
        p.error("message counts: at least 1")
    args.rounds = args.rounds or (1 if args.quick else DEFAULT_ROUNDS)
    args.sizes = args.sizes or demo_sizes()
    return args, counts


# --------------------------------------------------------------------------- the trials


@functools.cache
def demo_trials() -> dict[tuple[float, int], TrialPlan]:
    """The demo's dds trials at RATES, by (rate, size), as `roboscale bench` plans them."""
    spec = load_spec(DEMO, quick=True, backends=[DDS])
    return {(t.rate_hz, t.payload_bytes): t for t in plan(spec, [DDS]) if t.rate_hz in RATES}


def demo_sizes() -> list[int]:
    return sorted({size for _, size in demo_trials()})


def carries(system: str, size: int) -> bool:
    """Whether `system` is measured at `size`: lowlatency up to its cap only (a
    native-proc frame is the lab's header, then the payload)."""
    return system != LOWLAT or HEADER.size + size <= LOWLATENCY_MAX_PAYLOAD


def lab_trial(t: TrialPlan, system: str, messages: int) -> TrialPlan:
    """The demo's trial for a lab system, with this benchmark's count."""
    backend = DDS if system == DDS else PROC
    label = t.trial.replace(f"-{DDS}-", f"-{system.replace(', ', '-')}-")
    return replace(t, backend=backend, trial=label, messages=messages)


def lab_backends() -> dict[str, Backend]:
    return {
        DDS: get_backend(DDS),
        PROC: get_backend(PROC),
        LOWLAT: NativeProcBackend("lowlatency"),
    }


@dataclass
class Floor:
    """A floor's echo and ping programs (`PROGRAM echo ENDPOINT`, `PROGRAM ping --rate HZ
    ENDPOINT COUNT SIZE`)."""

    program: list[str]

    def run(self, rate: float, count: int, size: int) -> tuple[list[float], float | None]:
        """The round trips of one size at `rate`, and the rate the ping kept."""
        endpoint = f"tcp/127.0.0.1:{free_port()}"
        ping = [*self.program, "ping", "--rate", f"{rate:g}", endpoint, str(count), str(size)]
        timeout_s = FLOOR_GRACE_S + 2 * (PING_WARMUP + count) / rate
        with scale.echo_process([*self.program, "echo", endpoint]):
            proc = subprocess.Popen(
                ping,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            out = scale.wait_group(proc, timeout_s, f"{scale.program_name(ping)} ping")
        rows = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
        if len(rows) != 1 or rows[0].get("size") != size:
            raise RuntimeError(f"{scale.program_name(ping)} printed no line for {size} B")
        return rows[0]["rtt_us"], rows[0].get("rate_hz")


def floors() -> dict[str, Floor]:
    """The floors, built first (cargo: a no-op once built); UserError without cargo."""
    rust = scale.zenoh_rs_program()
    native = [sys.executable, str(BASELINES / "zenoh_native_echo.py")]
    return {RUST: Floor([str(rust)]), ZMIN: Floor(native)}


# --------------------------------------------------------------------------- the rounds


@dataclass
class Measured:
    """Every round's round trips, by system; the messages each trial or ping sent at
    each rate; the floors' kept rates; what failed; the load average at each round's
    start."""

    samples: dict[str, Samples]
    sent: dict[float, int]
    kept_hz: dict[str, dict[tuple[float, int], list[float | None]]] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    load_by_round: list[tuple[float, float, float]] = field(default_factory=list)

    def back(self, rate: float, runs: Sequence[list[float]]) -> str:
        """How many of the messages sent at `rate` in `runs` came back, as "n of sent"."""
        return f"{sum(map(len, runs)):,} of {len(runs) * self.sent[rate]:,}"


def measure(
    rounds: int, sizes: list[int], counts: dict[str, int], floor: dict[str, Floor]
) -> Measured:
    trials, backends = demo_trials(), lab_backends()
    sent = {rate: count_option(rate, counts) for rate in RATES}
    got = Measured({s: {} for s in SYSTEMS}, sent, {s: {} for s in FLOORS})
    for n in range(1, rounds + 1):
        got.load_by_round.append(os.getloadavg())
        print(f"round {n} of {rounds}, load average {got.load_by_round[-1][0]:.2f}", flush=True)
        for rate in RATES:
            count = count_option(rate, counts)
            for size in sizes:
                key, where = (rate, size), f"{rate:g} Hz, {size} B, round {n}"
                for system in (s for s in LAB if carries(s, size)):
                    trial = functools.partial(
                        lab_rtt_us, backends[system], lab_trial(trials[key], system, count)
                    )
                    done = attempt(f"{system}, {where}", trial, got.missing)
                    got.samples[system].setdefault(key, []).append(done or None)
                for system, program in floor.items():
                    ping = functools.partial(program.run, rate, count, size)
                    kept = attempt(f"{system}, {where}", ping, got.missing)
                    got.samples[system].setdefault(key, []).append(kept[0] if kept else None)
                    got.kept_hz[system].setdefault(key, []).append(kept[1] if kept else None)
    return got


def rows(got: Measured) -> list[dict[str, Any]]:
    """One row per system, rate and size: every round's samples pooled."""
    out = []
    for system, by_key in got.samples.items():
        for (rate, size), runs in sorted(by_key.items()):
            done = [r for r in runs if r]
            pooled = sorted(x for r in done for x in r)
            if not pooled:
                continue
            n = len(pooled)
            kept = [k for k in got.kept_hz.get(system, {}).get((rate, size), []) if k]
            out.append(
                {
                    "system": system,
                    "rate_hz": rate,
                    "bytes": size,
                    "rounds": len(done),
                    "sent_per_round": got.sent[rate],
                    "back": got.back(rate, done),
                    "n": n,
                    "p50_us": statistics.median(pooled),
                    "p90_us": pooled[int(0.9 * (n - 1))] if n >= min_samples(90) else None,
                    "p99_us": pooled[int(0.99 * (n - 1))] if n >= min_samples(99) else None,
                    "round_p50s_us": "/".join(
                        f"{statistics.median(r):.0f}" if r else "-" for r in runs
                    ),
                    "kept_hz": f"{min(kept):.1f}" if kept else None,
                }
            )
    return out


def ratio_lines(
    got: Measured, system: str, what: str, name: Callable[[float, int], str]
) -> list[dict[str, Any]]:
    """`system`'s p50 over dds's at every rate and size both measured, judged over the
    rounds both finished; `what` heads the goal's name."""
    out = []
    for key, runs in got.samples[system].items():
        anchor = got.samples[DDS].get(key, [])
        both = [(a, b) for a, b in zip(runs, anchor, strict=False) if a and b]
        rounds = "one round" if len(both) == 1 else f"{len(both)} rounds"
        goal = f"{what} {name(*key)} ({rounds})"
        line = judge.rounds_ratio(goal, both, GOAL)
        if both:
            line["why"] = "; ".join(filter(None, [line["why"], losses(got, key, system, both)]))
        out.append(line)
    return out


def losses(
    got: Measured,
    key: tuple[float, int],
    system: str,
    both: list[tuple[list[float], list[float]]],
) -> str:
    """A note when either side's trials lost messages: its p50 is of those that came
    back only (a trial that falls behind loses the latest, slowest ones)."""
    sides = {system: [a for a, _ in both], DDS: [b for _, b in both]}
    short = {
        name: got.back(key[0], runs)
        for name, runs in sides.items()
        if sum(map(len, runs)) < len(runs) * got.sent[key[0]]
    }
    return ", ".join(f"{name}: {back} back" for name, back in short.items())


def point(rate: float, size: int) -> str:
    return f"{rate:g} Hz, {size} B"


def goal_lines(got: Measured) -> list[dict[str, Any]]:
    """Issue 26's goal at each rate and size: native-proc's, then lowlatency's."""
    return [
        *ratio_lines(got, PROC, "native-proc p50 / dds p50,", point),
        *ratio_lines(got, LOWLAT, "native-proc (lowlatency) p50 / dds p50,", point),
    ]


def floor_lines(got: Measured) -> list[dict[str, Any]]:
    """The floors against dds: whether the goal can be met over Zenoh at all."""
    return [line for f in FLOORS for line in ratio_lines(got, f, f"{f} p50 / dds p50,", point)]


def headline(goals: list[dict[str, Any]], floor: list[dict[str, Any]]) -> str:
    def tally(lines: list[dict[str, Any]]) -> str:
        met = sum(g["met"] is True for g in lines)
        missed = sum(g["met"] is False for g in lines)
        return f"{met} met, {missed} missed, {len(lines) - met - missed} not judged"

    proc = [g for g in goals if g["goal"].startswith("native-proc p50")]
    rust = [g for g in floor if g["goal"].startswith(RUST)]
    return f"native-proc <= dds: {tally(proc)}; raw Zenoh in Rust <= dds: {tally(rust)}"


# --------------------------------------------------------------------------- the run


COLUMNS = ["system", "rate_hz", "bytes", "rounds", "back", "p50_us", "p90_us"]
COLUMNS += ["p99_us", "round_p50s_us", "kept_hz"]
LINE_COLUMNS = ["goal", "measured", "interval_text", "met", "sample", "by_round", "why"]


def main(argv: Sequence[str]) -> None:
    args, counts = parse(argv)
    report = header()
    report.update(counts=counts, rounds=args.rounds, sizes=args.sizes, rates=list(RATES))
    report["load_average"] = {"start": os.getloadavg()}
    print(f"load average (1, 5, 15 min) at the start: {report['load_average']['start']}")
    print(f"messages per trial: {counts} (+{PING_WARMUP} warm-up, discarded), per round")
    missing: dict[str, str] = {}
    built = attempt("build of the floors (cargo)", floors, missing) or {}
    backends = lab_backends()
    report["backends"] = {s: attempt(f"{s} version", backends[s].version, missing) for s in LAB}
    got = measure(args.rounds, args.sizes, counts, built)
    got.missing = {**missing, **got.missing}
    table_rows = rows(got)
    print(f"\necho round trip, {args.rounds} interleaved round(s), pooled (µs):")
    table(table_rows, COLUMNS)
    for what, why in got.missing.items():
        print(f"not available: {what}: {why}")
    goals, floor = goal_lines(got), floor_lines(got)
    print("\nfloors against dds (no runtime code; above 1: the goal is out of reach there):")
    table(floor, LINE_COLUMNS)
    report["load_average"]["end"] = os.getloadavg()
    print(f"\nload average at the end: {report['load_average']['end']}")
    print(f"\n{headline(goals, floor)}")
    report["raw"] = {
        s: {f"{rate:g}Hz/{size}B": runs for (rate, size), runs in by.items()}
        for s, by in got.samples.items()
    }
    report["raw_kept_hz"] = {
        s: {f"{rate:g}Hz/{size}B": k for (rate, size), k in by.items()}
        for s, by in got.kept_hz.items()
    }
    report["load_average"]["by_round"] = got.load_by_round
    report["results"] = {"echo": table_rows, "floors": floor, "not_available": got.missing}
    report["headline"] = headline(goals, floor)
    finish(report, goals, args, ["by_round"])


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except KeyboardInterrupt:  # every child was already stopped on the way out
        sys.exit("interrupted")
