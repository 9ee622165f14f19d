"""Figures of the one-way workloads that the lab report's Q7 and Q8 read, beside the
common summary: how far apart one message arrives at its listeners (synchronisation), the
share of box-plot outliers per node or hop (Q8: "more outliers in each step"), and the
acknowledgement's way back per message in ping-pong (the increment over a ping)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from roboscale.analysis.oneway import Flow, flow_of
from roboscale.analysis.stats import distribution
from roboscale.records.models import FlowFigures, TrialParams

FloatArray = npt.NDArray[np.float64]
WHISKER = 1.5  # box-plot whiskers: Q1 - 1.5 IQR to Q3 + 1.5 IQR; beyond them, an outlier


def outlier_share(values_us: FloatArray) -> float | None:
    """The share of values beyond the box plot's whiskers (Tukey's fences)."""
    v = values_us[~np.isnan(values_us)]
    if v.size < 4:
        return None
    q1, q3 = np.percentile(v, [25, 75])
    low, high = q1 - WHISKER * (q3 - q1), q3 + WHISKER * (q3 - q1)
    return float(np.count_nonzero((v < low) | (v > high)) / v.size)


def arrival_spread_us(flow: Flow) -> FloatArray:
    """Per message that reached every listener: its last arrival minus its first."""
    reached = np.all(~np.isnan(flow.echoed), axis=0)
    arrivals = flow.echoed[:, reached]
    spread: FloatArray = (arrivals.max(axis=0) - arrivals.min(axis=0)) / 1e3
    return spread


def flow_figures(table: pa.Table, params: TrialParams) -> FlowFigures:
    """The extra figures of one trial, as its summary entry holds them under `flow`."""
    flow = flow_of(table)
    relays = params.workload == "chain"
    latencies = flow.hop_us() if relays else flow.one_way_us
    return FlowFigures(
        outlier_share=[outlier_share(row) for row in latencies],
        outlier_share_of="hop" if relays else "one_way",
        arrival_spread_us=(
            distribution(arrival_spread_us(flow)) if len(flow.nodes) > 1 and not relays else None
        ),
        ack_return_us=(
            distribution((flow.acked - flow.echoed).ravel() / 1e3) if params.ack else None
        ),
    )
