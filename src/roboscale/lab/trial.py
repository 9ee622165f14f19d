"""One trial: start echoers, then senders, say GO, collect raw files into records."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from roboscale.backends.base import Backend, Infrastructure
from roboscale.lab.envs import AgentProtocol, Placement, run_stages
from roboscale.lab.flows import collect_flow, run_flow_nodes
from roboscale.lab.nodes import READY_GRACE_S
from roboscale.records.raw import read_raw
from roboscale.records.store import records_table
from roboscale.spec.planner import TrialPlan


def _echo_config(t: TrialPlan, pair: int) -> dict[str, Any]:
    prefix = f"t{t.index:04d}"
    return {
        "pair": pair,
        "topic_out": f"/{prefix}/chatter_m_{pair}",
        "topic_back": f"/{prefix}/chatter_s_{pair}",
        **t.stream_settings(),
    }


def _node_config(
    backend: Backend, t: TrialPlan, role: str, pair: int, raw: Path, where: Placement
) -> dict[str, Any]:
    name = f"{role}_{pair}_t{t.index:04d}"
    addresses = {r: where.addresses[t.host_of(r, pair)] for r in ("sender", "echoer")}
    trial = {**t.params(), "sender_address": addresses["sender"]}
    trial["echoer_address"] = addresses["echoer"]
    return {
        "backend": backend.name,
        "role": role,
        "name": name,
        "host": where.names[t.host_of(role, pair)],
        "host_index": t.host_of(role, pair),
        "node_config": backend.node_config(role, pair, trial),
        "echo": _echo_config(t, pair),
        "output": str(raw / f"{name}.raw"),
    }


def _agent_config(
    backend: Backend, t: TrialPlan, role: str, pair: int, raw: Path, where: Placement
) -> dict[str, Any]:
    if role == "pair":
        return _pair_config(backend, t, pair, raw, where)
    return _node_config(backend, t, role, pair, raw, where)


def _pair_config(
    backend: Backend, t: TrialPlan, pair: int, raw: Path, where: Placement
) -> dict[str, Any]:
    """One agent running both nodes of a pair (placement "pair"), on the sender's host."""
    per_role = {r: _node_config(backend, t, r, pair, raw, where) for r in ("echoer", "sender")}
    return {
        **per_role["sender"],
        "role": "pair",
        "name": f"pair_{pair}_t{t.index:04d}",
        "names": {r: c["name"] for r, c in per_role.items()},
        "outputs": {r: c["output"] for r, c in per_role.items()},
    }


def run_nodes(
    backend: Backend,
    infra: Infrastructure,
    t: TrialPlan,
    raw: Path,
    where: Placement | None = None,
) -> None:
    """Run every node of the trial to completion; any failure kills them all."""
    where = where or Placement()
    if t.workload != "echo":
        run_flow_nodes(backend, infra, t, raw, where)
        return
    roles = ["pair"] if backend.placement == "pair" else ["echoer", "sender"]
    stages = [[_agent_config(backend, t, r, p, raw, where) for p in range(t.pairs)] for r in roles]
    protocol = AgentProtocol(
        pacers=("sender", "pair"),
        stopped=("echoer",),
        done_timeout_s=t.intended_duration_s * 3 + t.drain_s + 30,
        stop_timeout_s=30,
    )
    run_stages(backend, infra, stages, raw, where, t.match_timeout_s + READY_GRACE_S, protocol)


def collect(
    t: TrialPlan, raw: Path, where: Placement | None = None
) -> tuple[list[pa.Table], list[dict[str, Any]]]:
    """Join each sender's rows with its echoer's arrival times into record tables."""
    if t.workload != "echo":
        return collect_flow(t, raw, where or Placement())
    names = (where or Placement()).names
    tables, nodes = [], []
    for pair in range(t.pairs):
        s_head, s_cols = read_raw(raw / f"sender_{pair}_t{t.index:04d}.raw")
        e_head, e_cols = read_raw(raw / f"echoer_{pair}_t{t.index:04d}.raw")
        cols = {k: np.frombuffer(v, dtype=np.int64) for k, v in s_cols.items()}
        cols["t_echoed"] = np.frombuffer(e_cols["t_echoed"], dtype=np.int64)
        host = names[t.host_of("sender", pair)]
        tables.append(records_table(t.trial, s_head["node"], host, t.payload_bytes, cols))
        nodes += [s_head, e_head]
    return tables, nodes


def _cpu_s(usage: dict[str, float]) -> float:
    return usage["cpu_user_s"] + usage["cpu_sys_s"]


def node_usage(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """CPU and memory of the trial's processes; nodes sharing a process count it once."""
    procs = list({n["pid"]: n for n in nodes}.values())
    cpu = sum(_cpu_s(n["usage"]) for n in procs)
    after_ready = sum(_cpu_s(n["usage"]) - _cpu_s(n["usage_ready"]) for n in procs)
    return {
        "cpu_s_total": round(cpu, 4),
        "cpu_s_after_ready": round(after_ready, 4),
        "processes": len(procs),
        "peak_rss_kb_max": max((n["usage"]["max_rss_kb"] for n in procs), default=0),
        "malformed": sum(int(n.get("malformed", 0)) for n in nodes),
        "duplicates": sum(int(n["counters"]["duplicates"]) for n in nodes),
    }


def wall_clock() -> dict[str, Any]:
    return {"unix_s": time.time(), "monotonic_ns": time.monotonic_ns()}
