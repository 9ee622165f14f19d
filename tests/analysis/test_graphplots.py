"""The graph workload's report: per-path and per-topic figures, backends side by side, and
captions that say what each latency measures (records built here: analysis only)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
from tests.conftest import (
    add_entry,
    distribution,
    summary_entry,
    trial_params,
    write_run,
    write_trial,
)

from roboscale.analysis.graphplots import topic_rates
from roboscale.analysis.report import render_report
from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.verdict import Thresholds
from roboscale.records.store import records_table

TH = Thresholds()
NODES = ("path|scan_to_base", "topic|scan|lidar|filter", "topic|scan|lidar_b|filter",
         "topic|points|filter|base")  # fmt: skip


def make_graph_run(run_dir: Path, backends: tuple[str, ...]) -> None:
    run_dir.mkdir(parents=True)
    run = {"format_version": 1, "spec_name": "g", "command": "roboscale bench g.yaml"}
    write_run(run_dir, **run, backends=dict.fromkeys(backends, "v1"))
    rng = np.random.default_rng(1)
    for k, backend in enumerate(backends):
        trial = f"t{k:04d}-{backend}-robot-10hz-r0"
        params = trial_params(trial=trial, backend=backend, workload="graph",
                              graph="/x/robot.yaml", subject="robot")  # fmt: skip
        tables = []
        for node in NODES:
            n = 40
            sent = np.arange(1, n + 1, dtype=np.int64) * 50_000_000
            lat = rng.integers(100_000, 900_000, n) * (20 if node.startswith("path") else 1)
            cols = {"seq": np.arange(n), "t_intended": sent, "t_sent": sent,
                    "t_echoed": sent + lat, "t_received": np.zeros(n, np.int64)}  # fmt: skip
            tables.append(records_table(trial, node, "local", 64, cols))
        write_trial(run_dir, trial, tables, params)
        import pyarrow as pa

        entry = summarize_trial(pa.concat_tables(tables), params, TH)
        add_entry(run_dir, entry, TH.to_dict())


def test_graph_report_draws_paths_and_topics_by_backend(tmp_path: Path) -> None:
    make_graph_run(tmp_path / "run", ("native", "zenoh", "ros1"))
    html, md = render_report(tmp_path / "run")
    page = html.read_text()
    assert "src='data:image/png" not in page  # every figure interactive
    assert len(re.findall(r"class='fig'", page)) == 4
    assert "Graph paths: end-to-end latency by backend" in page
    assert "Graph topics: hop latency by backend" in page and "Node graph" in page
    text = md.read_text()
    # The tables say what they measure: a path end to end through lineage, a topic one hop.
    assert "followed node by node through each relay" in text
    assert "this is that last hop only" in text and "hop latency p50 µs" in text


def test_a_topic_rate_sums_its_publishers_once_each() -> None:
    def topic(name: str, publisher: str, subscriber: str, rate: float | None) -> dict[str, Any]:
        return {"topic": name, "publisher": publisher, "subscriber": subscriber, "sent": 10,
                "arrived": 10, "rate_hz": rate, "latency_us": distribution()}  # fmt: skip

    entry = summary_entry(workload="graph", e2e_us=distribution(), paths=[], topics=[
        topic("scan", "a", "x", 20.0), topic("scan", "a", "y", 20.0),
        topic("scan", "b", "x", 5.0), topic("odom", "c", "x", None),
    ])  # fmt: skip
    assert topic_rates(entry) == {"scan": 25.0, "odom": 0.0}


def test_the_node_graph_is_laid_out_in_the_order_data_flows() -> None:
    from roboscale.analysis.graphviews import layers

    edges = [
        ("lidar", "filter"),
        ("filter", "fusion"),
        ("camera", "fusion"),
        ("fusion", "planner"),
        ("planner", "filter"),
    ]  # fmt: skip  (a cycle back)
    assert layers(edges) == {"lidar": 0, "filter": 1, "fusion": 2, "camera": 0, "planner": 3}
