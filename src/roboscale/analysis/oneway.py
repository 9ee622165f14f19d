"""Statistics of one-way workloads (fanout, ping, chain) from their record rows.

Each measuring node has one row per message (records/schema.py): `t_echoed` is
the arrival at that node, `t_received` its ack back at the publisher (ping-pong).
Node names sort in flow order (lab/flows.py), so in a chain row set k is hop k:
hop latency = arrival at hop k - arrival at hop k-1 (the publisher's `t_sent`
before hop 1), end-to-end = arrival at the last hop - `t_sent`. A message counts
as received only when it reached every listener (fanout) or the last hop (chain;
a hop forwards only what arrived, so that is every hop too).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np
import pyarrow as pa

from roboscale.analysis.stats import (
    FloatArray,
    Measured,
    achieved_rate_hz,
    column,
    distribution,
    loss_of,
)
from roboscale.analysis.verdict import Thresholds, Trace, judge, period_of
from roboscale.records.models import NodeFigures, OneWayEntry, TrialParams
from roboscale.workloads.base import workload_of


@runtime_checkable
class FlowShape(Protocol):
    """What a one-way workload tells its analysis (workloads/oneway.py's OneWay)."""

    relays: bool  # measuring nodes forward to the next one: latency per hop and end to end

    def describe(self, entry: TrialParams) -> str:
        """The workload and its axes, for a table cell ("chain of 5 ack")."""
        ...

    def series_names(self, entry: TrialParams) -> tuple[str, str]:
        """Labels of its one-way series (a chain's end to end) and of its round trip."""
        ...


def shape_of(entry: TrialParams) -> FlowShape:
    workload = workload_of(entry)
    if not isinstance(workload, FlowShape):
        raise TypeError(f"workload {entry.workload!r} has no one-way figures")
    return workload


@dataclass(frozen=True)
class Flow:
    """A one-way trial as matrices: row k is measuring node k, column i message i."""

    nodes: list[str]
    intended: FloatArray
    sent: FloatArray
    echoed: FloatArray  # (nodes, messages), NaN where it never arrived
    acked: FloatArray  # (nodes, messages), NaN without ack or where it never came back

    @property
    def one_way_us(self) -> FloatArray:
        latency: FloatArray = (self.echoed - self.sent) / 1e3
        return latency

    @property
    def rtt_us(self) -> FloatArray:
        latency: FloatArray = (self.acked - self.sent) / 1e3
        return latency

    def hop_us(self) -> FloatArray:
        """Per-hop latency of a chain: each node's arrival minus the previous node's."""
        before = np.vstack([self.sent[np.newaxis, :], self.echoed[:-1]])
        latency: FloatArray = (self.echoed - before) / 1e3
        return latency


def flow_of(table: pa.Table) -> Flow:
    """Reshape the rows; every measuring node holds the same message ids (lost: null)."""
    table = table.sort_by([("node", "ascending"), ("seq", "ascending")])
    nodes = sorted(set(table.column("node").to_pylist()))
    count = table.num_rows // len(nodes) if nodes else 0
    if count * len(nodes) != table.num_rows:
        raise ValueError("one-way records must hold the same messages for every node")
    shape = (len(nodes), count)
    return Flow(
        nodes=nodes,
        intended=column(table, "t_intended")[:count],
        sent=column(table, "t_sent")[:count],
        echoed=column(table, "t_echoed").reshape(shape),
        acked=column(table, "t_received").reshape(shape),
    )


def primary_us(flow: Flow, relays: bool) -> FloatArray:
    """The trial's headline latency: end-to-end for a chain, every listener for a fanout."""
    if relays:
        end_to_end: FloatArray = flow.one_way_us[-1]
        return end_to_end
    pooled: FloatArray = flow.one_way_us.ravel()
    return pooled


def per_node(flow: Flow, relays: bool) -> list[NodeFigures]:
    hops = flow.hop_us() if relays else None
    return [
        NodeFigures(
            node=name,
            received=int(np.count_nonzero(~np.isnan(flow.echoed[k]))),
            one_way_us=distribution(flow.one_way_us[k]),
            rtt_us=distribution(flow.rtt_us[k]),
            hop_us=None if hops is None else distribution(hops[k]),
        )
        for k, name in enumerate(flow.nodes)
    ]


def summarize_oneway(
    table: pa.Table, params: TrialParams, th: Thresholds
) -> tuple[Measured, list[NodeFigures]]:
    """A one-way trial's common figures (`one_way_us` the headline latency) and each
    listener's or hop's (the entry's `per_node`)."""
    flow = flow_of(table)
    relays = shape_of(params).relays
    sent = int(flow.sent.size)
    received = int(np.count_nonzero(np.all(~np.isnan(flow.echoed), axis=0))) if sent else 0
    rate = achieved_rate_hz(flow.sent)
    ratio = rate / params.rate_hz if rate is not None else 1.0
    primary = primary_us(flow, relays)
    # Every listener's latency against its message's send time (a fanout's rows are
    # listeners by messages; a chain's headline is its last hop's).
    sent_each = np.broadcast_to(flow.sent, flow.one_way_us.shape)
    times = sent_each[-1] if relays else sent_each.ravel()
    lag = (flow.sent - flow.intended) / 1e3
    period = period_of(flow.intended, params.rate_hz)
    trace = Trace(times.astype(np.float64), primary, lag, period, round_trip=False)
    verdict = judge(th, trace, ratio, loss_of(sent, received))
    measured = Measured(
        params=params,
        thresholds=th,
        sent=sent,
        received=received,
        verdict=verdict,
        achieved_rate_hz=rate,
        achieved_rate_min_hz=rate,
        rtt_us=distribution(flow.rtt_us.ravel()),
        one_way_us=distribution(primary),
        send_lag_us=distribution(lag),
    )
    return measured, per_node(flow, relays)


def series(entry: OneWayEntry, table: pa.Table) -> dict[str, FloatArray]:
    """Latencies (µs) to draw for one trial, by label: a fanout pooled over its listeners,
    ping one-way (and its round trip with ack), a chain per hop and end to end."""
    flow = flow_of(table)
    shape = shape_of(entry)
    one_way, round_trip = shape.series_names(entry)
    if shape.relays:
        hops = flow.hop_us()
        out = {f"hop {k + 1}": hops[k] for k in range(len(flow.nodes))}
        out[one_way] = flow.one_way_us[-1]
    else:
        out = {f"{one_way} one-way": flow.one_way_us.ravel()}
    if entry.ack:
        out[f"{round_trip} round trip"] = flow.rtt_us.ravel()
    return {label: values[~np.isnan(values)] for label, values in out.items()}
