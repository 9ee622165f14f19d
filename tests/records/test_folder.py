"""ResultsFolder: the one reader and writer of run.json, summary.json, metadata and records."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.conftest import distribution, trial_params

from roboscale.errors import UserError
from roboscale.records.folder import ResultsFolder, parse_entry
from roboscale.records.models import (
    EchoEntry,
    FacetrackEntry,
    FailedEntry,
    GraphEntry,
    OneWayEntry,
    RunInfo,
    TrialMetadata,
)
from roboscale.records.schema import FORMAT_VERSION, RECORD_COLUMNS
from roboscale.records.store import records_table
from roboscale.safewrite import write_json


def cols(n: int) -> dict[str, np.ndarray]:
    base = np.arange(1, n + 1, dtype=np.int64) * 1000
    received = base + 500
    received[1] = 0  # lost
    echoed = base + 200
    echoed[1] = 0
    return {
        "seq": np.arange(n, dtype=np.int64),
        "t_intended": base,
        "t_sent": base + 10,
        "t_echoed": echoed,
        "t_received": received,
    }


def meta(trial: str, **more: Any) -> TrialMetadata:
    doc = {"format_version": FORMAT_VERSION, "params": trial_params(trial=trial), "host": {}}
    return TrialMetadata.model_validate({**doc, **more})


def measured(workload: str = "echo", **more: Any) -> dict[str, Any]:
    """A finished trial's summary entry as JSON holds it."""
    figures = {
        "sent": 10, "received": 10, "lost": 0, "loss": 0.0, "achieved_rate_hz": 10.0,
        "achieved_rate_min_hz": 10.0, "rtt_us": distribution(p50=5.0),
        "one_way_us": distribution(), "send_lag_us": distribution(), "sustained": True,
        "verdict": {"sustained": True},
    }  # fmt: skip
    return {**trial_params(trial="t0", workload=workload), **figures, **more}


def folder_with_run(tmp_path: Path) -> ResultsFolder:
    folder = ResultsFolder(tmp_path / "run")
    folder.write_run(RunInfo(format_version=FORMAT_VERSION, spec_name="t", spec="x"))
    return folder


def test_records_round_trip_with_loss_as_null(tmp_path: Path) -> None:
    folder = folder_with_run(tmp_path)
    table = records_table("t0", "sender_0", "local", 11, cols(4))
    folder.write_trial("t0", [table], meta("t0"))
    back = folder.records("t0")
    assert tuple(back.column_names) == RECORD_COLUMNS
    d = back.to_pydict()
    assert d["t_received"] == [1500, None, 3500, 4500]
    assert d["t_echoed"] == [1200, None, 3200, 4200]
    assert d["bytes"] == [11] * 4
    assert folder.metadata("t0").params.trial == "t0"
    assert folder.trials_on_disk() == ["t0"]


def test_failed_trial_has_empty_records(tmp_path: Path) -> None:
    folder = folder_with_run(tmp_path)
    folder.write_trial("t1", [], meta("t1", error="boom"))
    assert folder.records("t1").num_rows == 0
    assert folder.metadata("t1").error == "boom"


def test_summaries_are_copied_as_they_are_checked_and_without_records(tmp_path: Path) -> None:
    folder = folder_with_run(tmp_path)
    folder.write_trial("t0", [records_table("t0", "sender_0", "local", 11, cols(4))], meta("t0"))
    folder.add_entry(FailedEntry.model_validate(trial_params(trial="t1", error="x")), {})
    dest = tmp_path / "kept"
    dest.mkdir()
    folder.copy_summaries(dest)
    copied = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert copied == ["run.json", "summary.json", "trials/t0/metadata.json"]
    for name in copied:
        assert (dest / name).read_bytes() == (folder.path / name).read_bytes()
    # A damaged file is refused before anything is copied from it.
    (folder.trial_dir("t0") / "metadata.json").write_text("{}")
    with pytest.raises(UserError, match=r"t0/metadata.json: format_version"):
        folder.copy_summaries(tmp_path / "again")
    # A link planted where a copy goes is not written through.
    (folder.trial_dir("t0") / "metadata.json").write_bytes((dest / copied[2]).read_bytes())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "trials").symlink_to(elsewhere)
    with pytest.raises(UserError, match="is a link"):
        folder.copy_summaries(planted)
    assert not any(elsewhere.iterdir())


def test_add_entry_replaces_same_trial(tmp_path: Path) -> None:
    folder = folder_with_run(tmp_path)
    for trial, error in (("a", "x1"), ("b", "x2"), ("a", "x3")):
        folder.add_entry(FailedEntry.model_validate(trial_params(trial=trial, error=error)),
                         {"max_loss": 0.01})  # fmt: skip
    summary = folder.summary()
    assert [(t.trial, t.error) for t in summary.trials if isinstance(t, FailedEntry)] == [
        ("b", "x2"),
        ("a", "x3"),
    ]
    assert summary.thresholds == {"max_loss": 0.01}


