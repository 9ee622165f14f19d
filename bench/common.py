"""Conventions every benchmark follows: print the command, the environment and the
raw figures, then a table; write everything as JSON with --json PATH."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

from roboscale import __version__
from roboscale.env.hostfacts import host_facts


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--json", type=Path, help="write command, environment, raw figures and results")
    p.add_argument("--check", action="store_true", help="exit 1 when a goal is missed")
    return p


def header() -> dict[str, Any]:
    env = {"roboscale": __version__, **host_facts()}
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print("environment: " + ", ".join(f"{k}={v}" for k, v in env.items()))
    return {"command": shlex.join(sys.argv), "environment": env, "started_unix_s": time.time()}


def table(rows: list[dict[str, Any]], columns: list[str]) -> None:
    widths = {c: max(len(c), *(len(_fmt(r.get(c))) for r in rows)) for c in columns}
    print("  ".join(c.ljust(widths[c]) for c in columns))
    for r in rows:
        print("  ".join(_fmt(r.get(c)).ljust(widths[c]) for c in columns))


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, bool):
        return "PASS" if v else "FAIL"
    return "-" if v is None else str(v)


def finish(report: dict[str, Any], goals: list[dict[str, Any]], args: argparse.Namespace) -> None:
    print("\ngoals:")
    table(goals, ["goal", "measured", "target", "met"])
    report["goals"] = goals
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\njson: {args.json}")
    if args.check and not all(g["met"] for g in goals):
        sys.exit(1)
