"""CPU and memory of a process from /proc (Linux). Stdlib only."""

from __future__ import annotations

import os
from pathlib import Path

from roboscale.facetrack.records import ProcessUsage

_TICKS = os.sysconf("SC_CLK_TCK")


def process_usage(pid: int, role: str, workers: int) -> ProcessUsage | None:
    """CPU seconds (user + system), RSS and PSS of a live process; None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    cpu_s = (int(stat[11]) + int(stat[12])) / _TICKS  # utime, stime (fields 14, 15)
    kb = {}
    for line in rollup.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("Rss:", "Pss:"):
            kb[parts[0]] = int(parts[1])
    return ProcessUsage(
        role, pid, workers, cpu_s, kb.get("Rss:", 0) * 1024, kb.get("Pss:", 0) * 1024
    )


def usage_of(pids: list[tuple[int, str, int]]) -> list[ProcessUsage]:
    """(pid, role, workers) of every process of a stack → their usage, skipping gone ones."""
    found = (process_usage(pid, role, workers) for pid, role, workers in pids)
    return [u for u in found if u is not None]
