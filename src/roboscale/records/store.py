"""Reading and writing results folders: records as Parquet, metadata and summary as JSON."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from roboscale.errors import UserError
from roboscale.records.schema import (
    FORMAT_VERSION,
    METADATA_FILE,
    RECORD_COLUMNS,
    RECORDS_FILE,
    RUN_FILE,
    SUMMARY_FILE,
    SUPPORTED_FORMAT_VERSIONS,
    TRIALS_DIR,
)
from roboscale.records.validate import RunFile, TrialMetadata, check, check_summary
from roboscale.yamlfile import check_regular, read_text

_COLUMNS = ", ".join(RECORD_COLUMNS)
MAX_JSON_BYTES = 1 << 30  # a summary of 100,000 trials is a few hundred MB
RECORD_SCHEMA = pa.schema(
    [
        ("trial", pa.string()),
        ("node", pa.string()),
        ("host", pa.string()),
        ("seq", pa.int64()),
        ("bytes", pa.int64()),
        ("t_intended", pa.int64()),
        ("t_sent", pa.int64()),
        ("t_echoed", pa.int64()),
        ("t_received", pa.int64()),
    ]
)


def write_json(path: Path, data: Any) -> None:
    """Write atomically so a crash never leaves half a JSON file behind."""
    tmp = path.with_name(path.name + ".part")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)


def read_json(path: Path, what: str = "results file") -> Any:
    """A JSON file of a results folder or a model, read without blocking and bounded."""
    text = read_text(path, what, MAX_JSON_BYTES)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None
    except (RecursionError, ValueError) as e:  # nested too deeply; a number of 5000 digits
        raise UserError(f"{path}: not valid JSON: {str(e) or 'nested too deeply'}") from None


def records_table(
    trial: str,
    node: str,
    host: str,
    payload_bytes: int,
    columns: dict[str, np.ndarray[Any, np.dtype[np.int64]]],
) -> pa.Table:
    """Build a record table; zeros in t_echoed/t_received mean 'never arrived' (null)."""
    n = len(columns["seq"])

    def nullable(name: str) -> pa.Array:
        values = columns[name]
        return pa.array(values, type=pa.int64(), mask=values == 0)

    return pa.table(
        {
            "trial": pa.array([trial] * n, pa.string()),
            "node": pa.array([node] * n, pa.string()),
            "host": pa.array([host] * n, pa.string()),
            "seq": pa.array(columns["seq"], pa.int64()),
            "bytes": pa.array(np.full(n, payload_bytes, dtype=np.int64), pa.int64()),
            "t_intended": pa.array(columns["t_intended"], pa.int64()),
            "t_sent": pa.array(columns["t_sent"], pa.int64()),
            "t_echoed": nullable("t_echoed"),
            "t_received": nullable("t_received"),
        },
        schema=RECORD_SCHEMA,
    )


def trial_dir(run_dir: Path, trial_id: str) -> Path:
    return run_dir / TRIALS_DIR / trial_id


def write_trial(run_dir: Path, trial_id: str, tables: Sequence[pa.Table], meta: Any) -> Path:
    out = trial_dir(run_dir, trial_id)
    out.mkdir(parents=True, exist_ok=True)
    table = pa.concat_tables(tables) if tables else RECORD_SCHEMA.empty_table()
    tmp = out / (RECORDS_FILE + ".part")
    pq.write_table(table, tmp)
    os.replace(tmp, out / RECORDS_FILE)
    write_json(out / METADATA_FILE, meta)
    return out


def read_records(run_dir: Path, trial_id: str) -> pa.Table:
    """A trial's records, refusing a truncated file or one of another schema."""
    path = trial_dir(run_dir, trial_id) / RECORDS_FILE
    check_regular(path, "records file")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise UserError(
            f"{path}: not a readable Parquet file ({str(e).splitlines()[0][:200]})",
            hint="the trial's records are damaged; rerun it (bench --resume reruns what is "
            "missing once the folder is deleted)",
        ) from None
    for want in RECORD_SCHEMA:
        if want.name not in table.schema.names:
            raise UserError(f"{path}: column {want.name!r} is missing; allowed: {_COLUMNS}")
        got = table.schema.field(want.name).type
        if got != want.type:
            raise UserError(f"{path}: column {want.name!r} is {got}, allowed: {want.type}")
    return table.select(RECORD_SCHEMA.names)


def read_metadata(run_dir: Path, trial_id: str) -> dict[str, Any]:
    path = trial_dir(run_dir, trial_id) / METADATA_FILE
    meta = read_json(path)
    check_format(path, meta)
    return check(path, TrialMetadata, meta)


def check_format(path: Path, data: Any) -> None:
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a JSON object, got {type(data).__name__}")
    version = data.get("format_version")
    if version not in SUPPORTED_FORMAT_VERSIONS:
        allowed = ", ".join(str(v) for v in sorted(SUPPORTED_FORMAT_VERSIONS))
        raise UserError(
            f"{path}: format_version: {version!r} is not supported by this roboscale "
            f"(supported: {allowed})",
            hint="use the roboscale version that wrote these results, or rerun the experiment",
        )


def read_run(run_dir: Path) -> dict[str, Any]:
    """Read run.json, refusing results of an unknown format version."""
    if not run_dir.exists():
        raise UserError(f"{run_dir}: no such results directory")
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: is a file; allowed: a results folder of `roboscale bench`")
    path = run_dir / RUN_FILE
    if not path.exists():
        raise UserError(f"{path}: missing; {run_dir} is not a roboscale results directory")
    run = read_json(path)
    check_format(path, run)
    return check(path, RunFile, run)


def read_summary(run_dir: Path) -> dict[str, Any]:
    read_run(run_dir)
    path = run_dir / SUMMARY_FILE
    if not path.exists():
        return {"format_version": FORMAT_VERSION, "thresholds": None, "trials": []}
    summary = read_json(path)
    check_format(path, summary)
    return check_summary(path, summary)


def append_summary(run_dir: Path, entry: dict[str, Any], thresholds: dict[str, Any]) -> None:
    """Add one finished trial; the file is rewritten atomically after every trial."""
    path = run_dir / SUMMARY_FILE
    summary = read_json(path) if path.exists() else {"trials": []}
    summary["format_version"] = FORMAT_VERSION
    summary["thresholds"] = thresholds
    summary["trials"] = [t for t in summary["trials"] if t["trial"] != entry["trial"]] + [entry]
    write_json(path, summary)
