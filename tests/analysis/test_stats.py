"""Statistics against values computed by hand."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from tests.conftest import trial_params

from roboscale.analysis.stats import (
    Z80,
    achieved_rate_hz,
    distribution,
    rtt_by_id,
    summarize_trial,
)
from roboscale.analysis.verdict import Thresholds
from roboscale.records.store import records_table

MS = 1_000_000


def table(rtt_us: list[float | None], period_ns: int = 10 * MS, node: str = "s0") -> pa.Table:
    """A sender's rows: message i sent at i*period, echoed after half its RTT."""
    n = len(rtt_us)
    sent = np.arange(1, n + 1, dtype=np.int64) * period_ns
    recv = np.array(
        [0 if r is None else s + int(r * 1000) for s, r in zip(sent, rtt_us, strict=True)]
    )
    echo = np.array(
        [0 if r is None else s + int(r * 500) for s, r in zip(sent, rtt_us, strict=True)]
    )
    cols = {
        "seq": np.arange(n, dtype=np.int64),
        "t_intended": sent - 1000,
        "t_sent": sent,
        "t_echoed": echo.astype(np.int64),
        "t_received": recv.astype(np.int64),
    }
    return records_table("t", node, "local", 11, cols)


def params(rate: float = 100.0) -> dict[str, Any]:
    return trial_params(trial="t", backend="zenoh", rate_hz=rate, payload="text", pairs=1)


def test_distribution_by_hand() -> None:
    d = distribution(np.array([100.0, 200.0, 300.0, 400.0, np.nan]))
    assert d.p50 == 250.0  # linear interpolation between 200 and 300
    assert d.p90 is None and d.p99 is None  # four messages support only the median
    assert d.n == 4
    assert d.max == 400.0 and d.mean == 250.0
    std = math.sqrt((150**2 + 50**2 + 50**2 + 150**2) / 3)
    assert d.std == pytest.approx(std)
    assert d.ci80_low == pytest.approx(250 - Z80 * std / 2)
    assert d.ci80_high == pytest.approx(250 + Z80 * std / 2)


def test_distribution_of_nothing_is_all_none() -> None:
    d = distribution(np.array([np.nan])).to_dict()
    assert d.pop("n") == 0 and set(d.values()) == {None}


def test_percentiles_only_where_the_sample_supports_them() -> None:
    values = np.arange(1.0, 1001.0)
    assert distribution(values[:99]).p99 is None
    d = distribution(values[:100])
    assert d.p99 == pytest.approx(99.01) and d.p999 is None
    assert d.p99_low is not None and d.p99_low <= d.p99 <= d.p99_high
    assert distribution(values).p999 == pytest.approx(999.001)


def test_achieved_rate() -> None:
    sent = np.array([0.0, 10e6, 20e6, 30e6])  # 3 intervals over 30 ms
    assert achieved_rate_hz(sent) == pytest.approx(100.0)
    assert achieved_rate_hz(np.array([5.0])) is None


def ok(entry: dict[str, object], rule: str) -> bool:
    rules = entry["verdict"]["rules"]  # type: ignore[index]
    return bool(next(r for r in rules if r["rule"] == rule)["ok"])


def test_summary_counts_loss_and_judges() -> None:
    rtt: list[float | None] = [100.0] * 96 + [None] * 4
    e = summarize_trial(table(rtt), params(), Thresholds()).to_dict()
    assert (e["sent"], e["received"], e["lost"]) == (100, 96, 4)
    assert e["loss"] == pytest.approx(0.04)
    assert e["achieved_rate_hz"] == pytest.approx(100.0)
    assert e["rtt_us"]["p50"] == pytest.approx(100.0)
    assert e["one_way_us"]["p50"] == pytest.approx(50.0)
    assert e["send_lag_us"]["max"] == pytest.approx(1.0)
    assert not e["sustained"] and not ok(e, "loss") and ok(e, "rate")
    assert e["thresholds"] == Thresholds().to_dict()


def test_summary_growth_fails_the_verdict() -> None:
    rtt: list[float | None] = [float(100 + 50 * i) for i in range(100)]
    e = summarize_trial(table(rtt), params(), Thresholds()).to_dict()
    assert not ok(e, "growth") and ok(e, "loss")
    assert not e["sustained"]


def test_summary_slow_sender_fails_the_rate() -> None:
    e = summarize_trial(
        table([100.0] * 50, period_ns=20 * MS), params(100.0), Thresholds()
    ).to_dict()
    assert e["achieved_rate_hz"] == pytest.approx(50.0)
    assert not ok(e, "rate") and not e["sustained"]


def test_rate_verdict_uses_the_slowest_sender() -> None:
    both = pa.concat_tables(
        [table([100.0] * 50, node="a"), table([100.0] * 50, period_ns=20 * MS, node="b")]
    )
    e = summarize_trial(both, params(100.0), Thresholds()).to_dict()
    assert e["achieved_rate_hz"] == pytest.approx(75.0)
    assert e["achieved_rate_min_hz"] == pytest.approx(50.0)
    assert not e["sustained"]


def test_rtt_by_id_means_over_runs() -> None:
    ids, mean = rtt_by_id([table([100.0, None, 300.0]), table([200.0, None, 500.0])])
    assert ids.tolist() == [0, 1, 2]
    assert mean[0] == 150.0 and math.isnan(mean[1]) and mean[2] == 400.0
