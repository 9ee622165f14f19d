"""CPU quota and core pinning per emulated host, through cgroups v2 or v1.

A quota is a fraction of one core (0.5 = half a core), enforced by the CFS
bandwidth controller: `cpu.max` on cgroup v2, `cpu.cfs_quota_us` /
`cpu.cfs_period_us` on v1. Pinning uses cpuset. On v1 the group is also made in
cpuacct so its CPU time can be read back. Groups are named `rs-<run>-h<i>` and
made below this process's own cgroup, so a later run can find stale ones.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from roboscale.errors import UserError

CGROUP_ROOT = Path("/sys/fs/cgroup")
PERIOD_US = 100_000


@dataclass(frozen=True)
class CpuLimit:
    """quota: fraction of one core (None = no quota); cpus: cpuset list like '0' or '0-1'."""

    quota: float | None = None
    cpus: str | None = None

    def __post_init__(self) -> None:
        cores = os.cpu_count() or 1
        if self.quota is not None and not 0.01 <= self.quota <= cores:
            raise UserError(
                f"cpu quota {self.quota!r} is out of range; allowed: a fraction of one core "
                f"from 0.01 to {cores} (this machine's cores), e.g. 1.0, 0.75, 0.5"
            )
        if self.cpus is not None:
            parse_cpus(self.cpus)


def parse_cpus(text: str) -> list[int]:
    """'0,2-3' -> [0, 2, 3]; every core must exist on this machine."""
    allowed = sorted(os.sched_getaffinity(0))
    out: list[int] = []
    try:
        for part in text.split(","):
            low, _, high = part.strip().partition("-")
            out.extend(range(int(low), int(high or low) + 1))
    except ValueError:
        raise UserError(f"cpus {text!r}: expected a list like '0' or '0-1' or '0,2'") from None
    bad = [c for c in out if c not in allowed]
    if not out or bad:
        raise UserError(f"cpus {text!r}: cores {bad or out} do not exist; allowed: {allowed}")
    return out


def _own_cgroup(controller: str) -> str:
    """This process's path within a v1 controller ('' for v2: the unified line)."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, names, path = line.split(":", 2)
        if controller in names.split(","):
            return path
    return "/"


def cgroup_mode(root: Path = CGROUP_ROOT) -> str:
    """'v2' when the unified hierarchy has the cpu controller, else 'v1' if mounted."""
    controllers = root / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return "v2"
    if (root / "cpu" / "cpu.cfs_quota_us").exists():
        return "v1"
    raise UserError(
        "no cgroup CPU controller found (neither cgroup v2 with 'cpu' nor v1 'cpu')",
        hint="mount cgroups, or run without cpu quotas",
    )


class CpuGroup:
    """One host's cgroup(s). create() is idempotent; remove() moves leftovers out."""

    def __init__(self, name: str, limit: CpuLimit, root: Path = CGROUP_ROOT) -> None:
        self.name = name
        self.limit = limit
        self.root = root
        self.mode = cgroup_mode(root)
        self.dirs = self._dirs()

    def _dirs(self) -> dict[str, Path]:
        if self.mode == "v2":
            own = _own_cgroup("")
            return {"v2": self.root / own.lstrip("/") / self.name}
        wanted = ["cpu", "cpuacct"] + (["cpuset"] if self.limit.cpus else [])
        return {c: self.root / c / _own_cgroup(c).lstrip("/") / self.name for c in wanted}

    def create(self) -> None:
        for controller, path in self.dirs.items():
            if controller == "v2":
                _enable_v2_controllers(path.parent, cpuset=self.limit.cpus is not None)
            path.mkdir(exist_ok=True)
            if controller == "cpuset":
                # v1 cpuset needs cpus and mems set before any task can join.
                (path / "cpuset.mems").write_text((path.parent / "cpuset.mems").read_text())
        self._apply()

    def _apply(self) -> None:
        quota = self.limit.quota
        if self.mode == "v2":
            path = self.dirs["v2"]
            value = "max" if quota is None else str(int(quota * PERIOD_US))
            (path / "cpu.max").write_text(f"{value} {PERIOD_US}")
            if self.limit.cpus:
                (path / "cpuset.cpus").write_text(self.limit.cpus)
            return
        cpu = self.dirs["cpu"]
        (cpu / "cpu.cfs_period_us").write_text(str(PERIOD_US))
        (cpu / "cpu.cfs_quota_us").write_text(
            "-1" if quota is None else str(int(quota * PERIOD_US))
        )
        if self.limit.cpus:
            (self.dirs["cpuset"] / "cpuset.cpus").write_text(self.limit.cpus)

    def procs_files(self) -> list[Path]:
        """Write a pid into each of these to place the process in this host's group."""
        return [p / "cgroup.procs" for p in self.dirs.values()]

    def attach(self, pid: int) -> None:
        for procs in self.procs_files():
            procs.write_text(str(pid))

    def shell_attach(self) -> str:
        """A shell snippet that moves the current shell ($$) into this group."""
        return " && ".join(f"echo $$ > {shlex.quote(str(p))}" for p in self.procs_files())

    def usage_ns(self) -> int:
        """CPU time used by all processes ever in this group."""
        if self.mode == "v2":
            for line in (self.dirs["v2"] / "cpu.stat").read_text().splitlines():
                if line.startswith("usage_usec"):
                    return int(line.split()[1]) * 1000
            return 0
        return int((self.dirs["cpuacct"] / "cpuacct.usage").read_text())

    def pids(self) -> list[int]:
        out: set[int] = set()
        for procs in self.procs_files():
            with contextlib.suppress(OSError):
                out.update(int(x) for x in procs.read_text().split())
        return sorted(out)

    def remove(self) -> None:
        for path in self.dirs.values():
            remove_group(path)

    def facts(self) -> dict[str, object]:
        return {"cgroup": self.mode, "quota": self.limit.quota, "cpus": self.limit.cpus}


def _enable_v2_controllers(parent: Path, *, cpuset: bool) -> None:
    wanted = ["+cpu"] + (["+cpuset"] if cpuset else [])
    control = parent / "cgroup.subtree_control"
    enabled = control.read_text().split()
    for item in wanted:
        if item[1:] not in enabled:
            control.write_text(item)


def remove_group(path: Path, timeout_s: float = 2.0) -> None:
    """Move any process left in the group to its parent, then remove it."""
    if not path.exists():
        return
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(OSError):
            for pid in (path / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    (path.parent / "cgroup.procs").write_text(pid)
        try:
            path.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as e:
            if time.monotonic() > deadline:
                raise UserError(f"cannot remove cgroup {path}: {e}") from None
            time.sleep(0.05)


def stale_group_dirs(prefix: str = "rs-", root: Path = CGROUP_ROOT) -> list[Path]:
    """Every cgroup directory named prefix* below this process's groups."""
    try:
        mode = cgroup_mode(root)
    except UserError:
        return []
    if mode == "v2":
        bases = [root / _own_cgroup("").lstrip("/")]
    else:
        bases = [root / c / _own_cgroup(c).lstrip("/") for c in ("cpu", "cpuacct", "cpuset")]
    return [p for base in bases if base.is_dir() for p in base.glob(f"{prefix}*") if p.is_dir()]
