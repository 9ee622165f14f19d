from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from tests.conftest import trial_params

from roboscale.errors import UserError
from roboscale.records.schema import RECORD_COLUMNS
from roboscale.records.store import (
    append_summary,
    read_metadata,
    read_records,
    read_run,
    read_summary,
    records_table,
    write_json,
    write_trial,
)


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


def test_records_round_trip_with_loss_as_null(tmp_path: Path) -> None:
    table = records_table("t0", "sender_0", "local", 11, cols(4))
    meta = {"format_version": 1, "params": trial_params(trial="t0"), "host": {}}
    write_trial(tmp_path, "t0", [table], meta)
    back = read_records(tmp_path, "t0")
    assert tuple(back.column_names) == RECORD_COLUMNS
    d = back.to_pydict()
    assert d["t_received"] == [1500, None, 3500, 4500]
    assert d["t_echoed"] == [1200, None, 3200, 4200]
    assert d["bytes"] == [11] * 4
    assert d["node"] == ["sender_0"] * 4
    assert read_metadata(tmp_path, "t0")["params"] == trial_params(trial="t0")


def test_failed_trial_has_empty_records(tmp_path: Path) -> None:
    write_trial(tmp_path, "t1", [], {"error": "boom"})
    assert read_records(tmp_path, "t1").num_rows == 0


def test_summary_append_replaces_same_trial(tmp_path: Path) -> None:
    write_json(tmp_path / "run.json", {"format_version": 1, "spec_name": "t", "spec": ""})
    for trial, x in (("a", 1), ("b", 2), ("a", 3)):
        entry = trial_params(trial=trial, error="failed", x=x)
        append_summary(tmp_path, entry, {"max_loss": 0.01})
    summary = read_summary(tmp_path)
    assert [(t["trial"], t["x"]) for t in summary["trials"]] == [("b", 2), ("a", 3)]
    assert summary["thresholds"] == {"max_loss": 0.01}


def test_unknown_format_version_refused(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text(json.dumps({"format_version": 99}))
    with pytest.raises(UserError, match=r"run.json: format_version: 99 is not supported"):
        read_run(tmp_path)


def test_not_a_results_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a roboscale results directory"):
        read_run(tmp_path)
    with pytest.raises(UserError, match="no such results directory"):
        read_run(tmp_path / "missing")


def test_corrupt_json_names_line(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text('{\n  "format_version": 1,\n  oops\n}')
    with pytest.raises(UserError, match=r"run.json:3: not valid JSON"):
        read_run(tmp_path)
