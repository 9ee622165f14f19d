"""Reports render from what is on disk: full runs, interrupted runs, recovered trials."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import add_entry, summary_entry, trial_params, write_run, write_trial

from roboscale.analysis.report import render_report
from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.verdict import Thresholds
from roboscale.errors import UserError
from roboscale.records.store import records_table
from roboscale.safewrite import write_json

TH = Thresholds()


def make_run(
    run_dir: Path,
    backends: tuple[str, ...] = ("zenoh", "ros1"),
    scale: tuple[tuple[int, int], ...] = ((1, 1),),
) -> list[str]:
    """A results folder; `scale` lists (hosts, pairs) configurations of each series."""
    run_dir.mkdir(parents=True)
    run = {"format_version": 1, "spec_name": "unit", "command": "roboscale bench x.yaml"}
    write_run(run_dir, **run, backends=dict.fromkeys(backends, "v1"))
    rng = np.random.default_rng(1)
    trials = []
    for backend in backends:
        for size, payload in ((11, "text"), (4250, "laserscan")):
            for (hosts, pairs), rate in itertools.product(scale, (10.0, 100.0)):
                trial = f"t{len(trials):04d}-{backend}-{rate:g}-{payload}"
                link = "loopback" if hosts == 1 else "wifi"
                params = trial_params(trial=trial, backend=backend, rate_hz=rate,
                                      payload=payload, payload_bytes=size, pairs=pairs, run=0,
                                      hosts=hosts, link=link)  # fmt: skip
                n = 50
                sent = np.arange(1, n + 1, dtype=np.int64) * int(1e9 / rate)
                rtt = rng.integers(100_000, 300_000, n)
                cols = {"seq": np.arange(n), "t_intended": sent, "t_sent": sent,
                        "t_echoed": sent + rtt // 2, "t_received": sent + rtt}  # fmt: skip
                table = records_table(trial, "sender_0", "local", size, cols)
                write_trial(run_dir, trial, [table], params)
                add_entry(run_dir, summarize_trial(table, params, TH), TH.to_dict())
                trials.append(trial)
    return trials


def test_report_has_plots_tables_and_comparison(tmp_path: Path) -> None:
    make_run(tmp_path / "run")
    html, md = render_report(tmp_path / "run")
    page = html.read_text()
    # Interactive figures, plotly.js once; no matplotlib picture left for echo.
    assert page.count("class='fig'") == 5 and "src='data:image/png" not in page
    assert page.count("Plotly.newPlot") == 1 and page.count("plotly.js v") == 1
    assert "Backends side by side" in page and "Percentiles per trial" in page
    assert re.search(r"src=['\"]https?://", page) is None  # nothing fetched: opens offline
    assert page.index("id='headline'") < page.index("id='toc'") < page.index("Backends side")
    text = md.read_text()
    assert text.index("## Headline") < text.index("## This run")
    assert "| local | text | 10 | 1 |" in text and "ros1 p50 µs [95 %]" in text
    assert TH.describe() in text


def test_interrupted_run_with_no_trial_renders(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_json(run_dir / "run.json", {"format_version": 1, "spec_name": "cut"})
    html, _ = render_report(run_dir)
    assert "No trial finished" in html.read_text()


def test_trial_missing_from_summary_is_recovered(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    trials = make_run(run_dir, backends=("zenoh",))
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["trials"] = summary["trials"][:1]  # a crash after the records were written
    write_json(run_dir / "summary.json", summary)
    _, md = render_report(run_dir)
    rows = json.loads((run_dir / "summary.json").read_text())["trials"]
    assert [r["trial"] for r in rows] == trials
    assert all(t in md.read_text() for t in trials)


def test_failed_trial_is_listed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    make_run(run_dir, backends=("zenoh",))
    failed = trial_params(trial="t9999-zenoh", backend="zenoh", rate_hz=5.0,
                          error="echoer_0: no READY")  # fmt: skip
    write_trial(run_dir, failed["trial"], [], failed)  # the lab keeps a failed trial's folder
    add_entry(run_dir, {**failed, "sustained": False}, TH.to_dict())
    html, md = render_report(run_dir)
    assert "echoer_0: no READY" in html.read_text() and "Failed trials" in md.read_text()


def test_unknown_format_version_is_refused(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    write_json(run_dir / "run.json", {"format_version": 99})
    with pytest.raises(UserError, match=r"run.json: format_version: 99 is not supported"):
        render_report(run_dir)


def test_scaling_figures_appear_when_nodes_or_hosts_vary(tmp_path: Path) -> None:
    make_run(tmp_path / "n", backends=("ros1",), scale=((1, 1), (1, 4), (1, 16)))
    page = render_report(tmp_path / "n")[0].read_text()
    assert "Latency against node count" in page and "Latency against host count" not in page
    make_run(tmp_path / "h", backends=("ros1",), scale=((2, 1), (4, 4), (6, 9)))
    page = render_report(tmp_path / "h")[0].read_text()
    assert "Latency against host count" in page and "Latency against node count" not in page
    assert "6 hosts wifi" in page  # the percentile table names the environment


def test_trials_on_real_machines_show_their_clock_bound() -> None:
    from roboscale.analysis.report import _clock_table

    here = summary_entry(trial="t2")  # on this machine: no clocks to bound
    entries = [
        summary_entry(trial="t0", clock={"bound_us": 180.4, "valid": True, "max_bound_us": 500.0}),
        summary_entry(trial="t1", clock={"bound_us": 900.0, "valid": False, "max_bound_us": 500.0}),
        here,
    ]  # fmt: skip
    ((title, (head, rows), caption),) = _clock_table(entries)
    assert title == "Clocks of real machines" and len(head) == 4 and not caption
    assert rows == [["t0", "180", "500", "valid"], ["t1", "900", "500", "invalid"]]
    assert _clock_table([here]) == []