def test_entries_are_read_by_their_workloads_model(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    assert isinstance(parse_entry(path, 0, measured()), EchoEntry)
    assert isinstance(parse_entry(path, 0, measured("chain", per_node=[])), OneWayEntry)
    graph = measured("graph", e2e_us=distribution(), paths=[], topics=[])
    assert isinstance(parse_entry(path, 0, graph), GraphEntry)
    assert isinstance(parse_entry(path, 0, measured("facetrack", facetrack=None)), FacetrackEntry)
    failed = parse_entry(path, 0, trial_params(trial="t0", error="no READY"))
    assert isinstance(failed, FailedEntry) and failed.sustained is False


DAMAGED: list[tuple[str, dict[str, Any], str]] = [
    ("graph-no-paths", measured("graph", e2e_us=distribution(), topics=[]),
     "trials[3].paths: required field is missing"),
    ("graph-topic-text", measured("graph", e2e_us=distribution(), paths=[], topics=["scan"]),
     "trials[3].topics[0]: Input should be a valid dictionary"),
    ("graph-path-arrived", measured("graph", e2e_us=distribution(), topics=[], paths=[
        {"path": "p", "sources": -1, "followed": 0, "e2e_us": distribution(), "rate_hz": 1.0}]),
     "trials[3].paths[0].sources: Input should be greater than or equal to 0"),
    ("facetrack-missing", measured("facetrack"), "trials[3].facetrack: required field"),
    ("facetrack-summary-text", measured("facetrack", facetrack={
        "stack": "runtime", "summary": "good", "kills": []}),
     "trials[3].facetrack.summary: Input should be a valid dictionary"),
    ("facetrack-kill-text", measured("facetrack", facetrack={
        "stack": "runtime", "kills": [{"worker": "w"}],
        "summary": {"frames": 1, "frames_lost": 0, "mean_jaccard": None,
                    "latency_p50_ms": None, "latency_p99_ms": None}}),
     "trials[3].facetrack.kills[0].worker: Input should be a valid integer"),
    ("oneway-node-text", measured("fanout", per_node=["a"]),
     "trials[3].per_node[0]: Input should be a valid dictionary"),
    ("echo-with-paths", measured("echo", paths=[]),
     "trials[3]: Value error, 'paths' is not a field of workload 'echo'"),
    ("workload-unknown", measured("telepathy"),
     "trials[3].workload: 'telepathy' is not a workload of this roboscale"),
]  # fmt: skip


@pytest.mark.parametrize(("entry", "expected"), [c[1:] for c in DAMAGED],
                         ids=[c[0] for c in DAMAGED])  # fmt: skip
def test_damaged_entries_name_file_and_field(entry: dict[str, Any], expected: str) -> None:
    with pytest.raises(UserError) as err:
        parse_entry(Path("/r/summary.json"), 3, entry)
    assert str(err.value).startswith(f"/r/summary.json: {expected}"), str(err.value)


def test_previous_format_version_is_read_and_written_as_current(tmp_path: Path) -> None:
    folder = ResultsFolder(tmp_path)
    write_json(folder.run_file, {"format_version": 1, "spec_name": "old", "host": {"cores": 2}})
    write_json(folder.summary_file, {"format_version": 1, "trials": [measured()]})
    (folder.trial_dir("t0")).mkdir(parents=True)
    v1_meta = {"format_version": 1, "params": trial_params(trial="t0"), "host": {}}
    write_json(folder.trial_dir("t0") / "metadata.json", v1_meta)
    assert folder.run().spec_name == "old" and folder.run().packages == {}
    assert folder.metadata("t0").replayed is None
    summary = folder.summary()
    assert summary.format_version == FORMAT_VERSION
    folder.write_summary(summary)
    assert json.loads(folder.summary_file.read_text())["format_version"] == FORMAT_VERSION


@pytest.mark.parametrize(("version", "hint"), [(99, "upgrade roboscale"), (0, "that wrote")])
def test_other_format_versions_are_refused(tmp_path: Path, version: int, hint: str) -> None:
    write_json(tmp_path / "run.json", {"format_version": version})
    with pytest.raises(UserError, match=rf"run.json: format_version: {version} is not supported"):
        ResultsFolder(tmp_path).run()
    try:
        ResultsFolder(tmp_path).run()
    except UserError as e:
        assert hint in (e.hint or "")


def test_not_a_results_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a roboscale results directory"):
        ResultsFolder(tmp_path).run()
    with pytest.raises(UserError, match="no such results directory"):
        ResultsFolder(tmp_path / "missing").run()


def test_corrupt_json_names_line(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text('{\n  "format_version": 1,\n  oops\n}')
    with pytest.raises(UserError, match=r"run.json:3: not valid JSON"):
        ResultsFolder(tmp_path).run()


def test_trials_that_is_a_file_or_a_missing_trial_folder(tmp_path: Path) -> None:
    folder = folder_with_run(tmp_path)
    folder.add_entry(EchoEntry.model_validate(measured()), {})
    with pytest.raises(UserError, match=r"trials/t0: missing; summary.json lists trial 't0'"):
        folder.check_trials(folder.summary())
    folder.trials_dir.write_text("x")
    with pytest.raises(UserError, match=r"/trials: is not a folder"):
        folder.check_trials(folder.summary())


def test_writes_never_follow_a_planted_link(tmp_path: Path) -> None:
    folder = folder_with_run(tmp_path)
    victim = tmp_path / "victim.json"  # someone's file, which reads as a summary
    precious = json.dumps({"format_version": FORMAT_VERSION, "trials": []})
    victim.write_text(precious)
    folder.summary_file.symlink_to(victim)
    folder.trials_dir.mkdir()
    os.symlink(tmp_path, folder.trial_dir("t0"))
    folder.add_entry(EchoEntry.model_validate(measured()), {})
    folder.new_trial("t0")
    folder.write_trial("t0", [], meta("t0"))
    assert victim.read_text() == precious and not (tmp_path / "metadata.json").exists()
    assert not folder.summary_file.is_symlink() and not folder.trial_dir("t0").is_symlink()
    assert folder.summary().trials[0].trial == "t0"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner,
                                                               max_size=4),
    max_leaves=12,
)  # fmt: skip
KEYS = st.sampled_from(sorted(measured("graph", e2e_us={}, paths=[], topics=[], facetrack={})))


