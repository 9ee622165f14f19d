"""Whether other work ran beside a run: the CPU time the whole machine spent on processes
during the run, less the run's own.

The load average cannot say this: it counts the run's own processes, so the second of
two back-to-back runs looked busy from the first one's load. Here the machine's busy time
is the `user + nice + system` jiffies of /proc/stat's `cpu` line (guest time is inside
user; idle, iowait, interrupts and steal are no process's), and the run's own is
`getrusage` of this process and of its children (RUSAGE_SELF + RUSAGE_CHILDREN: every
descendant that was waited for, which the lab does for every process it starts before a
sweep returns). What is left ran in other processes: another helper's build, a CI run.

Limits, stated where the mark is printed: a descendant that is never waited for (a
daemon such as Erlang's epmd) counts as other work, and so does kernel time spent in the
run's own system calls that the kernel charges to softirq rather than to the process.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass
from pathlib import Path

from roboscale.reproduce.model import OtherWork

PROC_STAT = Path("/proc/stat")
# Other work above a quarter of one core's time, averaged over the run, marks it busy: on
# this 2-core machine that is an eighth of everything, enough to move a latency tail.
BUSY_CORES = 0.25


def machine_busy_s(stat: Path = PROC_STAT) -> float:
    """Seconds of CPU the machine has spent in processes since boot (all cores)."""
    first = stat.read_text(encoding="ascii").splitlines()[0].split()
    if first[0] != "cpu" or len(first) < 4:
        raise RuntimeError(f"{stat}: unexpected first line {' '.join(first[:3])!r}")
    user, nice, system = (int(x) for x in first[1:4])
    return (user + nice + system) / os.sysconf("SC_CLK_TCK")


def own_cpu_s() -> float:
    """CPU seconds of this process and of every child it has waited for."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


@dataclass
class CpuMeter:
    """Measures other work between start() and stop(); one meter per run."""

    threshold_cores: float = BUSY_CORES
    _wall: float = 0.0
    _machine: float = 0.0
    _own: float = 0.0

    def start(self) -> CpuMeter:
        self._wall, self._machine, self._own = time.monotonic(), machine_busy_s(), own_cpu_s()
        return self

    def stop(self) -> OtherWork:
        wall = max(time.monotonic() - self._wall, 1e-6)
        machine = machine_busy_s() - self._machine
        own = own_cpu_s() - self._own
        # Jiffies tick at 100 Hz and rusage in microseconds: a short run can show the own
        # time a tick above the machine's; other work is never below zero.
        other = max(0.0, machine - own)
        return OtherWork(
            wall_s=wall,
            machine_cpu_s=machine,
            own_cpu_s=own,
            other_cpu_s=other,
            other_cores=other / wall,
            threshold_cores=self.threshold_cores,
        )
