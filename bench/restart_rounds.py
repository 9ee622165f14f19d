"""`bench/restart.py --rounds N`: the close restart goals, measured in interleaved rounds.

On a shared machine a restart's p50 drifts from one minute to the next. Each round runs
the in-process restarts, the process node's restarts on the warm standby (restarted on
its early death notice, runtime/deathnotice.py), the same on the zygote's exit report
(the path before the notice: the A/B), Erlang/OTP's restarts and roslaunch's respawns
(the anchor of the 1 ms goal: its ratio is judged in the same rounds), one after the
other (each with its own count per round), so every system is measured in every minute
alike. Each goal's figure is the p50 of all rounds' samples (or the ratio of two); its
verdict comes from the 95 % interval of a bootstrap over rounds, then each round's
samples (bench/goals.py). `by_round` gives each round's own figure and their range. The
durable topics are left to the full run. The warm standby's restarts, both ways, are
also timed stage by stage (restart_baselines.RESTART_STAGES), pooled over the rounds."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import goals as judge
from common import attempt, table
from restart_baselines import (
    otp_restart_us,
    percentiles,
    process_node_restart_us,
    ros_respawn_us,
    stage_rows,
)
from roboscale.runtime.measure import inprocess_restart_samples

INPROC, OTP = "runtime in-process node", "OTP"
STANDBY = "runtime process node (warm standby, death notice)"
STANDBY_EXIT = "runtime process node (warm standby, exit report)"  # the A/B: the old path
ROS = "roslaunch respawn (kill→publish)"  # the anchor of the 1 ms goal, in the same rounds
PROCESS_GOAL_US = 1_000.0  # a restart on the warm standby
STANDBY_GOAL = "process-node restart p50, warm standby (µs)"
PROCESS_TARGET = judge.at_most(PROCESS_GOAL_US, f"<= {PROCESS_GOAL_US:,.0f}")


def systems(
    n: dict[str, int], stages: dict[str, list[dict[str, float]]]
) -> list[tuple[str, Callable[[], list[float]]]]:
    """Each system's restarts of one round, in microseconds; the standby's restarts
    add their stage breakdown to `stages[system]`."""

    def standby(name: str, early: bool) -> Callable[[], list[float]]:
        def measure() -> list[float]:
            result = process_node_restart_us(n["process_kills"], standby=True, early=early)
            stages.setdefault(name, []).extend(result["stages"])
            samples: list[float] = result["restart_us"]
            return samples

        return measure

    return [
        (INPROC, lambda: inprocess_restart_samples(n["restarts"], workers=100)),
        (STANDBY, standby(STANDBY, True)),
        (STANDBY_EXIT, standby(STANDBY_EXIT, False)),
        (OTP, lambda: otp_restart_us(n["otp_kills"])["restart_us"]),
        (ROS, lambda: ros_respawn_us(n["ros_kills"])["publish_us"]),
    ]


def run(rounds: int, n: dict[str, int], report: dict[str, Any]) -> list[dict[str, Any]]:
    """Measure, print the pooled table, fill `report`; the goals."""
    stages: dict[str, list[dict[str, float]]] = {}
    chosen = systems(n, stages)
    runs: dict[str, list[list[float] | None]] = {name: [] for name, _ in chosen}
    missing: dict[str, str] = {}
    for r in range(1, rounds + 1):
        print(f"round {r} of {rounds}", flush=True)
        for name, measure in chosen:
            runs[name].append(attempt(f"{name}, round {r}", measure, missing))
    rows = []
    for name, got in runs.items():
        done = [x for x in got if x]
        if done:
            row = percentiles(name, [v for x in done for v in x])
            row["round_p50s_us"] = [round(statistics.median(x), 1) if x else None for x in got]
            rows.append(row)
    print(f"\nrestart time over {rounds} interleaved rounds, kill until ready (µs, pooled):")
    table(rows, ["system", "n", "p50_us", "p99_us", "max_us", "mean_us", "round_p50s_us"])
    steps = {name: stage_rows(got) for name, got in stages.items()}
    for name, rows_of in steps.items():
        noticed = int(sum(s.get("via_notice", 0) for s in stages[name]))
        print(f"\n{name}, stage by stage over all rounds (µs, each from the step before;")
        print(f"{noticed} of {len(stages[name])} restarts decided on the death notice):")
        table(rows_of, ["stage", "n", "p10_us", "p50_us", "p90_us"])
    for what, why in missing.items():
        print(f"not available: {what}: {why}")
    report["raw"] = {**runs, "standby_stages": stages}
    report["results"] = {"restart": rows, "standby_stages": steps, "not_available": missing}
    return [
        *goals(runs),
        *ab_line(runs, ROS, "standby / roslaunch"),
        *ab_line(runs, STANDBY_EXIT, "death notice / exit report (A/B)"),
    ]


def ab_line(
    runs: dict[str, list[list[float] | None]], other: str, what: str
) -> list[dict[str, Any]]:
    """The standby restarted on its death notice against `other` in the same rounds (a
    p50 ratio, at most 1): its A/B against the exit report, and roslaunch."""
    goal, target = f"process-node restart p50, {what}", judge.at_most(1)
    pairs = zip(runs[STANDBY], runs.get(other, []), strict=False)
    both = [(a, b) for a, b in pairs if a and b]
    if not both:
        return [{**judge.not_measured(goal, target), "by_round": "-"}]
    ours, before = [a for a, _ in both], [b for _, b in both]
    per_round = [statistics.median(a) / statistics.median(b) for a, b in both]
    return [{**judge.latency_ratio(goal, ours, before, target, per="round"),
             "by_round": judge.round_range(per_round, target)}]  # fmt: skip


def goals(runs: dict[str, list[list[float] | None]]) -> list[dict[str, Any]]:
    """The in-process/OTP ratio and the warm standby's p50, from the rounds that finished."""
    ratio_goal, ratio_target = "in-process restart p50 / OTP p50", judge.at_most(1)
    both = [(a, b) for a, b in zip(runs[INPROC], runs[OTP], strict=True) if a and b]
    if both:
        ours, anchor = [a for a, _ in both], [b for _, b in both]
        per_round = [statistics.median(a) / statistics.median(b) for a, b in both]
        out = [{**judge.latency_ratio(ratio_goal, ours, anchor, ratio_target, per="round"),
                "by_round": judge.round_range(per_round, ratio_target)}]  # fmt: skip
    else:
        out = [{**judge.not_measured(ratio_goal, ratio_target), "by_round": "-"}]
    standby = [x for x in runs[STANDBY] if x]
    if standby:
        p50s = [statistics.median(x) for x in standby]
        out.append({**judge.latency(STANDBY_GOAL, standby, PROCESS_TARGET, per="round"),
                    "by_round": judge.round_range(p50s, PROCESS_TARGET)})  # fmt: skip
    else:
        out.append({**judge.not_measured(STANDBY_GOAL, PROCESS_TARGET), "by_round": "-"})
    return out
