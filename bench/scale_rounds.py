"""`bench/scale.py --rounds N`: the close latency goals, measured in interleaved rounds.

On a shared machine a system's p50 drifts by tens of percent from one minute to the
next. Each round runs the bridge's echo pair (native path), the same on the python link,
and rospy's, one after the other, so every system is measured in every minute alike.
The goals are judged on the pooled p50s (all rounds' samples); `by_round` gives each
round's own ratio and their range, so a pooled figure near the target shows how often a
single round met it.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import scale
from common import attempt, ratio_text, table
from restart_baselines import percentiles

Pair = Callable[[int], scale.EchoRun]
SYSTEMS: list[tuple[str, Pair]] = [
    (scale.BRIDGE, lambda count: scale.runtime_pair(count, "native")),
    (scale.PY_LINK, lambda count: scale.runtime_pair(count, "python")),
    (scale.ROSPY, scale.rospy_pair),
]


def run(rounds: int, count: int, report: dict[str, Any]) -> list[dict[str, Any]]:
    """Measure, print the pooled table, fill `report`; the goals."""
    runs: dict[str, list[scale.EchoRun | None]] = {name: [] for name, _ in SYSTEMS}
    missing: dict[str, str] = {}
    for n in range(1, rounds + 1):
        print(f"round {n} of {rounds}", flush=True)
        for name, pair in SYSTEMS:
            runs[name].append(attempt(f"{name}, round {n}", lambda p=pair: p(count), missing))
    rows = [row for name in runs for row in pooled(name, runs[name])]
    print(f"\necho round trip over {rounds} interleaved rounds (µs, pooled):")
    table(rows, [*scale.ECHO_COLUMNS, "round_p50s_us"])
    for what, why in missing.items():
        print(f"not available: {what}: {why}")
    report["raw"] = {name: [r and r.rtt_us for r in got] for name, got in runs.items()}
    report["results"] = {"echo": rows, "not_available": missing}
    return goals(rows)


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


def goals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_system = {(r["system"], r["bytes"]): r for r in rows}
    out = []
    for size in scale.SIZES:
        ours, anchor = by_system.get((scale.BRIDGE, size)), by_system.get((scale.ROSPY, size))
        ratio, by_round = None, "-"
        if ours and anchor:
            ratio = ours["p50_us"] / anchor["p50_us"]
            pairs = zip(ours["round_p50s_us"], anchor["round_p50s_us"], strict=True)
            ratios = [a / b for a, b in pairs if a is not None and b]
            met = sum(r <= 1 for r in ratios)
            shown = [ratio_text(r, lambda x: x <= 1) for r in ratios]
            span = f"{min(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"
            by_round = f"{'/'.join(shown)} (range {span}, {met} of {len(ratios)} met)"
        out.append(
            {
                "goal": f"between processes p50 / rospy p50, {size} B (pooled)",
                "measured": ratio,
                "target": "<= 1",
                "met": ratio is not None and ratio <= 1,
                "by_round": by_round,
            }
        )
    return out
