"""Restart time of a killed face-tracker worker on ROS 1 and Erlang/OTP (the paper's
Table 5), side by side in one run.

Each stack runs --workers workers (the paper: 100); a seeded random worker is killed,
by SIGTERM and by SIGKILL (ros1: the signal to the worker's process; erlang:
exit(Pid, shutdown) and exit(Pid, kill)), and the next kill waits until it is back, so
every restart is timed alone. Two figures per kill:
- started: until the replacement begins (ros1: the respawned process's first line;
  erlang: the new face_server's init/1, timed inside Erlang): the paper's figure;
- ready: until the replacement can detect (ros1: registered, its frame and result topics
  connected; erlang: its Python port program has loaded OpenCV).
The paper: ROS 291-420 ms, Erlang 0.22-0.37 ms (1,000-1,500x faster).

    .venv/bin/python bench/facetrack_restart.py [--quick] [--kills 20] [--workers 10]
                                                [--json PATH] [--check]
"""

from __future__ import annotations

import random
import statistics
import tempfile
from pathlib import Path
from typing import Any

import goals as judge
from common import attempt, counted_args, finish, header, table
from roboscale.errors import UserError
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.stack import get_stack
from roboscale.facetrack.stacks.external import ExternalTracker

STACKS = ("ros1", "erlang")
METHODS = ("sigterm", "sigkill")
RESTART_WAIT_S = 60.0
PAPER_MS = {"ros1": "291-420", "erlang": "0.224-0.368"}


def restarts(stack: str, workers: int, kills: int, work: Path) -> dict[str, Any]:
    """Kill `kills` times per method, one at a time; the started and ready times (ms)."""
    tracker = get_stack(stack).start(TrackerConfig(workers=workers), work / stack)
    try:
        if not isinstance(tracker, ExternalTracker):
            raise UserError(f"stack {stack} cannot be timed kill by kill here")
        rng = random.Random(4)
        for method in METHODS:
            for _ in range(kills):
                tracker.kill(rng.randrange(workers), method)
                if not tracker.wait_restarted(RESTART_WAIT_S):
                    raise UserError(f"{stack}: a worker not back within {RESTART_WAIT_S:g} s")
        samples: dict[str, Any] = {}
        for method in METHODS:
            done = [k for k in tracker.kills if k.method == method]
            samples[method] = {
                "started_ms": [(k.initialized_ns or 0) / 1e6 - k.kill_ns / 1e6 for k in done],
                "ready_ms": [(k.restarted_ns or 0) / 1e6 - k.kill_ns / 1e6 for k in done],
            }
        return samples
    finally:
        tracker.stop()


def rows_of(stack: str, samples: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for method, got in samples.items():
        started, ready = sorted(got["started_ms"]), sorted(got["ready_ms"])
        rows.append({
            "stack": stack, "method": method, "kills": len(started),
            "started_p50_ms": statistics.median(started), "started_max_ms": started[-1],
            "ready_p50_ms": statistics.median(ready), "ready_max_ms": ready[-1],
            "paper_ms": PAPER_MS[stack],
        })  # fmt: skip
    return rows


def main() -> None:
    args, counts = counted_args(
        __doc__ or "", {"kills": 20, "workers": 10}, {"kills": 5, "workers": 4}
    )
    report = header()
    missing: dict[str, str] = {}
    raw: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="roboscale-ft-restart-") as tmp:
        for stack in STACKS:
            got = attempt(
                f"{stack}: {counts['kills']} kills per signal at {counts['workers']} workers",
                lambda s=stack: restarts(s, counts["workers"], counts["kills"], Path(tmp)),
                missing,
            )
            if got is not None:
                raw[stack] = got
    rows = [row for stack, got in raw.items() for row in rows_of(stack, got)]
    print("\nrestart of a killed worker, kill until started / ready (ms):")
    table(rows, ["stack", "method", "kills", "started_p50_ms", "started_max_ms",
                 "ready_p50_ms", "ready_max_ms", "paper_ms"])  # fmt: skip
    report["raw"] = raw
    report["results"] = rows
    report["not_available"] = missing
    goals = []
    for method in METHODS:
        goal = f"{method}: started p50, ros1 / erlang (paper: 1,000-1,500x)"
        target = judge.at_least(1000, ">= 1000x")
        ros, erl = raw.get("ros1", {}).get(method), raw.get("erlang", {}).get(method)
        goals.append(
            judge.latency_ratio(goal, ros["started_ms"], erl["started_ms"], target)
            if ros and erl
            else judge.not_measured(goal, target)
        )
    finish(report, goals, args)


if __name__ == "__main__":
    main()
