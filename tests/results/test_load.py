"""roboscale.results: a results folder as tables, checked as the report checks it."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from rich.console import Console

from roboscale import results
from roboscale.errors import UserError
from roboscale.lab.runner import run_sweep
from roboscale.spec.loader import load_spec
from roboscale.spec.planner import plan

SPEC = """\
name: notebook
sweep:
  backend: native
  rate_hz: [200, 400]
  workload: [echo, chain]
  chain_length: 3
trial:
  runs: 1
  messages: 60
  warmup: 5
  drain_s: 1
"""
MESSAGES = 60


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real run: the native backend (no service needed), echo and a chain of three."""
    folder = tmp_path_factory.mktemp("results")
    spec_path = folder / "spec.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    out = folder / "run"
    outcome = run_sweep(spec, plan(spec), out, SPEC, "test", Console(quiet=True))
    assert outcome.failed == 0 and not outcome.interrupted
    return out


def test_summary_is_one_row_per_trial_with_flat_figures(run_dir: Path) -> None:
    run = results.load(run_dir)
    summary = run.summary
    assert summary.num_rows == 4 == len(run.trials)
    assert summary.column("workload").to_pylist() == ["echo", "echo", "chain", "chain"]
    assert summary.column("sent").to_pylist() == [MESSAGES] * 4
    assert {"rtt_us.p50", "one_way_us.p99", "verdict.sustained", "usage.cpu_s_total"} <= set(
        summary.column_names
    )
    assert run.run.spec_name == "notebook"


def test_per_node_holds_each_hop(run_dir: Path) -> None:
    per_node = results.load(run_dir).per_node
    assert per_node.num_rows == 4  # two chain trials of two hops each
    assert per_node.column("node").to_pylist()[:2] == ["hop01_t0002", "hop02_t0002"]
    assert "hop_us.p50" in per_node.column_names


def test_metadata_and_nodes(run_dir: Path) -> None:
    run = results.load(run_dir)
    meta = run.metadata
    assert meta.column("trial").to_pylist() == run.trials
    assert set(meta.column("params.workload").to_pylist()) == {"echo", "chain"}
    assert "host.cpu_model" in meta.column_names and "nodes" not in meta.column_names
    nodes = run.nodes
    assert {"sender", "echoer", "source", "sink"} == set(nodes.column("role").to_pylist())
    assert "counters.received" in nodes.column_names


def test_records_of_one_trial_and_of_all(run_dir: Path) -> None:
    run = results.load(run_dir)
    echo = run.records(run.trials[0])
    assert echo.num_rows == MESSAGES
    assert echo.column("t_received").null_count == 0
    every = run.records()
    assert every.num_rows == 2 * MESSAGES + 2 * 2 * MESSAGES  # a row set per hop
    with pytest.raises(UserError, match=r"no trial 'nope'; trials: t0000-"):
        run.records("nope")


def test_to_pandas(run_dir: Path) -> None:
    frames = results.load(run_dir).to_pandas()
    assert set(frames) == set(results.TABLES)
    latency = frames["records"].eval("t_received - t_sent").dropna() / 1e3
    assert len(latency) == 2 * MESSAGES and (latency > 0).all()
    assert frames["summary"].groupby("workload")["sent"].sum().to_dict() == {
        "chain": 2 * MESSAGES,
        "echo": 2 * MESSAGES,
    }


def copy_of(run_dir: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(run_dir, tmp_path / "copy"))


def test_unknown_format_version_is_refused(run_dir: Path, tmp_path: Path) -> None:
    copy = copy_of(run_dir, tmp_path)
    run = json.loads((copy / "run.json").read_text())
    (copy / "run.json").write_text(json.dumps({**run, "format_version": 9}))
    with pytest.raises(UserError, match=r"run.json: format_version: 9 is not supported"):
        results.load(copy)


def test_missing_files_are_named(run_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"no such results directory"):
        results.load(tmp_path / "nowhere")
    copy = copy_of(run_dir, tmp_path)
    trial = results.load(copy).trials[1]
    (copy / "trials" / trial / "records.parquet").unlink()
    with pytest.raises(UserError, match=rf"{trial}/records.parquet: missing"):
        results.load(copy)
    (copy / "trials" / trial / "metadata.json").unlink()
    with pytest.raises(UserError, match=rf"{trial}/metadata.json: missing; summary.json lists"):
        results.load(copy)
    (copy / "run.json").unlink()
    with pytest.raises(UserError, match=r"run.json: missing"):
        results.load(copy)


def test_a_damaged_records_file_is_named_when_read(run_dir: Path, tmp_path: Path) -> None:
    copy = copy_of(run_dir, tmp_path)
    run = results.load(copy)
    (copy / "trials" / run.trials[0] / "records.parquet").write_bytes(b"PAR1 truncated")
    with pytest.raises(UserError, match=r"records.parquet: not a readable Parquet file"):
        run.records()


def test_flatten_keeps_lists_whole() -> None:
    assert results.flatten({"a": {"b": 1, "c": {"d": None}}, "e": [1, 2]}) == {
        "a.b": 1,
        "a.c.d": None,
        "e": [1, 2],
    }
    assert isinstance(results._table([{"x": 1}, {"y": "z"}]), pa.Table)


def test_repr_says_what_the_folder_holds(run_dir: Path) -> None:
    text = repr(results.load(run_dir))
    assert text.startswith(f"<roboscale results {str(run_dir)!r}: experiment 'notebook', ")
    assert "4 trials (" in text and "backends native" in text and "workloads chain, echo" in text


def test_every_result_keeps_what_reproduces_it(run_dir: Path) -> None:
    """The spec, the exact command, roboscale's and each middleware's version, host facts."""
    run = results.load(run_dir)
    assert run.run.spec == SPEC and run.run.command == "test"
    assert run.run.packages["roboscale"] and run.run.packages["pyarrow"]
    assert run.run.backends["native"].startswith("roboscale runtime")
    assert run.run.host.cores and run.run.host.kernel != "?"
    meta = run.metadata_of[run.trials[0]]
    assert meta.backend_version and meta.host.cpu_model and meta.replayed is None
