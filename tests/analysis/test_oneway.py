"""One-way statistics against values computed by hand."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from tests.conftest import trial_params

from roboscale.analysis.oneway import series
from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.verdict import Thresholds
from roboscale.records.models import EchoEntry
from roboscale.records.store import records_table

SENT = [1_000_000, 2_000_000, 3_000_000, 4_000_000]


def table(arrivals: dict[str, list[int]], acks: dict[str, list[int]] | None = None) -> pa.Table:
    parts = []
    for node, echoed in arrivals.items():
        cols = {
            "seq": np.arange(4, dtype=np.int64),
            "t_intended": np.array(SENT, dtype=np.int64) - 1000,
            "t_sent": np.array(SENT, dtype=np.int64),
            "t_echoed": np.array(echoed, dtype=np.int64),
            "t_received": np.array((acks or {}).get(node, [0] * 4), dtype=np.int64),
        }
        parts.append(records_table("t", node, "local", 64, cols))
    return pa.concat_tables(parts)


def params(workload: str, **over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"rate_hz": 1000.0, "workload": workload, "listeners": 2}
    base.update(ack=False, chain_length=0)
    base.update(over)
    return trial_params(**base)


def test_fanout_loss_counts_messages_missing_at_any_listener() -> None:
    # listener01 got all; listener02 lost message 2 (0 = never arrived).
    rows = table(
        {
            "listener01_t0000": [1_010_000, 2_020_000, 3_030_000, 4_040_000],
            "listener02_t0000": [1_100_000, 2_200_000, 0, 4_400_000],
        }
    )
    e = summarize_trial(rows, params("fanout"), Thresholds()).to_dict()
    assert (e["sent"], e["received"], e["lost"], e["loss"]) == (4, 3, 1, 0.25)
    # pooled one-way: 10, 20, 30, 40 and 100, 200, 400 µs
    pooled = np.array([10, 20, 30, 40, 100, 200, 400], dtype=float)
    assert e["one_way_us"]["p50"] == pytest.approx(40.0)
    assert e["one_way_us"]["mean"] == pytest.approx(pooled.mean())
    half = 1.2815515655446004 * pooled.std(ddof=1) / np.sqrt(7)
    assert e["one_way_us"]["ci80_low"] == pytest.approx(pooled.mean() - half)
    assert e["rtt_us"]["p50"] is None  # no ack: no round trip exists
    assert e["send_lag_us"]["mean"] == pytest.approx(1.0)
    assert e["achieved_rate_hz"] == pytest.approx(1000.0)
    assert [n["received"] for n in e["per_node"]] == [4, 3]
    assert e["per_node"][1]["one_way_us"]["max"] == pytest.approx(400.0)
    assert not e["sustained"]
    # 400 µs is late at 1 kHz (beyond 0.2 x 1 ms), but one of seven shows no late share
    assert [r["rule"] for r in e["verdict"]["rules"] if not r["ok"]] == ["loss"]


def test_chain_hops_and_end_to_end() -> None:
    hop1 = [s + 50_000 for s in SENT]
    hop2 = [h + 70_000 for h in hop1]
    rows = table({"hop01_t0000": hop1, "hop02_t0000": hop2})
    entry = summarize_trial(rows, params("chain", chain_length=3, listeners=0), Thresholds())
    e = entry.to_dict()
    assert (e["sent"], e["received"], e["lost"]) == (4, 4, 0)
    assert e["one_way_us"]["mean"] == pytest.approx(120.0)  # end to end = sum of hops
    assert [n["hop_us"]["mean"] for n in e["per_node"]] == pytest.approx([50.0, 70.0])
    assert e["sustained"]
    got = series(entry, rows)
    assert list(got) == ["hop 1", "hop 2", "end-to-end"]
    assert got["hop 2"].tolist() == pytest.approx([70.0] * 4)


def test_ping_pong_round_trip() -> None:
    echoed = [s + 30_000 for s in SENT]
    acked = [s + 80_000 for s in SENT]
    acked[3] = 0  # one ack lost: the message still arrived
    rows = table({"listener01_t0000": echoed}, {"listener01_t0000": acked})
    entry = summarize_trial(rows, params("ping", ack=True, listeners=1), Thresholds())
    e = entry.to_dict()
    assert e["received"] == 4
    assert e["rtt_us"]["mean"] == pytest.approx(80.0)
    assert e["one_way_us"]["mean"] == pytest.approx(30.0)
    got = series(entry, rows)
    assert sorted(got) == ["ping-pong one-way", "ping-pong round trip"]
    assert got["ping-pong round trip"].size == 3


def test_flow_figures_and_table() -> None:
    from roboscale.analysis.flowplots import flow_boxes, flow_means, mean_ci80
    from roboscale.analysis.report import _figure_specs, _tables, by_workload
    from roboscale.analysis.tables import flow_table

    hop1 = [s + 50_000 for s in SENT]
    rows = table({"hop01_t0000": hop1, "hop02_t0000": [h + 70_000 for h in hop1]})
    entry = summarize_trial(
        rows, params("chain", chain_length=3, listeners=0), Thresholds()
    ).model_copy(update={"trial": "t0", "backend": "zenoh", "payload": "64B",
                         "payload_bytes": 64, "run": 0})  # fmt: skip
    common = {k: v for k, v in entry.to_dict().items() if k not in ("per_node", "flow")}
    echo_only = EchoEntry.model_validate({**common, "workload": "echo"})
    groups = by_workload([echo_only, entry])
    # The report gives each figure the entries of the workloads that draw it.
    drawn = {spec.title: given for spec, given in _figure_specs(groups)}
    assert drawn["One-way latency by payload size"] == [entry]
    assert drawn["Latency by payload and rate"] == [echo_only]
    assert drawn["Latency CDF"] == [echo_only, entry]  # the figures both draw are shared
    assert flow_means([entry], lambda _t: rows) is not None
    assert flow_boxes([entry], lambda _t: rows) is not None
    head, body = flow_table([entry]) or ([], [])
    assert body[0][head.index("p50 per listener or hop µs")] == "50 / 70"
    assert body[0][head.index("reached all/sent")] == "4/4"
    # Echo's tables hold echo trials only; a chain alone has the one-way table only.
    assert [title for title, _, _ in _tables(by_workload([entry]))[0]] == [
        "One-way workloads per trial"
    ]
    mean, half = mean_ci80(np.array([1.0, 3.0]))
    assert (mean, half) == pytest.approx((2.0, 1.2815515655446004 * np.sqrt(2) / np.sqrt(2)))
