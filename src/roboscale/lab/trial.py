"""One trial of any workload: its processes stage by stage (each READY before the next),
GO, DONE, STOP; then its raw files become record tables. The workload plans the nodes
and reads the files; this module only runs them."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from roboscale.backends.base import Backend, Infrastructure, NodeSetting
from roboscale.lab.envs import Placement, run_stages
from roboscale.lab.nodes import READY_GRACE_S
from roboscale.records.models import NodeHeader, ProcessTimes, Usage, WallClock
from roboscale.spec.planner import TrialPlan
from roboscale.workloads.base import (
    AgentConfig,
    NodePlan,
    NodeSpec,
    ProcessPlan,
    Workload,
    get_workload,
)


def _backend_config(
    backend: Backend, wl: Workload, t: TrialPlan, node: NodePlan, where: Placement, count: int
) -> dict[str, object]:
    """The backend's settings of one node: its address, whether it listens, whom it
    connects to (endpoint key -> address), for backends that connect nodes explicitly,
    and how many nodes the trial has (DDS sizes its participant indices by it)."""
    setting = NodeSetting(
        trial=t.trial,
        mode=t.mode,
        hosts=t.hosts,
        zenoh_routers=t.zenoh_routers,
        reliability=t.reliability,
        history=t.history,
        durability=t.durability,
        trial_nodes=count,
        node_address=where.addresses[node.host],
        listen=node.listens,
        links={str(k): where.addresses[wl.host_of(t, k)] for k in node.connects},
    )
    return backend.node_config(node.role, node.key, setting)


def agent_config(
    backend: Backend, t: TrialPlan, process: ProcessPlan, raw: Path, where: Placement, count: int
) -> AgentConfig:
    """One agent's configuration; `count` is the number of nodes in the whole trial."""
    wl = get_workload(t.workload)
    nodes = tuple(
        NodeSpec(
            name=n.name,
            role=n.role,
            output=str(raw / f"{n.name}.raw"),
            backend_config=_backend_config(backend, wl, t, n, where, count),
            program=n.program,
        )
        for n in process.nodes
    )
    return AgentConfig(
        backend=backend.name,
        workload=t.workload,
        name=process.name,
        role=process.role,
        host=where.names[process.host],
        host_index=process.host,
        nodes=nodes,
        # A process holding every node drains them all before DONE.
        close=wl.drive(t).close and len(nodes) == 1,
    )


def run_nodes(
    backend: Backend,
    infra: Infrastructure,
    t: TrialPlan,
    raw: Path,
    where: Placement | None = None,
) -> None:
    """Run every node of the trial to completion; any failure kills them all."""
    where = where or Placement()
    wl = get_workload(t.workload)
    processes = wl.processes(t, together=backend.placement == "pair")
    count = sum(len(process.nodes) for stage in processes for process in stage)
    stages = [
        [agent_config(backend, t, process, raw, where, count) for process in stage]
        for stage in processes
    ]
    ready_s = t.match_timeout_s + READY_GRACE_S
    run_stages(backend, infra, stages, raw, where, ready_s, wl.drive(t))


def collect(
    t: TrialPlan, raw: Path, where: Placement | None = None
) -> tuple[list[pa.Table], list[NodeHeader]]:
    """The trial's record tables and its nodes' headers (checked: a header that is not as
    agents write it is a ValueError, and fails the trial)."""
    return get_workload(t.workload).collect(t, raw, (where or Placement()).names)


def run_here(backend: Backend, t: TrialPlan, work: Path) -> tuple[list[pa.Table], list[NodeHeader]]:
    """One trial's nodes run on this machine as the lab runs them (the backend's
    infrastructure, the nodes, their records in `work`/raw), with no results folder and no
    summary: what the benchmarks and the backend tests look at."""
    infra = backend.start_infrastructure(work, Placement())
    raw = work / "raw"
    raw.mkdir()
    try:
        run_nodes(backend, infra, t, raw)
        return collect(t, raw)
    finally:
        infra.stop()


def _cpu_s(usage: ProcessTimes) -> float:
    return usage.cpu_user_s + usage.cpu_sys_s


def node_usage(nodes: list[NodeHeader]) -> Usage:
    """CPU and memory of the trial's processes; nodes sharing a process count it once."""
    procs = list({n.pid: n for n in nodes}.values())
    cpu = sum(_cpu_s(n.usage) for n in procs)
    after_ready = sum(_cpu_s(n.usage) - _cpu_s(n.usage_ready) for n in procs)
    return Usage(
        cpu_s_total=round(cpu, 4),
        cpu_s_after_ready=round(after_ready, 4),
        processes=len(procs),
        peak_rss_kb_max=max((n.usage.max_rss_kb for n in procs), default=0),
        malformed=sum(n.malformed for n in nodes),
        duplicates=sum(n.counters.duplicates for n in nodes),
    )


def wall_clock() -> WallClock:
    return WallClock(unix_s=time.time(), monotonic_ns=time.monotonic_ns())


PROC_STAT = Path("/proc/stat")


@dataclass(frozen=True)
class MachineCpu:
    """The whole machine's CPU time since boot, from /proc/stat's `cpu` line (seconds):
    `busy` in processes and kernel threads (user + nice + system), `steal` taken by the
    hypervisor from the virtual CPUs (0 on bare metal)."""

    at_s: float
    busy_s: float
    steal_s: float

    @classmethod
    def now(cls, stat: Path = PROC_STAT) -> MachineCpu | None:
        """None where /proc/stat is not Linux's (the facts are then not measured)."""
        try:
            first = stat.read_text(encoding="ascii").splitlines()[0].split()
            user, nice, system, steal = (int(first[i]) for i in (1, 2, 3, 8))
        except (OSError, UnicodeDecodeError, IndexError, ValueError):
            return None
        if first[0] != "cpu":
            return None
        tick = os.sysconf("SC_CLK_TCK")
        return cls(time.monotonic(), (user + nice + system) / tick, steal / tick)


def host_cpu(usage: Usage, before: MachineCpu | None, after: MachineCpu | None) -> Usage:
    """`usage` with what the machine did beside the trial between `before` and `after`:
    CPU outside the trial's processes (the machine's busy time less theirs; never below
    zero: /proc/stat ticks at 100 Hz) and steal."""
    if before is None or after is None or usage.cpu_s_total is None:
        return usage
    other = (after.busy_s - before.busy_s) - usage.cpu_s_total
    return usage.model_copy(
        update={
            "host_window_s": round(after.at_s - before.at_s, 3),
            "host_other_cpu_s": round(max(0.0, other), 2),
            "host_steal_s": round(after.steal_s - before.steal_s, 2),
        }
    )
