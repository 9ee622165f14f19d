"""Results folders as tables, for analysis in notebooks: `roboscale.results.load(DIR)`.

    >>> from roboscale import results
    >>> run = results.load("results/demo")
    >>> run.summary.to_pandas()            # one row per trial, nested figures as "rtt_us.p50"
    >>> run.records().to_pandas()          # one row per message per measuring node
    >>> frames = run.to_pandas()           # every table as a pandas DataFrame

Tables are pyarrow Tables (pandas-friendly: `.to_pandas()` when pandas is installed,
`polars.from_arrow`, DuckDB). Everything is read through the same checks as
`roboscale report`: an unknown format version, a missing or malformed file is a
UserError naming the file. Records are read when asked for, trial by trial.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from roboscale.errors import UserError
from roboscale.records.schema import METADATA_FILE, RECORDS_FILE, TRIALS_DIR
from roboscale.records.store import (
    RECORD_SCHEMA,
    read_metadata,
    read_records,
    read_run,
    read_summary,
    trial_dir,
)

TABLES = ("summary", "per_node", "metadata", "nodes", "records")


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested mappings as dotted columns ({"rtt_us": {"p50": 1}} -> {"rtt_us.p50": 1});
    lists stay whole (pyarrow makes them list columns)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def _table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows with possibly different keys as one table (a missing key is null)."""
    flat = [flatten(r) for r in rows]
    names = list(dict.fromkeys(k for row in flat for k in row))
    return pa.Table.from_pylist([{k: row.get(k) for k in names} for row in flat])


class Results:
    """One results folder: its run, and its trials' summary, metadata and records."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.run: dict[str, Any] = read_run(path)
        summary = read_summary(path)
        self.thresholds: dict[str, Any] | None = summary.get("thresholds")
        self.entries: list[dict[str, Any]] = summary["trials"]
        self.trials: list[str] = _trials(path, self.entries)
        self.metadata_of: dict[str, dict[str, Any]] = {
            trial: read_metadata(path, trial) for trial in self.trials
        }

    @property
    def summary(self) -> pa.Table:
        """One row per summary entry: parameters, counts, figures (`rtt_us.p50`, ...),
        the verdict and `usage`; each listener's or hop's figures are in `per_node`."""
        return _table({k: v for k, v in e.items() if k != "per_node"} for e in self.entries)

    @property
    def per_node(self) -> pa.Table:
        """One row per measuring node of one-way trials (fanout, ping, chain)."""
        return _table(
            {"trial": e["trial"], **node} for e in self.entries for node in e.get("per_node", [])
        )

    @property
    def metadata(self) -> pa.Table:
        """One row per trial: parameters, host facts, environment, usage, error."""
        return _table(
            {"trial": trial, **{k: v for k, v in meta.items() if k != "nodes"}}
            for trial, meta in self.metadata_of.items()
        )

    @property
    def nodes(self) -> pa.Table:
        """One row per node of every trial: role, host, pid, counters, CPU and memory."""
        return _table(
            {"trial": trial, **node}
            for trial, meta in self.metadata_of.items()
            for node in meta.get("nodes", [])
        )

    def records(self, trial: str | None = None) -> pa.Table:
        """The records of one trial, or of every trial, one row per message per measuring
        node (columns: records/schema.py; times in ns of CLOCK_MONOTONIC, null = lost)."""
        if trial is not None and trial not in self.metadata_of:
            known = ", ".join(self.trials) or "none"
            raise UserError(f"{self.path}: no trial {trial!r}; trials: {known}")
        chosen = [trial] if trial is not None else self.trials
        tables = [read_records(self.path, t) for t in chosen]
        return pa.concat_tables(tables) if tables else RECORD_SCHEMA.empty_table()

    def to_pandas(self) -> dict[str, Any]:
        """Every table (`TABLES`) as a pandas DataFrame, records of all trials included."""
        if importlib.util.find_spec("pandas") is None:
            raise UserError(
                "pandas is not installed: the tables are pyarrow Tables",
                hint="pip install pandas (or roboscale[notebook]), or use them with pyarrow, "
                "polars.from_arrow or DuckDB",
            )
        tables = {name: getattr(self, name) for name in TABLES if name != "records"}
        tables["records"] = self.records()
        return {name: table.to_pandas() for name, table in tables.items()}


def _trials(path: Path, entries: list[dict[str, Any]]) -> list[str]:
    """Trials with files on disk, in order; a summary entry without its files is an error."""
    folder = path / TRIALS_DIR
    on_disk = sorted(p.parent.name for p in folder.glob(f"*/{METADATA_FILE}"))
    for entry in entries:
        if entry["trial"] not in on_disk:
            missing = trial_dir(path, entry["trial"]) / METADATA_FILE
            raise UserError(f"{missing}: missing; summary.json lists trial {entry['trial']!r}")
    for trial in on_disk:
        records = trial_dir(path, trial) / RECORDS_FILE
        if not records.exists():
            raise UserError(f"{records}: missing; the trial's metadata.json is there")
    return on_disk


def load(path: str | Path) -> Results:
    """Read a results folder (`roboscale bench --out DIR`): its run.json, summary.json and
    every trial's metadata now, records on demand. Raises UserError naming the file for an
    unknown format version, a missing or a malformed file."""
    return Results(Path(path))
