"""roboscale export: a results folder's tables as CSV, JSON and Markdown, read back by pandas."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

from roboscale.cli import main
from roboscale.lab.runner import run_sweep
from roboscale.results import load
from roboscale.spec.loader import load_spec
from roboscale.spec.planner import plan

SPEC = """\
name: export
sweep:
  backend: native
  rate_hz: [200]
  workload: [echo, chain]
  chain_length: 3
trial:
  runs: 1
  messages: 50
  warmup: 5
  drain_s: 1
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("export")
    (folder / "spec.yaml").write_text(SPEC)
    spec = load_spec(folder / "spec.yaml")
    out = folder / "run"
    assert run_sweep(spec, plan(spec), out, SPEC, "test", Console(quiet=True)).failed == 0
    return out


def export(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as done:
        main(["export", *argv])
    assert done.value.code == 0
    return capsys.readouterr().out


COLUMNS = ["trial", "workload", "backend", "rate_hz", "sent", "received", "sustained",
           "rtt_us.p50", "one_way_us.p50", "usage.cpu_s_total"]  # fmt: skip
# (not p99: these trials have 50 messages, and a p99 is stored only from 100)


def test_csv_round_trips_through_pandas(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = export([str(run_dir)], capsys)
    back = pd.read_csv(io.StringIO(text))
    want = load(run_dir).to_pandas()["summary"]
    assert list(back.columns) == list(want.columns)
    pd.testing.assert_frame_equal(back[COLUMNS], want[COLUMNS], check_dtype=False)


def test_json_round_trips_through_pandas(
    run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "summary.json"
    with pytest.raises(SystemExit):
        main(["export", str(run_dir), "--format", "json", "-o", str(out)])
    back = pd.read_json(out, orient="records")
    want = load(run_dir).to_pandas()["summary"]
    pd.testing.assert_frame_equal(back[COLUMNS], want[COLUMNS], check_dtype=False)
    assert json.loads(out.read_text())[0]["trial"] == want["trial"][0]


def test_markdown_and_other_tables(run_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = export([str(run_dir), "--format", "markdown"], capsys).splitlines()
    assert lines[0].startswith("| trial | backend |") and len(lines) == 2 + 2
    records = pd.read_csv(io.StringIO(export([str(run_dir), "--table", "records"], capsys)))
    assert len(records) == 50 + 2 * 50  # the echo's sender, and each hop of the chain
    per_node = pd.read_csv(io.StringIO(export([str(run_dir), "--table", "per_node"], capsys)))
    assert list(per_node["node"]) == ["hop01_t0001", "hop02_t0001"]
