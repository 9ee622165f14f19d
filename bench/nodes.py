"""100,000 nodes in one process: idle memory against Erlang, and 1 Hz publishing.

1. Idle nodes: N in-process nodes (one subscription each, on a topic of its own) started
   under one supervisor in a fresh Python process (runtime/measure.py `idle_node_memory`,
   through bench/scale.py's `idle_nodes`): growth of the resident set (/proc/self/statm)
   per node while they start, the Python heap per node (tracemalloc, a second pass) and
   the start time per node. Beside it, in the same run and the same way, N idle Erlang
   processes (bench/baselines/erl_idle.erl: each waits in `receive`): RSS growth per
   process, erlang:memory(processes) per process, and one process's process_info memory.
   At 1,000, 10,000 and 100,000, side by side, so the growth shows; `--rounds` times over,
   interleaved (runtime, Erlang, runtime, ...).
2. Publishing nodes: N nodes in a fresh process (bench/baselines/node_crowd.py), node i
   publishing a timestamp on /t{i} at 1 Hz and subscribed to /t{i+1}; every node's timer
   begins once all have started, at a phase spread over one second, and publishes
   `--publish-s` messages. Published, delivered, ticks the timers skipped because the loop
   was late, latency from publish to the subscriber's callback, and the process's RSS.

Goals: at 100,000 idle nodes, RSS per node at most an idle Erlang process's (the ratio of
each round; PASS or FAIL when its 95 % interval lies on one side, goals.from_rounds);
100,000 nodes at 1 Hz: every message delivered, and no tick skipped (the 1 Hz held).

    .venv/bin/python bench/nodes.py [--quick] [--json bench/out/nodes.json] [--check]
        [--rounds 3] [--publish-s 30] [--counts 1000,10000,100000]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import goals as judge
from common import NOT_JUDGED, attempt, counted_args, finish, header, table
from restart_baselines import BASELINES
from roboscale.errors import UserError
from scale import idle_nodes

COUNTS = [1000, 10_000, 100_000]
QUICK_COUNTS = [1000, 10_000]
GOAL_NODES = 100_000
FULL = {"rounds": 3, "publish_s": 30}
QUICK = {"rounds": 1, "publish_s": 3}
RUNTIME, ERLANG = "runtime node", "Erlang process"
IDLE_COLUMNS = ["system", "count", "rounds", "rss_B_median", "rss_B_min", "rss_B_max"]
IDLE_COLUMNS += ["heap_B", "start_us", "process_info_B"]
CROWD_COLUMNS = ["nodes", "started", "due", "published", "delivered", "missed_ticks"]
CROWD_COLUMNS += ["elapsed_s", "latency_p50_us", "latency_p99_us", "latency_max_us"]
CROWD_COLUMNS += ["cpu_s", "cpu_us_per_message", "gc_s", "rss_end_bytes"]


def erlang_idle(n: int, build: Path) -> dict[str, Any]:
    """N idle Erlang processes in a fresh VM (erl_idle.erl compiled into `build`)."""
    erl = shutil.which("erl")
    if erl is None:
        raise UserError("Erlang is not installed", hint="as root: apt-get install erlang-nox")
    out = subprocess.run(
        [erl, "-noshell", "-pa", str(build), "-run", "erl_idle", "main", str(n)],
        capture_output=True,
        text=True,
        timeout=120 + n * 0.001,
        check=False,
    )
    if out.returncode != 0:
        raise UserError(f"erl_idle failed ({out.returncode}): {out.stderr.strip()[-300:]}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def compile_erlang(build: Path) -> Path:
    erlc = shutil.which("erlc")
    if erlc is None:
        raise UserError("Erlang is not installed", hint="as root: apt-get install erlang-nox")
    subprocess.run(
        [erlc, "-o", str(build), str(BASELINES / "erl_idle.erl")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return build


def publishing(n: int, seconds: int) -> dict[str, Any]:
    """node_crowd.py in a fresh process: N nodes at 1 Hz for `seconds` messages each."""
    out = subprocess.run(
        [sys.executable, str(BASELINES / "node_crowd.py"), str(n), str(seconds)],
        capture_output=True,
        text=True,
        timeout=seconds + 240 + n * 0.002,
        check=False,
    )
    if out.returncode != 0:
        raise UserError(f"node_crowd failed ({out.returncode}): {out.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def idle_rounds(
    counts: list[int], rounds: int, missing: dict[str, str]
) -> dict[str, dict[int, list[dict[str, Any]]]]:
    """Per system and count, one measurement per round (runtime and Erlang alternate)."""
    found: dict[str, dict[int, list[dict[str, Any]]]] = {RUNTIME: {}, ERLANG: {}}
    with tempfile.TemporaryDirectory(prefix="roboscale-erl-") as tmp:
        build = attempt("compile erl_idle.erl", lambda: compile_erlang(Path(tmp)), missing)
        for r in range(rounds):
            for n in counts:
                got = attempt(
                    f"{n:,} idle nodes, round {r + 1}", lambda n=n: idle_nodes(n), missing
                )
                if got is not None:
                    found[RUNTIME].setdefault(n, []).append(got)
                if build is not None:
                    erl = attempt(
                        f"{n:,} idle Erlang processes, round {r + 1}",
                        lambda n=n: erlang_idle(n, build),
                        missing,
                    )
                    if erl is not None:
                        found[ERLANG].setdefault(n, []).append(erl)
    return found


def spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def idle_rows(found: dict[str, dict[int, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    rows = []
    for n, runs in sorted(found[RUNTIME].items()):
        rss = spread([r["rss_bytes_per_node"] for r in runs])
        rows.append(
            {
                "system": RUNTIME,
                "count": n,
                "rounds": len(runs),
                "rss_B_median": rss["median"],
                "rss_B_min": rss["min"],
                "rss_B_max": rss["max"],
                "heap_B": statistics.median(r["heap_bytes_per_node"] for r in runs),
                "start_us": statistics.median(r["start_us_per_node"] for r in runs),
            }
        )
    for n, runs in sorted(found[ERLANG].items()):
        rss = spread([r["rss_bytes_per_process"] for r in runs])
        rows.append(
            {
                "system": f"{ERLANG} (OTP {runs[0]['otp_release']})",
                "count": n,
                "rounds": len(runs),
                "rss_B_median": rss["median"],
                "rss_B_min": rss["min"],
                "rss_B_max": rss["max"],
                "heap_B": statistics.median(r["vm_bytes_per_process"] for r in runs),
                "start_us": statistics.median(r["spawn_us_per_process"] for r in runs),
                "process_info_B": runs[0]["process_info_bytes"],
            }
        )
    return rows


def goals(
    found: dict[str, dict[int, list[dict[str, Any]]]], crowd: dict[int, dict[str, Any]]
) -> list[dict[str, Any]]:
    if GOAL_NODES not in found[RUNTIME] and GOAL_NODES not in crowd:
        why = f"not measured at {GOAL_NODES:,} nodes (--counts, --quick)"
        return [
            {"goal": f"{GOAL_NODES:,} nodes", "measured": why, "target": "-", "met": NOT_JUDGED}
        ]
    out: list[dict[str, Any]] = []
    ours, theirs = found[RUNTIME].get(GOAL_NODES, []), found[ERLANG].get(GOAL_NODES, [])
    goal = f"{GOAL_NODES:,} idle nodes: RSS per node / idle Erlang process's"
    if ours and theirs:
        ratios = [
            a["rss_bytes_per_node"] / b["rss_bytes_per_process"]
            for a, b in zip(ours, theirs, strict=False)
        ]
        pooled = statistics.median(a["rss_bytes_per_node"] for a in ours) / statistics.median(
            b["rss_bytes_per_process"] for b in theirs
        )
        # Each round measures every node: the sample a side is the nodes measured.
        nodes = (len(ours) * GOAL_NODES, len(theirs) * GOAL_NODES)
        line = judge.from_rounds(goal, pooled, ratios, judge.at_most(1), nodes)
        out.append({**line, "by_round": ", ".join(f"{r:.3f}" for r in ratios)})
    else:
        out.append(judge.not_measured(goal, "<= 1"))
    out += publishing_goals(crowd.get(GOAL_NODES))
    return out


def publishing_goals(run: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Every message due delivered, and no tick skipped: exact counts of one run."""
    delivered_goal = f"{GOAL_NODES:,} nodes at 1 Hz: messages delivered / due"
    ticks_goal = f"{GOAL_NODES:,} nodes at 1 Hz: ticks skipped (loop late)"
    if not run:
        return [judge.not_measured(delivered_goal, "= 1"), judge.not_measured(ticks_goal, "= 0")]
    sample = f"{run['due']:,} messages due over {GOAL_NODES:,} nodes, one run"
    delivered = run["delivered"] / run["due"] if run["due"] else None
    all_delivered = run["delivered"] == run["due"] == run["published"]
    missed = run["missed_ticks"]
    return [
        judge.exact(delivered_goal, delivered, "= 1", all_delivered, sample),
        judge.exact(ticks_goal, missed, "= 0", missed == 0, sample),
    ]


