"""CPU quotas through cgroups: validation, and a real quota limiting a busy loop."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roboscale.env.cpu import CpuGroup, CpuLimit, cgroup_mode, parse_cpus, stale_group_dirs
from roboscale.errors import UserError

SPIN = "import time\nend = time.monotonic() + 1.5\nwhile time.monotonic() < end: pass"


def test_quota_and_cpus_are_validated() -> None:
    with pytest.raises(UserError, match="fraction of one core"):
        CpuLimit(quota=0)
    with pytest.raises(UserError, match="fraction of one core"):
        CpuLimit(quota=(os.cpu_count() or 1) + 1)
    with pytest.raises(UserError, match="do not exist"):
        CpuLimit(cpus="999")
    with pytest.raises(UserError, match="expected a list like"):
        parse_cpus("zero")
    assert parse_cpus("0") == [0]


def test_mode_follows_what_is_mounted(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    assert cgroup_mode(tmp_path) == "v2"
    (tmp_path / "cgroup.controllers").write_text("hugetlb\n")
    with pytest.raises(UserError, match="no cgroup CPU controller"):
        cgroup_mode(tmp_path)
    (tmp_path / "cpu").mkdir()
    (tmp_path / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")
    assert cgroup_mode(tmp_path) == "v1"


@pytest.mark.netns
def test_quota_limits_a_busy_loop(root: None) -> None:
    """A functional check: CPU time over wall time of a spinning process.

    The quota is an upper bound the kernel enforces per 100 ms period; the lower
    bound is loose because other work on a shared machine may take the core."""
    name = f"rs-test{os.getpid()}-h0"
    group = CpuGroup(name, CpuLimit(quota=0.25, cpus="0"))
    group.create()
    try:
        start = time.monotonic()
        proc = subprocess.Popen(["sh", "-c", f'{group.shell_attach()} && exec "$@"', "rs",
                                 sys.executable, "-c", SPIN])  # fmt: skip
        _, _, usage = os.wait4(proc.pid, 0)
        wall = time.monotonic() - start
        ratio = (usage.ru_utime + usage.ru_stime) / wall
        assert 0.10 < ratio <= 0.30, ratio
        assert 0.10 < group.usage_ns() / 1e9 / wall <= 0.30
    finally:
        group.remove()
    assert not [p for p in stale_group_dirs(name)]
