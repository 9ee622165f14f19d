"""The one-way workloads' extra figures, from real trials on the native backend."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from rich.console import Console

from roboscale.lab.runner import run_sweep
from roboscale.spec.loader import load_spec
from roboscale.spec.planner import plan
from roboscale.workloads.oneway_figures import outlier_share

SPEC = """\
name: flows
sweep:
  backend: native
  workload: [fanout, chain, ping]
  listeners: 3
  chain_length: 3
  ack: [false, true]
  rate_hz: 200
trial:
  runs: 1
  messages: 60
  warmup: 5
  drain_s: 1
"""


def test_outliers_are_values_beyond_the_box_plot_whiskers() -> None:
    values = np.array([10.0, 11.0, 12.0, 13.0, 11.5, 12.5, 100.0, np.nan])
    assert outlier_share(values) == 1 / 7
    assert outlier_share(np.array([1.0, 2.0])) is None


def test_fanout_chain_and_ping_pong_figures_of_real_trials(tmp_path: Path) -> None:
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    out = tmp_path / "run"
    outcome = run_sweep(spec, plan(spec), out, SPEC, "test", Console(quiet=True))
    assert outcome.failed == 0
    entries = json.loads((out / "summary.json").read_text())["trials"]
    by_kind = {(e["workload"], e["ack"]): e["flow"] for e in entries}
    fanout = by_kind[("fanout", False)]
    assert len(fanout["outlier_share"]) == 3 and fanout["outlier_share_of"] == "one_way"
    spread = fanout["arrival_spread_us"]
    assert 0 <= spread["p50"] <= spread["max"]  # one message's last arrival minus its first
    chain = by_kind[("chain", False)]
    assert chain["outlier_share_of"] == "hop" and len(chain["outlier_share"]) == 2  # B, C
    assert chain["arrival_spread_us"] is None  # one node per message: nothing to spread
    pong = by_kind[("ping", True)]
    assert pong["ack_return_us"]["p50"] > 0 and by_kind[("ping", False)]["ack_return_us"] is None