def parse_counts(text: str | None, quick: bool) -> list[int]:
    if not text:
        return QUICK_COUNTS if quick else COUNTS
    try:
        counts = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise UserError(
            f"--counts {text!r}: allowed a list of whole numbers, e.g. 1000,10000"
        ) from None
    if not counts or min(counts) < 1:
        raise UserError(f"--counts {text!r}: every count must be at least 1")
    return counts


def main() -> None:
    def counts_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--counts", help="node counts, default 1000,10000,100000")

    args, n = counted_args(__doc__ or "", FULL, QUICK, counts_option)
    counts = parse_counts(args.counts, args.quick)
    report = header()
    report["counts"] = {**n, "nodes": counts}
    report["load_average_start"] = os.getloadavg()
    missing: dict[str, str] = {}
    found = idle_rounds(counts, n["rounds"], missing)
    crowd: dict[int, dict[str, Any]] = {}
    for c in counts:
        got = attempt(
            f"{c:,} nodes at 1 Hz for {n['publish_s']} s",
            lambda c=c: publishing(c, n["publish_s"]),
            missing,
        )
        if got is not None:
            crowd[c] = got
    report["load_average_end"] = os.getloadavg()
    rows = idle_rows(found)
    print("\nidle: bytes per node (RSS growth while starting; median and range over rounds):")
    table(
        rows,
        IDLE_COLUMNS,
    )
    print("  heap_B: the runtime's Python heap (tracemalloc); Erlang's erlang:memory(processes)")
    print(f"\npublishing at 1 Hz, {n['publish_s']} messages per node (one run each):")
    crowd_rows = list(crowd.values())
    table(
        crowd_rows,
        CROWD_COLUMNS,
    )
    for what, why in missing.items():
        print(f"not available: {what}: {why}")
    report["raw"] = {
        "idle": {k: {str(c): v for c, v in by.items()} for k, by in found.items()},
        "publishing": {str(c): v for c, v in crowd.items()},
    }
    report["results"] = {"idle": rows, "publishing": crowd_rows, "not_available": missing}
    finish(report, goals(found, crowd), args, ["by_round"])


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted")
    except UserError as e:
        sys.exit(f"error: {e}")
