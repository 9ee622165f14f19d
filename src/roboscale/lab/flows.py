"""One trial of a one-way workload (fanout, ping, chain): measuring nodes first, then the
publisher; their raw files become one row set per measuring node.

Rows of measuring node k: `seq`, `t_intended` and `t_sent` from the publisher,
`t_echoed` = arrival at node k, `t_received` = node k's ack back at the
publisher (null without `ack`). In a chain, node k is hop k, so a hop's latency
is the difference of consecutive nodes' arrivals.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from roboscale.backends.base import Backend, Infrastructure
from roboscale.lab.envs import AgentProtocol, Placement, run_stages
from roboscale.lab.nodes import READY_GRACE_S
from roboscale.records.raw import read_raw
from roboscale.records.store import records_table
from roboscale.spec.planner import TrialPlan


def node_name(t: TrialPlan, node: int) -> str:
    """Names sort in flow order, so analysis finds hop k after hop k-1."""
    if node == 0:
        return f"source_t{t.index:04d}"
    role = "hop" if t.workload == "chain" else "listener"
    return f"{role}{node:02d}_t{t.index:04d}"


def _topics(t: TrialPlan, node: int) -> tuple[str, str]:
    """(topic read, topic written) of a node; chain hop k reads hop_k, writes hop_k+1."""
    prefix = f"/t{t.index:04d}"
    if t.workload != "chain":
        return ("", f"{prefix}/flow") if node == 0 else (f"{prefix}/flow", "")
    last = node == t.measured_nodes
    return (
        f"{prefix}/hop_{node}" if node else "",
        "" if last else f"{prefix}/hop_{node + 1}",
    )


def flow_config(t: TrialPlan, node: int) -> dict[str, Any]:
    topic_in, topic_out = _topics(t, node)
    return {
        "workload": t.workload,
        "node": node,
        "nodes": t.measured_nodes,
        "topic_in": topic_in,
        "topic_out": topic_out,
        "topic_ack": f"/t{t.index:04d}/ack",
        **t.stream_settings(),
        "ack": t.ack,
    }


def _links(t: TrialPlan, node: int, where: Placement) -> dict[str, str]:
    """Whom a node connects to (for backends with explicit endpoints): the publisher to
    every measuring node, a chain hop also to the hop before it."""
    if node == 0:
        targets = list(range(1, t.measured_nodes + 1))
    else:
        targets = [node - 1] if t.workload == "chain" and node > 1 else []
    return {str(k): where.addresses[t.flow_host(k)] for k in targets}


def node_config(
    backend: Backend, t: TrialPlan, node: int, raw: Path, where: Placement
) -> dict[str, Any]:
    name = node_name(t, node)
    role = "source" if node == 0 else "sink"
    host = t.flow_host(node)
    trial = {**t.params(), "flow_links": _links(t, node, where)}
    trial["flow_address"] = where.addresses[host]
    return {
        "backend": backend.name,
        "workload": t.workload,
        "role": role,
        "name": name,
        "host": where.names[host],
        "host_index": host,
        "node_config": backend.node_config(role, node, trial),
        "flow": flow_config(t, node),
        "output": str(raw / f"{name}.raw"),
    }


def _group_config(backend: Backend, t: TrialPlan, raw: Path, where: Placement) -> dict[str, Any]:
    """Every node in one agent (placement "pair": in-process delivery), publisher last."""
    order = [*range(1, t.measured_nodes + 1), 0]
    members = [node_config(backend, t, k, raw, where) for k in order]
    return {**members[-1], "role": "group", "name": f"group_t{t.index:04d}", "members": members}


def run_flow_nodes(
    backend: Backend, infra: Infrastructure, t: TrialPlan, raw: Path, where: Placement
) -> None:
    """Run every node of the trial to completion; any failure kills them all."""
    if backend.placement == "pair":
        stages = [[_group_config(backend, t, raw, where)]]
    else:
        sinks = [node_config(backend, t, k, raw, where) for k in range(1, t.measured_nodes + 1)]
        stages = [sinks, [node_config(backend, t, 0, raw, where)]]
    protocol = AgentProtocol(
        pacers=("source", "group"),
        stopped=("sink",),
        done_timeout_s=t.intended_duration_s * 3 + t.drain_s * 2 + 30,
        stop_timeout_s=t.drain_s + 30,
        close=True,  # nodes keep their sessions open until every node drained
    )
    run_stages(backend, infra, stages, raw, where, t.match_timeout_s + READY_GRACE_S, protocol)


def collect_flow(
    t: TrialPlan, raw: Path, where: Placement
) -> tuple[list[pa.Table], list[dict[str, Any]]]:
    """One record table per measuring node, joined with the publisher's send times."""
    src_head, src = read_raw(raw / f"{node_name(t, 0)}.raw")
    sent = {k: np.frombuffer(src[k], dtype=np.int64) for k in ("seq", "t_intended", "t_sent")}
    tables, heads = [], [src_head]
    for k in range(1, t.measured_nodes + 1):
        head, cols = read_raw(raw / f"{node_name(t, k)}.raw")
        acked = src.get(f"t_ack_{k}")
        columns = {
            **sent,
            "t_echoed": np.frombuffer(cols["t_echoed"], dtype=np.int64),
            "t_received": (
                np.frombuffer(acked, dtype=np.int64)
                if acked is not None
                else np.zeros(len(sent["seq"]), dtype=np.int64)
            ),
        }
        host = where.names[t.flow_host(k)]
        tables.append(records_table(t.trial, head["node"], host, t.payload_bytes, columns))
        heads.append(head)
    return tables, heads
