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
    RECORDS_FILE,
    RUN_FILE,
    SUMMARY_FILE,
    SUPPORTED_FORMAT_VERSIONS,
    TRIALS_DIR,
)

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


def read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: not valid JSON: {e.msg}") from None


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
    return pq.read_table(trial_dir(run_dir, trial_id) / RECORDS_FILE)


def read_metadata(run_dir: Path, trial_id: str) -> dict[str, Any]:
    meta: dict[str, Any] = read_json(trial_dir(run_dir, trial_id) / METADATA_FILE)
    return meta


def check_format(path: Path, data: dict[str, Any]) -> None:
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
    if not run_dir.is_dir():
        raise UserError(f"{run_dir}: no such results directory")
    path = run_dir / RUN_FILE
    if not path.exists():
        raise UserError(f"{path}: missing; {run_dir} is not a roboscale results directory")
    run: dict[str, Any] = read_json(path)
    check_format(path, run)
    return run


def read_summary(run_dir: Path) -> dict[str, Any]:
    read_run(run_dir)
    path = run_dir / SUMMARY_FILE
    if not path.exists():
        return {"format_version": FORMAT_VERSION, "thresholds": None, "trials": []}
    summary: dict[str, Any] = read_json(path)
    check_format(path, summary)
    return summary


def append_summary(run_dir: Path, entry: dict[str, Any], thresholds: dict[str, Any]) -> None:
    """Add one finished trial; the file is rewritten atomically after every trial."""
    path = run_dir / SUMMARY_FILE
    summary = read_json(path) if path.exists() else {"trials": []}
    summary["format_version"] = FORMAT_VERSION
    summary["thresholds"] = thresholds
    summary["trials"] = [t for t in summary["trials"] if t["trial"] != entry["trial"]] + [entry]
    write_json(path, summary)
