"""Short real one-way trials: fan-out, ping-pong and a 5-node chain on real Zenoh, real
roscore/rospy and the in-process runtime. Nothing asserts on elapsed time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.verdict import Thresholds
from roboscale.backends.base import get_backend
from roboscale.spec.planner import TrialPlan

RunTrial = Callable[[TrialPlan], Any]  # the run_trial fixture of tests/conftest.py

MESSAGES = 150


def flow(backend: str, workload: str, **over: object) -> TrialPlan:
    base = TrialPlan(
        index=3,
        trial=f"t0003-{backend}-{workload}",
        backend=backend,
        rate_hz=200.0,
        payload="4KB",
        payload_bytes=4096,
        pairs=1,
        run=0,
        messages=MESSAGES,
        warmup=10,
        drain_s=2.0,
        pause_s=0.0,
        publisher_queue=1000,
        subscriber_queue=0,
        mode="standard",
        match_timeout_s=20.0,
        seed=0,
        workload=workload,
        listeners=1 if workload == "ping" else 0,
        chain_length=0,
    )
    return replace(base, **over)  # type: ignore[arg-type]


def run(run_trial: RunTrial, t: TrialPlan) -> tuple[pa.Table, list[dict[str, object]]]:
    tables, nodes = run_trial(t)
    return pa.concat_tables(tables), nodes


def arrivals(table: pa.Table) -> dict[str, np.ndarray]:
    rows = table.to_pydict()
    out: dict[str, list[float]] = {}
    for node, echoed in zip(rows["node"], rows["t_echoed"], strict=True):
        out.setdefault(node, []).append(np.nan if echoed is None else float(echoed))
    return {k: np.array(v) for k, v in sorted(out.items())}


def check_fanout(t: TrialPlan, table: pa.Table) -> None:
    per_node = arrivals(table)
    assert list(per_node) == [f"listener{k:02d}_t0003" for k in range(1, t.listeners + 1)]
    sent = np.array(table.column("t_sent").to_pylist()[:MESSAGES], dtype=np.float64)
    for got in per_node.values():
        assert not np.isnan(got).any()
        assert np.all(got > sent)
    received = table.column("t_received").to_pylist()
    if t.ack:
        echoed = table.column("t_echoed").to_pylist()
        assert all(r is not None and r > e for r, e in zip(received, echoed, strict=True))
    else:
        assert received == [None] * len(received)
    entry = summarize_trial(table, t.params(), Thresholds()).to_dict()
    assert (entry["sent"], entry["received"], entry["lost"]) == (MESSAGES, MESSAGES, 0)


def check_chain(t: TrialPlan, table: pa.Table) -> None:
    per_node = arrivals(table)
    assert list(per_node) == [f"hop{k:02d}_t0003" for k in range(1, t.chain_length)]
    sent = np.array(table.column("t_sent").to_pylist()[:MESSAGES], dtype=np.float64)
    previous = sent
    for got in per_node.values():  # each hop after the one before it
        assert np.all(got > previous)
        previous = got
    entry = summarize_trial(table, t.params(), Thresholds()).to_dict()
    assert entry["received"] == MESSAGES
    assert [h["node"] for h in entry["per_node"]] == list(per_node)


@pytest.mark.zenoh
@pytest.mark.parametrize("ack", [False, True])
def test_zenoh_fanout(run_trial: RunTrial, zenoh: None, ack: bool) -> None:
    t = flow("zenoh", "fanout", listeners=3, ack=ack)
    table, _ = run(run_trial, t)
    check_fanout(t, table)


@pytest.mark.zenoh
def test_zenoh_chain(run_trial: RunTrial, zenoh: None) -> None:
    t = flow("zenoh", "chain", chain_length=5)
    table, nodes = run(run_trial, t)
    check_chain(t, table)
    assert len({n["pid"] for n in nodes}) == 5


@pytest.mark.zenoh
def test_native_proc_chain(run_trial: RunTrial, zenoh: None) -> None:
    t = flow("native-proc", "chain", chain_length=3)
    table, _ = run(run_trial, t)
    check_chain(t, table)


@pytest.mark.ros1
def test_ros1_ping_pong(run_trial: RunTrial, ros1: None) -> None:
    t = flow("ros1", "ping", ack=True)
    table, _ = run(run_trial, t)
    check_fanout(t, table)


@pytest.mark.ros1
def test_ros1_fanout(run_trial: RunTrial, ros1: None) -> None:
    t = flow("ros1", "fanout", listeners=3)
    table, _ = run(run_trial, t)
    check_fanout(t, table)


@pytest.mark.ros1
def test_ros1_chain(run_trial: RunTrial, ros1: None) -> None:
    t = flow("ros1", "chain", chain_length=5, ack=True)
    table, _ = run(run_trial, t)
    check_chain(t, table)


def test_native_chain_in_one_process(run_trial: RunTrial) -> None:
    t = flow("native", "chain", chain_length=5, ack=True)
    table, nodes = run(run_trial, t)
    check_chain(t, table)
    assert len({n["pid"] for n in nodes}) == 1


def test_one_way_workloads_spread_over_emulated_hosts() -> None:
    """The publisher on host 0, listeners over the other hosts; a chain walks them."""
    from roboscale.lab.envs import check_placement

    fanout = flow("zenoh", "fanout", listeners=4, hosts=3, link="ethernet")
    check_placement(get_backend("zenoh"), fanout)  # accepted
    assert [fanout.flow_host(k) for k in range(5)] == [0, 1, 2, 1, 2]
    chain = flow("zenoh", "chain", chain_length=5, hosts=2, link="ethernet")
    assert [chain.flow_host(k) for k in range(5)] == [0, 1, 0, 1, 0]
