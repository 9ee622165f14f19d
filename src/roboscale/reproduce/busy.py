"""Whether other work ran beside a run: the CPU time the whole machine spent on processes
during the run, less the run's own.

The load average cannot say this: it counts the run's own processes, so the second of
two back-to-back runs looked busy from the first one's load. Here the machine's busy time
is the `user + nice + system` jiffies of /proc/stat's `cpu` line (guest time is inside
user; idle, iowait, interrupts and steal are no process's), and the run's own is
`getrusage` of this process and of its children (RUSAGE_SELF + RUSAGE_CHILDREN: every
descendant that was waited for, which the lab does for every process it starts before a
sweep returns). What is left ran in other processes: another helper's build, a CI run.

A descendant whose parent dies first is orphaned: without care the kernel hands it to
init, which waits for it, and its CPU time was lost to the run and counted as other work
(the Erlang stack's port programs, left when the VM is killed, marked every run of the
paper's restart experiments busy on an idle machine). So the meter makes this process a
child subreaper for the run (PR_SET_CHILD_SUBREAPER): orphans come to it, and at the
run's end it waits for those that have ended, which adds their time to RUSAGE_CHILDREN.

Limits, stated where the mark is printed: a descendant still running when the run ends
(a daemon such as Erlang's epmd) counts as other work, and so does kernel time spent in
the run's own system calls that the kernel charges to softirq rather than to the process.
"""

from __future__ import annotations

import contextlib
import ctypes
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
PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
PROC = Path("/proc")


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


def set_child_subreaper(on: bool) -> bool:
    """Make this process (or stop it being) the reaper of its orphaned descendants."""
    libc = ctypes.CDLL(None, use_errno=True)
    return int(libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0)) == 0


def reap_ended_orphans(proc: Path = PROC) -> int:
    """Wait for every child of this process that has ended and that nobody waits for;
    how many. Called when the run's own processes have all been waited for, so the only
    zombie children left are orphans handed to this process as subreaper."""
    me, reaped = os.getpid(), 0
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            after_name = (entry / "stat").read_text(encoding="ascii").rsplit(")", 1)[1]
        except (OSError, UnicodeDecodeError, IndexError):
            continue  # gone meanwhile, or not a process's stat
        fields = after_name.split()
        if len(fields) > 1 and fields[0] == "Z" and fields[1] == str(me):
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(int(entry.name), os.WNOHANG)[0]:
                    reaped += 1
    return reaped


@dataclass
class CpuMeter:
    """Measures other work between start() and stop(); one meter per run."""

    threshold_cores: float = BUSY_CORES
    _wall: float = 0.0
    _machine: float = 0.0
    _own: float = 0.0

    def start(self) -> CpuMeter:
        set_child_subreaper(True)
        reap_ended_orphans()  # an earlier run's, so that their time is not counted here
        self._wall, self._machine, self._own = time.monotonic(), machine_busy_s(), own_cpu_s()
        return self

    def stop(self) -> OtherWork:
        reap_ended_orphans()
        set_child_subreaper(False)
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
