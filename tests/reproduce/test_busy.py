"""The busy mark counts other processes' CPU time, not the run's own: a real busy loop
started beside a short run shows up as other work, and the run's own child process,
however hard it works, does not.

No timing is asserted: the run's own work is a fixed amount of CPU time (not of wall
time), the busy loop's share is read from /proc, and every wait is an event with a
generous bound, so the tests hold on a loaded machine."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from roboscale.reproduce.busy import BUSY_CORES, CpuMeter, machine_busy_s, reap_ended_orphans
from roboscale.reproduce.model import OtherWork

OWN_CPU_S = 0.5  # CPU seconds the run's own child burns
BOUND_S = 60.0  # no wait below lasts longer
# /proc/stat counts in 10 ms ticks, sampled per tick, and getrusage in microseconds: the
# two can differ by a few ticks per core over a short window.
SLACK_S = 0.1

BURN = f"import time\nwhile time.process_time() < {OWN_CPU_S}:\n    pass\n"
SPIN = (
    "import sys, time\n"
    "start = time.monotonic()\n"
    "print('spinning', flush=True)\n"
    f"while time.monotonic() - start < {BOUND_S}:\n"
    "    pass\n"
)


def process_cpu_s(pid: int) -> float:
    """utime + stime of one live process, from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii")
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.fixture
def spinner() -> Iterator[subprocess.Popen[str]]:
    """A busy loop in a process this test starts but does not wait for until the
    measurement is over (so getrusage never counts it as the run's own)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", SPIN], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], BOUND_S)
        assert ready and proc.stdout.readline().strip() == "spinning"
        yield proc
    finally:
        proc.kill()
        proc.wait(timeout=BOUND_S)


def own_run() -> OtherWork:
    """A short run: a child that burns OWN_CPU_S of CPU, waited for inside the meter."""
    meter = CpuMeter().start()
    subprocess.run([sys.executable, "-c", BURN], check=True, timeout=BOUND_S)
    return meter.stop()


def test_a_busy_loop_beside_a_run_is_other_work(spinner: subprocess.Popen[str]) -> None:
    before = process_cpu_s(spinner.pid)
    other = own_run()
    spun = process_cpu_s(spinner.pid) - before
    assert spun > 0.05, f"the busy loop got no CPU ({spun:.3f} s)"
    assert other.own_cpu_s >= OWN_CPU_S
    assert other.other_cpu_s >= spun - SLACK_S, (other, spun)
    if spun / other.wall_s > BUSY_CORES + SLACK_S:
        assert other.other_cores > other.threshold_cores, (other, spun)


def test_the_runs_own_work_is_not_other_work() -> None:
    other = own_run()
    assert other.own_cpu_s >= OWN_CPU_S
    # The machine's count holds the run's own child: both sources saw the same work ...
    assert other.machine_cpu_s >= other.own_cpu_s - SLACK_S, other
    # ... and it is taken out: what is left is other processes' only.
    assert other.other_cpu_s <= max(0.0, other.machine_cpu_s - OWN_CPU_S) + 1e-9, other


def test_a_previous_runs_work_does_not_count_against_the_next() -> None:
    own_run()  # the previous run: its child is done and waited for
    spent_before = machine_busy_s()
    after = CpuMeter().start().stop()  # the next run, with nothing of its own
    assert after.own_cpu_s < SLACK_S
    assert after.other_cpu_s <= machine_busy_s() - spent_before + 1e-9


def test_the_first_line_of_proc_stat_is_checked(tmp_path: Path) -> None:
    bad = tmp_path / "stat"
    bad.write_text("intr 1 2 3\n", encoding="ascii")
    with pytest.raises(RuntimeError, match="unexpected first line"):
        machine_busy_s(bad)


ORPHAN_PARENT = (
    "import subprocess, sys\n"
    f"child = subprocess.Popen([sys.executable, '-c', {BURN!r}])\n"
    "print(child.pid, flush=True)\n"  # and end without waiting for it: it is orphaned
)


def zombie_child_of(pid: int, parent: int) -> bool:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] == "Z" and fields[1] == str(parent)


def test_an_orphaned_descendants_work_is_the_runs_own() -> None:
    """The attack on the mark: a run's process that ends before its own child (the Erlang
    VM killed under its port programs) used to hand that child to init, and the child's
    CPU time counted as other work. Made our orphan by the subreaper, it is the run's."""
    meter = CpuMeter().start()
    done = subprocess.run(
        [sys.executable, "-c", ORPHAN_PARENT], check=True, timeout=BOUND_S, capture_output=True
    )
    orphan = int(done.stdout.decode().split()[0])
    deadline = time.monotonic() + BOUND_S
    while not zombie_child_of(orphan, os.getpid()):  # it burns, ends, and waits for us
        assert time.monotonic() < deadline, "the orphan never came to this process"
        time.sleep(0.01)
    other = meter.stop()
    assert other.own_cpu_s >= OWN_CPU_S, other
    assert not Path(f"/proc/{orphan}").exists(), "the meter left the orphan unreaped"


def test_reaping_waits_only_for_ended_children(spinner: subprocess.Popen[str]) -> None:
    assert reap_ended_orphans() == 0
    assert spinner.poll() is None  # a live child is not touched
