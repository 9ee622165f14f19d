"""Results folders as tables, for analysis in notebooks: `roboscale.results.load(DIR)`.

    >>> from roboscale import results
    >>> run = results.load("results/demo")
    >>> run.summary.to_pandas()            # one row per trial, nested figures as "rtt_us.p50"
    >>> run.records().to_pandas()          # one row per message per measuring node
    >>> frames = run.to_pandas()           # every table as a pandas DataFrame

Tables are pyarrow Tables (`.to_pandas()`: pandas is installed with roboscale;
`polars.from_arrow`, DuckDB). Everything is read through the same checks as
`roboscale report`: an unknown format version, a missing or malformed file is a
UserError naming the file. Records are read when asked for, trial by trial.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from roboscale.errors import UserError
from roboscale.records.folder import ResultsFolder
from roboscale.records.models import (
    FailedEntry,
    OneWayEntry,
    RunInfo,
    SummaryEntry,
    TrialMetadata,
)
from roboscale.records.store import RECORD_SCHEMA

if TYPE_CHECKING:
    import pandas as pd

TABLES = ("summary", "per_node", "metadata", "nodes", "records")


def flatten(data: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """Nested mappings as dotted columns ({"rtt_us": {"p50": 1}} -> {"rtt_us.p50": 1});
    lists stay whole (pyarrow makes them list columns)."""
    out: dict[str, object] = {}
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
    """One results folder: its run, and its trials' summary, metadata and records.

    `run` (RunInfo), `entries` (one typed summary entry per trial) and `metadata_of`
    (trial -> TrialMetadata) are the folder's own models; the properties are tables."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.folder = ResultsFolder(path)
        self.run: RunInfo = self.folder.run()
        summary = self.folder.summary()
        self.thresholds = summary.thresholds
        self.entries: list[SummaryEntry] = list(summary.trials)
        self.trials: list[str] = self.folder.check_trials(summary)
        self.metadata_of: dict[str, TrialMetadata] = {
            trial: self.folder.metadata(trial) for trial in self.trials
        }

    def __repr__(self) -> str:
        failed = sum(isinstance(e, FailedEntry) for e in self.entries)
        held = sum(bool(e.sustained) for e in self.entries)
        backends = ", ".join(sorted({e.backend for e in self.entries})) or "none"
        workloads = ", ".join(sorted({e.workload for e in self.entries})) or "none"
        return (
            f"<roboscale results {str(self.path)!r}: experiment {self.run.spec_name!r}, "
            f"{len(self.entries)} trials ({held} sustained, {failed} failed), "
            f"backends {backends}, workloads {workloads}; tables: {', '.join(TABLES)}>"
        )

    @property
    def summary(self) -> pa.Table:
        """One row per summary entry: parameters, counts, figures (`rtt_us.p50`, ...),
        the verdict and `usage`; each listener's or hop's figures are in `per_node`."""
        return _table(e.model_dump(exclude={"per_node"}) for e in self.entries)

    @property
    def per_node(self) -> pa.Table:
        """One row per measuring node of one-way trials (fanout, ping, chain)."""
        return _table(
            {"trial": e.trial, **node.to_dict()}
            for e in self.entries
            if isinstance(e, OneWayEntry)
            for node in e.per_node
        )

    @property
    def metadata(self) -> pa.Table:
        """One row per trial: parameters, host facts, environment, usage, error."""
        return _table(
            {"trial": trial, **meta.model_dump(exclude={"nodes"})}
            for trial, meta in self.metadata_of.items()
        )

    @property
    def nodes(self) -> pa.Table:
        """One row per node of every trial: role, host, pid, counters, CPU and memory."""
        return _table(
            {"trial": trial, **node.to_dict()}
            for trial, meta in self.metadata_of.items()
            for node in meta.nodes
        )

    def records(self, trial: str | None = None) -> pa.Table:
        """The records of one trial, or of every trial, one row per message per measuring
        node (columns: records/schema.py; times in ns of CLOCK_MONOTONIC, null = lost)."""
        if trial is not None and trial not in self.metadata_of:
            known = ", ".join(self.trials) or "none"
            raise UserError(f"{self.path}: no trial {trial!r}; trials: {known}")
        chosen = [trial] if trial is not None else self.trials
        tables = [self.folder.records(t) for t in chosen]
        return pa.concat_tables(tables) if tables else RECORD_SCHEMA.empty_table()

    def to_pandas(self) -> dict[str, pd.DataFrame]:
        """Every table (`TABLES`) as a pandas DataFrame, records of all trials included."""
        tables = {name: getattr(self, name) for name in TABLES if name != "records"}
        tables["records"] = self.records()
        return {name: table.to_pandas() for name, table in tables.items()}


def load(path: str | Path) -> Results:
    """Read a results folder (`roboscale bench --out DIR`): its run.json, summary.json and
    every trial's metadata now, records on demand. Raises UserError naming the file for an
    unknown format version, a missing or a malformed file."""
    return Results(Path(path))