@settings(max_examples=150, deadline=None)
@given(
    workload=st.sampled_from(["echo", "chain", "graph", "facetrack", "?"]),
    changes=st.dictionaries(KEYS, JSON, max_size=4),
    drop=st.lists(KEYS, max_size=3),
)
def test_fuzzed_entries_are_read_or_refused_clearly(
    workload: str, changes: dict[str, Any], drop: list[str]
) -> None:
    entry = {**measured(workload), **changes}
    for key in drop:
        entry.pop(key, None)
    try:
        parsed = parse_entry(Path("s.json"), 0, entry)
    except UserError as e:
        assert str(e).startswith("s.json: trials[0]")
    else:
        assert parsed.trial == entry["trial"]


def test_host_facts_of_several_real_machines_are_kept_joined(tmp_path: Path) -> None:
    """lab/remote.py joins the facts of a trial's machines as text: "4+8" cores."""
    joined = {"hostname": "laptop+robot", "cores": "4+8", "cpu_quota": "max+max"}
    folder = folder_with_run(tmp_path)
    folder.write_trial("t0", [], meta("t0", host=joined))
    assert folder.metadata("t0").host.cores == "4+8"


RUN_KEYS = st.sampled_from(["format_version", "spec_name", "spec", "command", "host",
                            "backends", "packages", "created_unix_s", "x"])  # fmt: skip
META_KEYS = st.sampled_from(["format_version", "params", "host", "nodes", "usage", "clocks",
                             "replayed", "error", "start", "env"])  # fmt: skip


@settings(max_examples=100, deadline=None)
@given(run=st.dictionaries(RUN_KEYS, JSON, max_size=5),
       meta=st.dictionaries(META_KEYS, JSON, max_size=5),
       text=st.text(max_size=30))  # fmt: skip
def test_fuzzed_run_and_metadata_files_are_read_or_refused_clearly(
    tmp_path_factory: pytest.TempPathFactory,
    run: dict[str, Any],
    meta: dict[str, Any],
    text: str,
) -> None:
    folder = ResultsFolder(tmp_path_factory.mktemp("fuzz"))
    for doc in ({**run, "format_version": 2}, run, text):
        folder.run_file.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        try:
            folder.run()
        except UserError as e:
            assert str(e).startswith(str(folder.run_file))
    folder.trial_dir("t").mkdir(parents=True, exist_ok=True)
    good = {"format_version": 2, "params": trial_params(trial="t"), "host": {}}
    for doc in ({**good, **meta}, meta):
        (folder.trial_dir("t") / "metadata.json").write_text(json.dumps(doc))
        try:
            folder.metadata("t")
        except UserError as e:
            assert "metadata.json" in str(e)
