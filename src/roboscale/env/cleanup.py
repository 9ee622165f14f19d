"""Find and remove what emulated-host runs leave behind: namespaces, cgroups, markers.

Each run writes `/run/roboscale/<run>.json` (owner pid and its start time,
namespaces, cgroups, work folder) before it makes anything. A run whose owner is
gone (pid dead or reused) is stale; so is any `rs-` namespace or cgroup with no
marker at all.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Mapping
from pathlib import Path

from roboscale.env import netcmd
from roboscale.env.cpu import remove_group, stale_group_dirs

PREFIX = "rs-"
MARKER_DIR = Path("/run/roboscale")
KILL_GRACE_S = 2.0


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks: tells a live pid from a reused one."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _owner_alive(marker: Mapping[str, object]) -> bool:
    pid = marker.get("pid", 0)
    start = process_start(pid) if isinstance(pid, int) else None
    return start is not None and start == marker.get("start")


def kill_netns_processes(netns: str) -> None:
    out = netcmd.run(["ip", "netns", "pids", netns], check=False)
    pids = [int(p) for p in out.split()]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + KILL_GRACE_S
        while pids and time.monotonic() < deadline:
            pids = [p for p in pids if Path(f"/proc/{p}").exists() and not _is_zombie(p)]
            time.sleep(0.02)
        if not pids:
            return


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def remove_run(marker: Mapping[str, object]) -> None:
    """Kill processes in the run's namespaces, delete them and its cgroups and files (a
    marker's field of another type than the tool writes is left alone)."""
    existing = set(netcmd.netns_names())
    for netns in _names(marker.get("netns")):
        if netns in existing:
            kill_netns_processes(netns)
            netcmd.run(["ip", "netns", "del", netns], check=False)
    for group in _names(marker.get("cgroups")):
        remove_group(Path(group))
    workdir = marker.get("workdir")
    if isinstance(workdir, str) and workdir:
        for f in Path(workdir).glob("*"):
            f.unlink(missing_ok=True)
        with contextlib.suppress(OSError):
            Path(workdir).rmdir()


def cleanup_stale(marker_dir: Path = MARKER_DIR) -> list[str]:
    """Remove namespaces, cgroups and files of runs whose owner is dead; return their ids.

    A `rs-` namespace or cgroup with no marker at all is also stale: markers are
    written before anything is created.
    """
    netcmd.require_root()
    # Snapshot names before reading markers: a run starting meanwhile has written its
    # marker before making anything, so nothing listed here can lack a marker by a race.
    namespaces = netcmd.netns_names()
    groups = stale_group_dirs(PREFIX)
    removed: list[str] = []
    live: set[str] = set()
    for path in sorted(marker_dir.glob("*.json")) if marker_dir.is_dir() else []:
        try:
            marker = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        if _owner_alive(marker):
            live.add(path.stem)
            continue
        remove_run(marker)
        path.unlink(missing_ok=True)
        removed.append(path.stem)
    for netns in namespaces:
        run_id = _run_id_of(netns)
        if run_id is not None and run_id not in live:
            remove_run({"netns": [netns]})
            removed.append(run_id)
    for group in groups:
        run_id = _run_id_of(group.name)
        if run_id is not None and run_id not in live:
            remove_group(group)
            removed.append(run_id)
    return sorted(set(removed))


def _run_id_of(name: str) -> str | None:
    if not name.startswith(PREFIX):
        return None
    return name[len(PREFIX) :].rsplit("-", 1)[0]


def leftovers(run_id: str) -> list[str]:
    """Namespaces, cgroups and markers of run_id still present (for tests and checks)."""
    found = [n for n in netcmd.netns_names() if n.startswith(f"{PREFIX}{run_id}-")]
    found += [str(g) for g in stale_group_dirs(f"{PREFIX}{run_id}-")]
    found += [str(p) for p in MARKER_DIR.glob(f"{run_id}*")] if MARKER_DIR.is_dir() else []
    return found


def _names(value: object) -> list[str]:
    """A marker's list of names (namespaces, cgroups); nothing when it is not one."""
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
