"""Conventions every benchmark follows: print the command, the environment and the
raw figures, then a table; write everything as JSON with --json PATH."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roboscale import __version__, lifeline
from roboscale.backends.roslaunch import stop_group  # noqa: F401  (the benchmarks' import)
from roboscale.env.hostfacts import host_facts
from roboscale.errors import UserError

NOT_JUDGED = "not judged"  # goals.NOT_JUDGED (common stands below goals)


def parser(description: str, judged: bool = True) -> argparse.ArgumentParser:
    """The common options; `judged=False` for a diagnosis, whose --check does nothing."""
    # Every benchmark starts children (zygotes, routers, baselines in sessions of their
    # own): with a lifeline from the start, they all end with it, even on SIGKILL.
    lifeline.ensure()
    # Raw: a docstring's lists and its example command lines stay as written.
    p = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--json", type=Path, help="write command, environment, raw figures and results")
    check = "exit 1 when a goal is missed" if judged else "accepted; a diagnosis judges nothing"
    p.add_argument("--check", action="store_true", help=check)
    return p


def header() -> dict[str, Any]:
    env = {"roboscale": __version__, **host_facts()}
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    return {"command": shlex.join(sys.argv), "environment": env, "started_unix_s": time.time()}


def table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = {c: max([len(c), *(len(_fmt(r.get(c))) for r in rows)]) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(widths[c]) for c in columns))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, bool):
        return "PASS" if v else "FAIL"
    return "-" if v is None else str(v)


def _precise(v: Any) -> Any:
    return f"{v:.6g}" if isinstance(v, float) else v


def finish(
    report: dict[str, Any],
    goals: list[dict[str, Any]],
    args: argparse.Namespace,
    extra: list[str] | None = None,
) -> None:
    """Print the goals as bench/goals.py judged them (with `extra` columns of theirs),
    write the report, and with --check exit 1 when a goal failed."""
    print("\ngoals:")
    # Six significant digits: a figure just past its target must not print as the
    # target itself ("1.5 <= 1.5 FAIL" for 1.50045).
    rows = [
        {**g, "measured": _precise(g.get("measured")), "interval": g.get("interval_text", "-")}
        for g in goals
    ]
    columns = ["goal", "measured", "interval", "target", "met", "sample", "why"]
    table(rows, [*columns, *(extra or [])])
    report["goals"] = goals
    if args.json:
        save(report, args.json)
        print(f"\njson: {args.json}")
    # A goal not judged (too little data to decide) fails nothing, and passes nothing.
    if args.check and any(g["met"] is not True and g["met"] != NOT_JUDGED for g in goals):
        sys.exit(1)


def save(report: dict[str, Any], path: Path) -> None:
    """Write the report as JSON, replacing the file whole (a reader never sees half)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    os.replace(tmp, path)


def counted_args(
    description: str,
    full: dict[str, int],
    quick: dict[str, int],
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
    judged: bool = True,
) -> tuple[argparse.Namespace, dict[str, int]]:
    """Arguments with --quick and one --COUNT per measured count (and those `extra`
    adds); the counts chosen."""
    p = parser(description, judged)
    if extra is not None:
        extra(p)
    p.add_argument("--quick", action="store_true", help="small counts, well under a minute")
    for name in full:
        p.add_argument(f"--{name.replace('_', '-')}", type=int, help=f"default {full[name]}")
    args = p.parse_args()
    counts = {k: getattr(args, k) or (quick if args.quick else full)[k] for k in full}
    return args, counts


def attempt(what: str, fn: Callable[[], Any], missing: dict[str, str]) -> Any:
    """Run one measurement; a missing dependency or a failure is reported, never faked,
    and the measurements already made are kept."""
    print(f"measuring: {what} ...", flush=True)
    try:
        return fn()
    except (UserError, ImportError, subprocess.SubprocessError) as e:
        missing[what] = str(e)
    except Exception as e:  # a failed measurement must not lose the others
        missing[what] = f"failed: {type(e).__name__}: {e}"
    print(f"  not available: {missing[what]}", flush=True)
    return None


def wait_for(condition: Callable[[], object], timeout_s: float) -> bool:
    """Poll `condition` until it holds (True) or `timeout_s` passed (False)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return bool(condition())
