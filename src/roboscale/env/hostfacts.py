"""Facts about the machine a trial ran on, stored in every trial's metadata."""

from __future__ import annotations

import os
import platform
import socket
from pathlib import Path

from roboscale.eventloop import loop_kind


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _mem_total_kb() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def _cpu_quota() -> str:
    """The cgroup CPU limit of this process, if any ('max' means none)."""
    for path in ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
        try:
            return Path(path).read_text().strip()
        except OSError:
            continue
    return "unknown"


def host_facts() -> dict[str, object]:
    return {
        "hostname": socket.gethostname(),
        "cpu_model": _cpu_model(),
        "cores": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)),
        "mem_total_kb": _mem_total_kb(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "cpu_quota": _cpu_quota(),
        "link_profile": "loopback",
        "event_loop": loop_kind(),  # of the native runtime: uvloop or asyncio
    }
