"""`bench/scale.py --rounds N`: the close latency goals, measured in interleaved rounds.

On a shared machine a system's p50 drifts by tens of percent from one minute to the
next. Each round runs the bridge's echo pair (native path), the same on the python link,
the native path on Zenoh's lowlatency transport (its sizes up to its cap), and rospy's,
one after the other, so every system is measured in every minute alike.
Each goal's figure is the ratio of the pooled p50s (all rounds' samples); its verdict
comes from the 95 % interval of a bootstrap over rounds, then each round's samples
(bench/goals.py): PASS or FAIL when the whole interval lies on one side of 1, "not
judged" when it straddles 1. `by_round` gives each round's own ratio and their range.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

import goals as judge
import scale
from common import attempt, table
from restart_baselines import percentiles

Pair = Callable[[int], scale.EchoRun]
SYSTEMS: list[tuple[str, Pair]] = [
    (scale.BRIDGE, lambda count: scale.runtime_pair(count, "native")),
    (scale.PY_LINK, lambda count: scale.runtime_pair(count, "python")),
    (scale.LOWLAT, scale.lowlatency_pair),
    (scale.ROSPY, scale.rospy_pair),
]


def baseline_name(src: str) -> str:
    return f"{scale.BRIDGE}, baseline {src}"


def systems(baseline_src: str | None, rust: Path | None = None) -> list[tuple[str, Pair]]:
    """The pairs of each round; with `baseline_src` (another checkout's `src`, e.g. the
    code before a change) its native bridge pair too, right after this code's: an A/B
    in the same minutes; with `rust` (the program scale.zenoh_rs_program built) the two
    floors last: Zenoh through the minimal binding to one event loop per process (no
    runtime code), and raw Zenoh in Rust (no Python)."""
    out = list(SYSTEMS)
    if baseline_src is not None:

        def old(count: int) -> scale.EchoRun:
            return scale.runtime_pair(count, "native", src=baseline_src)

        out.insert(1, (baseline_name(baseline_src), old))
    if rust is not None:
        program = rust

        def floor(count: int) -> scale.EchoRun:
            return scale.zenoh_rs_pair(count, program)

        out += [(scale.NATIVE_FLOOR, scale.zenoh_native_pair), (scale.RUST, floor)]
    return out


def run(
    rounds: int,
    count: int,
    report: dict[str, Any],
    baseline_src: str | None = None,
    rust: Path | None = None,
) -> list[dict[str, Any]]:
    """Measure, print the pooled table, fill `report`; the goals."""
    measured = systems(baseline_src, rust)
    runs: dict[str, list[scale.EchoRun | None]] = {name: [] for name, _ in measured}
    missing: dict[str, str] = {}
    for n in range(1, rounds + 1):
        print(f"round {n} of {rounds}", flush=True)
        for name, pair in measured:
            runs[name].append(attempt(f"{name}, round {n}", lambda p=pair: p(count), missing))
    rows = [row for name in runs for row in pooled(name, runs[name])]
    print(f"\necho round trip over {rounds} interleaved rounds (µs, pooled):")
    table(rows, [*scale.ECHO_COLUMNS, "round_p50s_us"])
    for what, why in missing.items():
        print(f"not available: {what}: {why}")
    report["raw"] = {name: [r and r.rtt_us for r in got] for name, got in runs.items()}
    report["results"] = {"echo": rows, "not_available": missing}
    return goals(runs)


def pooled(name: str, runs: list[scale.EchoRun | None]) -> list[dict[str, Any]]:
    done = [r for r in runs if r is not None]
    rows = []
    for size in scale.SIZES:
        samples = [x for r in done for x in r.rtt_us.get(size, [])]
        if not samples:
            continue
        switches = [r.per_round_trip() for r in done]
        rows.append(
            {
                **percentiles(name, samples),
                "bytes": size,
                "cs_echo_per_rt": statistics.fmean(s["cs_echo_per_rt"] for s in switches),
                "cs_ping_per_rt": statistics.fmean(s["cs_ping_per_rt"] for s in switches),
                **{
                    cpu: statistics.fmean(s[cpu] for s in switches)
                    for cpu in ("cpu_echo_us_per_rt", "cpu_ping_us_per_rt")
                },
                # None for a round that failed: rounds stay aligned across systems.
                "round_p50s_us": [
                    round(statistics.median(r.rtt_us[size]), 1)
                    if r and r.rtt_us.get(size)
                    else None
                    for r in runs
                ],
            }
        )
    return rows


def goals(runs: dict[str, list[scale.EchoRun | None]]) -> list[dict[str, Any]]:
    """Per size of a goal, the bridge's p50 over rospy's from the rounds both finished,
    on the default transport, then on lowlatency (its sizes)."""
    return [
        line
        for system in (scale.BRIDGE, scale.LOWLAT)
        if system in runs
        for line in system_goals(system, runs)
    ]


def system_goals(system: str, runs: dict[str, list[scale.EchoRun | None]]) -> list[dict[str, Any]]:
    out = []
    for size, bound in scale.ratio_goal_sizes(system).items():
        target = judge.at_most(bound)
        goal = f"{scale.ratio_goal_name(system, size)} ({len(runs[scale.ROSPY])} rounds)"
        pairs = zip(runs[system], runs[scale.ROSPY], strict=True)
        both = [(a.rtt_us[size], b.rtt_us[size]) for a, b in pairs
                if a and b and a.rtt_us.get(size) and b.rtt_us.get(size)]  # fmt: skip
        out.append(judge.rounds_ratio(goal, both, target))
    return out
