"""What the machine did beside a trial: CPU outside its processes, and steal, from
/proc/stat's `cpu` line (a file written here; the real one on Linux)."""

from __future__ import annotations

import os
from pathlib import Path

from roboscale.lab.trial import MachineCpu, host_cpu
from roboscale.records.models import Usage

TICK = os.sysconf("SC_CLK_TCK")


def stat_file(path: Path, user: int, nice: int, system: int, steal: int) -> Path:
    path.write_text(
        f"cpu  {user} {nice} {system} 900000 12 0 30 {steal} 0 0\n"
        "cpu0 1 2 3 4 5 6 7 8 9 10\nintr 12345 0 0\n"
    )
    return path


def test_busy_and_steal_are_read_in_seconds(tmp_path: Path) -> None:
    cpu = MachineCpu.now(stat_file(tmp_path / "stat", 700, 50, 250, 40))
    assert cpu is not None
    assert cpu.busy_s == 1000 / TICK and cpu.steal_s == 40 / TICK


def test_other_work_is_the_machine_less_the_trials_processes(tmp_path: Path) -> None:
    before = MachineCpu(at_s=10.0, busy_s=100.0, steal_s=2.0)
    after = MachineCpu(at_s=16.0, busy_s=108.5, steal_s=2.25)
    usage = host_cpu(Usage(cpu_s_total=5.0), before, after)
    assert usage.host_window_s == 6.0
    assert usage.host_other_cpu_s == 3.5 and usage.host_steal_s == 0.25
    # /proc/stat ticks at 100 Hz: the trial's own CPU can read a tick above the machine's
    tight = host_cpu(Usage(cpu_s_total=8.6), before, after)
    assert tight.host_other_cpu_s == 0.0


def test_nothing_is_claimed_where_nothing_was_measured(tmp_path: Path) -> None:
    assert MachineCpu.now(tmp_path / "missing") is None
    (tmp_path / "odd").write_text("not a stat file\n")
    assert MachineCpu.now(tmp_path / "odd") is None
    usage = Usage(cpu_s_total=1.0)
    assert host_cpu(usage, None, MachineCpu(at_s=1.0, busy_s=1.0, steal_s=0.0)) == usage
    assert MachineCpu.now() is not None  # this Linux machine's own /proc/stat
