from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.conftest import trial_params

from roboscale.capacity import data
from roboscale.capacity.data import Observation
from roboscale.errors import UserError

Make = Callable[..., list[Observation]]


def test_load_reads_observations(
    tmp_path: Path, make_trials: Make, truth: type, results_folder: Callable[..., Path]
) -> None:
    obs = make_trials(truth(), sizes=(4250,), rates=(10.0,), nodes=(2, 4))
    folder = results_folder(tmp_path / "r1", obs)
    loaded = data.load([folder])
    assert [o.trial for o in loaded] == [o.trial for o in obs]
    first = loaded[0]
    assert first.nodes == 2 * first.pairs and first.source == str(folder)
    assert first.cpu_ready_s == pytest.approx(obs[0].cpu_ready_s)
    assert first.config == (4250, 10.0, False)


def test_mixed_hosts_are_refused_naming_folders_and_values(
    tmp_path: Path, make_trials: Make, truth: type, results_folder: Callable[..., Path]
) -> None:
    obs = make_trials(truth(), sizes=(11,), rates=(10.0,), nodes=(2,))
    a = results_folder(tmp_path / "pi", obs, host={"hostname": "pi", "cores": 4})
    b = results_folder(tmp_path / "nuc", obs, host={"hostname": "nuc", "cores": 8})
    with pytest.raises(UserError) as err:
        data.load([a, b])
    text = str(err.value)
    assert "several host setups" in text
    assert "hostname=pi" in text and "hostname=nuc" in text
    assert str(a) in text and str(b) in text


def test_mixed_backends_are_refused_unless_one_is_chosen(
    tmp_path: Path, make_trials: Make, truth: type, results_folder: Callable[..., Path]
) -> None:
    ros = make_trials(truth(), sizes=(11,), rates=(10.0,), nodes=(2,), backend="ros1")
    zen = make_trials(truth(), sizes=(11,), rates=(10.0,), nodes=(2,), backend="zenoh")
    a = results_folder(tmp_path / "a", ros)
    b = results_folder(tmp_path / "b", zen)
    with pytest.raises(UserError, match=r"several backends:\n  ros1: .*a\n  zenoh: .*b"):
        data.load([a, b])
    assert {o.backend for o in data.load([a, b], backend="zenoh")} == {"zenoh"}
    with pytest.raises(UserError, match="no trials of 'dds'"):
        data.load([a, b], backend="dds")


def test_malformed_summary_names_file_and_field(
    tmp_path: Path, make_trials: Make, truth: type, results_folder: Callable[..., Path]
) -> None:
    obs = make_trials(truth(), sizes=(11,), rates=(10.0,), nodes=(2,))
    folder = results_folder(tmp_path / "r", obs)
    summary = json.loads((folder / "summary.json").read_text())
    summary["trials"][0]["payload_bytes"] = "big"
    (folder / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(UserError) as err:
        data.load([folder])
    assert str(err.value).startswith(
        f"{folder / 'summary.json'}: trials[0].payload_bytes: Input should be a valid integer, "
        "got 'big'"
    )
    del summary["trials"][0]["payload_bytes"]
    (folder / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(UserError, match=r"trials\[0\].payload_bytes: required field is missing"):
        data.load([folder])


def test_failed_trials_count_as_unsustained(
    tmp_path: Path, make_trials: Make, truth: type, results_folder: Callable[..., Path]
) -> None:
    obs = make_trials(truth(), sizes=(11,), rates=(10.0,), nodes=(2,))
    folder = results_folder(tmp_path / "r", obs)
    summary = json.loads((folder / "summary.json").read_text())
    entry = summary["trials"][0]
    summary["trials"][0] = {k: entry[k] for k in trial_params()}
    summary["trials"][0].update(error="node sender_0 did not become READY", sustained=False)
    (folder / "summary.json").write_text(json.dumps(summary))
    (loaded,) = data.load([folder])
    assert loaded.failed and not loaded.sustained and loaded.cpu_s is None


def test_not_a_results_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such results directory"):
        data.load([tmp_path / "missing"])
