"""The evidence behind every figure of docs/reproduction.md: for each run of each
experiment, its summaries (run.json, summary.json, each trial's metadata.json; never raw
records) and how the run was taken (reproduce.json), under
`<evidence>/<experiment>/run-<k>/`. One class reads and writes this layout."""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from roboscale import safewrite
from roboscale.errors import UserError
from roboscale.records.folder import ResultsFolder
from roboscale.reproduce.model import RunRecord

RECORD_FILE = "reproduce.json"
MAX_RUNS = 100


@dataclass(frozen=True)
class Run:
    """One run of an experiment as kept: how it was taken, and its trials' entries."""

    record: RunRecord
    entries: Sequence[Mapping[str, Any]]


class Evidence:
    """The folder of kept summaries (docs/reproduction/)."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def run_dir(self, experiment: str, run: int) -> Path:
        return self.root / experiment / f"run-{run}"

    def clear(self, experiment: str) -> None:
        """Forget an experiment's kept runs before it is run again."""
        folder = self.root / experiment
        if folder.is_symlink():
            raise UserError(f"{folder}: is a symbolic link; allowed: a folder of kept runs")
        if folder.exists():
            shutil.rmtree(folder)

    def keep(self, results: Path, record: RunRecord) -> Path:
        """Copy one results folder's summaries and the run record into the evidence."""
        out = self.run_dir(record.experiment, record.run)
        for folder in (self.root, out.parent, out, out / "trials"):
            if folder.is_symlink():
                raise UserError(f"{folder}: is a symbolic link; allowed: a folder")
            folder.mkdir(exist_ok=True)
        ResultsFolder(results).copy_summaries(out)
        safewrite.write_text(out / RECORD_FILE, record.model_dump_json(indent=2) + "\n")
        return out

    def experiments(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name for p in self.root.iterdir() if p.is_dir())

    def runs(self, experiment: str) -> list[Run]:
        """The kept runs of an experiment, by run number."""
        folder = self.root / experiment
        dirs = sorted(folder.glob("run-*"), key=lambda p: _run_number(p))
        return [self._read(d) for d in dirs[:MAX_RUNS]]

    def _read(self, folder: Path) -> Run:
        path = folder / RECORD_FILE
        try:
            record = RunRecord.model_validate_json(path.read_bytes())
        except OSError as e:
            raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top)"
            raise UserError(f"{path}: {where}: {first['msg']}") from None
        kept = ResultsFolder(folder)
        if not kept.has_summary():
            return Run(record, [])
        trials = kept.summary().trials
        return Run(record, [entry.model_dump(mode="json") for entry in trials])


def _run_number(path: Path) -> int:
    try:
        return int(path.name.removeprefix("run-"))
    except ValueError:
        raise UserError(f"{path}: allowed: run-<number>") from None
