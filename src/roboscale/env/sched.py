"""Real-time priority and core pinning for a node process, as the lab report's Q5 varied
them ("real-time property"): the wrapper sets them on itself and then execs the node,
which keeps them with every thread it starts (Linux threads inherit their creator's
policy and affinity).

    python -m roboscale.env.sched --fifo 10 --cpus 0 -- python3 -m roboscale.workloads.agent CFG

Standard library only: it runs in front of any interpreter, on any emulated host.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys

from roboscale.errors import UserError

FIFO_PRIORITY = 10  # above every normal task, far below the kernel's own RT threads
PRIORITIES = ("normal", "fifo")


def parse_cpus(text: str) -> set[int]:
    """'0,2-3' -> {0, 2, 3}; every core must be one this process may use."""
    allowed = os.sched_getaffinity(0)
    cores: set[int] = set()
    try:
        for part in text.split(","):
            low, _, high = part.strip().partition("-")
            cores.update(range(int(low), int(high or low) + 1))
    except ValueError:
        raise UserError(f"pin {text!r}: allowed: cores like '0', '0-1' or '0,2'") from None
    if not cores or not cores <= allowed:
        raise UserError(
            f"pin {text!r}: cores {sorted(cores - allowed) or text} do not exist here; "
            f"allowed: {sorted(allowed)}"
        )
    return cores


def prefix(priority: str, pin: str | None) -> list[str]:
    """The argv that runs a command under the priority and on the cores ([] for neither)."""
    if priority == "normal" and pin is None:
        return []
    argv = [sys.executable, "-m", "roboscale.env.sched"]
    if priority == "fifo":
        argv += ["--fifo", str(FIFO_PRIORITY)]
    if pin is not None:
        argv += ["--cpus", pin]
    return [*argv, "--"]


@functools.cache  # one real start per setting, however many trials ask
def check(priority: str, pin: str | None) -> None:
    """Refuse, before a trial runs, what this machine will not grant: SCHED_FIFO needs
    root (CAP_SYS_NICE) and a kernel that lets this process's cgroup run real-time tasks;
    the cores must exist. A real start of the wrapper is the check."""
    if priority not in PRIORITIES:
        raise UserError(f"priority {priority!r}; allowed: {', '.join(PRIORITIES)}")
    if pin is not None:
        parse_cpus(pin)
    if priority == "fifo" and os.geteuid() != 0:
        raise UserError(
            "priority fifo (SCHED_FIFO) needs root; allowed without root: priority normal",
            hint="run with sudo, or drop the priority axis",
        )
    argv = prefix(priority, pin)
    if not argv:
        return
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [*argv, sys.executable, "-c", ""], capture_output=True, text=True, env=env
    )
    if done.returncode != 0:
        why = done.stderr.strip().splitlines()[-1:] or ["no reason given"]
        raise UserError(f"priority {priority}, pin {pin}: this machine refuses it: {why[0]}")


def apply(fifo: int | None, cpus: str | None) -> None:
    if cpus is not None:
        os.sched_setaffinity(0, parse_cpus(cpus))
    if fifo is not None:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(fifo))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="roboscale.env.sched")
    parser.add_argument("--fifo", type=int, help="SCHED_FIFO at this priority (1-99)")
    parser.add_argument("--cpus", help="run on these cores only: '0', '0-1', '0,2'")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    a = parser.parse_args(argv)
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        parser.error("a command to run is required after --")
    try:
        apply(a.fifo, a.cpus)
    except (OSError, UserError) as e:
        print(f"roboscale.env.sched: {e}", file=sys.stderr)
        return 2
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
