"""`ResultsFolder`: the one reader and writer of a results folder's files.

    <run>/run.json                          RunInfo
    <run>/summary.json                      Summary: one entry per finished trial
    <run>/trials/<trial>/metadata.json      TrialMetadata
    <run>/trials/<trial>/records.parquet    one row per measured message (records/schema.py)

A folder may be hand-edited, truncated or come from elsewhere, so every file is
validated when it is read, each summary entry by its workload's own model, and a
broken file is one UserError naming the file, the field and what is allowed. Files
of the previous format version are read (and upgraded); others are refused. Every
write goes through `roboscale.safewrite`: a new file renamed into place, never
through a link planted in the folder.
"""

from __future__ import annotations

import functools
import io
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ValidationError

from roboscale import safewrite
from roboscale.errors import UserError
from roboscale.jsonfile import read_json
from roboscale.records.models import (
    ENTRY_MODELS,
    FailedEntry,
    RunInfo,
    Summary,
    SummaryEntry,
    TrialMetadata,
)
from roboscale.records.schema import (
    FORMAT_VERSION,
    METADATA_FILE,
    READABLE_VERSIONS,
    RECORDS_FILE,
    RUN_FILE,
    RUN_OUTPUTS,
    SUMMARY_FILE,
    TRIALS_DIR,
)
from roboscale.records.store import RECORD_SCHEMA, read_table
from roboscale.yamlfile import check_regular

M = TypeVar("M", bound=BaseModel)
REWRITE_HINT = "this file is not as roboscale wrote it; rerun the experiment, or restore the file"


class ResultsFolder:
    """A results folder of `roboscale bench`, read and written through typed models."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"ResultsFolder({str(self.path)!r})"

    @property
    def run_file(self) -> Path:
        return self.path / RUN_FILE

    @property
    def summary_file(self) -> Path:
        return self.path / SUMMARY_FILE

    @property
    def trials_dir(self) -> Path:
        return self.path / TRIALS_DIR

    def trial_dir(self, trial: str) -> Path:
        return self.trials_dir / trial

    # -- reading ------------------------------------------------------------------------
    def is_results(self) -> bool:
        """Whether the folder holds a run.json (of any content)."""
        return self.run_file.is_file()

    def run(self) -> RunInfo:
        """run.json, refusing a folder that is none and results of an unknown format."""
        if not self.path.exists():
            raise UserError(f"{self.path}: no such results directory")
        if not self.path.is_dir():
            raise UserError(
                f"{self.path}: is a file; allowed: a results folder of `roboscale bench`"
            )
        if not self.run_file.exists():
            raise UserError(
                f"{self.run_file}: missing; {self.path} is not a roboscale results directory"
            )
        return _parse(self.run_file, RunInfo, _read_versioned(self.run_file))

    def summary(self) -> Summary:
        """summary.json (empty before the first trial finished), every entry checked by
        its workload's model."""
        self.run()
        if not self.summary_file.exists():
            return Summary(format_version=FORMAT_VERSION)
        data = _read_versioned(self.summary_file)
        raw = _parse(self.summary_file, _SummaryShape, data)
        entries = [parse_entry(self.summary_file, i, e) for i, e in enumerate(raw.trials)]
        return Summary(format_version=FORMAT_VERSION, thresholds=raw.thresholds, trials=entries)

    def metadata(self, trial: str) -> TrialMetadata:
        path = self.trial_dir(trial) / METADATA_FILE
        return _parse(path, TrialMetadata, _read_versioned(path))

    def has_summary(self) -> bool:
        """Whether a trial has finished here (summary.json is written after the first)."""
        return self.summary_file.exists()

    def has_records(self, trial: str) -> bool:
        return (self.trial_dir(trial) / RECORDS_FILE).exists()

    def records(self, trial: str) -> pa.Table:
        """A trial's records, refusing a truncated file or one of another schema."""
        return read_table(self.trial_dir(trial) / RECORDS_FILE)

    def trials_on_disk(self) -> list[str]:
        """Trials with a metadata.json, in name order; `trials` that is no folder is an
        error (a folder of trials cannot be a file)."""
        folder = self.trials_dir
        if not folder.exists():
            return []
        if folder.is_symlink() or not folder.is_dir():
            raise UserError(
                f"{folder}: is not a folder; allowed: a folder holding one folder per trial",
                hint=REWRITE_HINT,
            )
        return sorted(p.parent.name for p in folder.glob(f"*/{METADATA_FILE}"))

    def check_trials(self, summary: Summary) -> list[str]:
        """The trials on disk, after checking every summary entry has its trial folder
        with metadata and every finished trial its records."""
        on_disk = self.trials_on_disk()
        for entry in summary.trials:
            if entry.trial not in on_disk:
                missing = self.trial_dir(entry.trial)
                what = missing / METADATA_FILE if missing.is_dir() else missing
                raise UserError(
                    f"{what}: missing; summary.json lists trial {entry.trial!r}",
                    hint=REWRITE_HINT,
                )
        for trial in on_disk:
            records = self.trial_dir(trial) / RECORDS_FILE
            if not records.exists():
                raise UserError(
                    f"{records}: missing; the trial's metadata.json is there", hint=REWRITE_HINT
                )
            check_regular(records, "records file")
        return on_disk

    # -- writing ------------------------------------------------------------------------
    def write_run(self, run: RunInfo) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        safewrite.write_json(self.run_file, _current(run))

    def new_trial(self, trial: str) -> Path:
        """An empty folder for the trial (its earlier files removed), and its `raw`
        folder for the nodes' files, which is returned."""
        self.trials_dir.mkdir(parents=True, exist_ok=True)
        if self.trials_dir.is_symlink():
            raise UserError(f"{self.trials_dir}: is a link; the tool writes no trial through it")
        out = self.trial_dir(trial)
        if out.is_symlink():
            out.unlink()
        elif out.exists():
            shutil.rmtree(out)
        raw = out / "raw"
        raw.mkdir(parents=True)
        return raw

    def write_trial(self, trial: str, tables: Sequence[pa.Table], meta: TrialMetadata) -> None:
        """The trial's records (none for a failed trial) and its metadata."""
        out = self.trial_dir(trial)
        out.mkdir(parents=True, exist_ok=True)
        table = pa.concat_tables(tables) if tables else RECORD_SCHEMA.empty_table()
        sink = io.BytesIO()
        pq.write_table(table, sink)
        safewrite.write_bytes(out / RECORDS_FILE, sink.getvalue())
        safewrite.write_json(out / METADATA_FILE, _current(meta))

    def add_entry(self, entry: SummaryEntry, thresholds: dict[str, float | None]) -> Summary:
        """Add one finished trial (replacing an earlier entry of the same id); the file is
        rewritten after every trial."""
        summary = self.summary() if self.summary_file.exists() else None
        kept = [e for e in summary.trials if e.trial != entry.trial] if summary else []
        new = Summary(format_version=FORMAT_VERSION, thresholds=thresholds, trials=[*kept, entry])
        self.write_summary(new)
        return new

    def clear(self) -> None:
        """Remove what a run wrote here, and nothing else: a folder holding anything a run
        does not write (a user's notes) is refused before anything is removed."""
        entries = sorted(self.path.iterdir())
        foreign = [p.name for p in entries if not _run_output(p.name)]
        if foreign:
            shown = ", ".join(foreign[:5]) + (", ..." if len(foreign) > 5 else "")
            raise UserError(
                f"{self.path}: holds {shown}, which no roboscale run wrote; a run replaces "
                "only its own results",
                hint="move those files away, or choose another folder with --out",
            )
        for entry in entries:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()

    def write_summary(self, summary: Summary) -> None:
        safewrite.write_json(self.summary_file, _current(summary))

    def copy_summaries(self, dest: Path) -> None:
        """Copy run.json, summary.json (when there is one) and every trial's metadata.json,
        each checked first, as they are (byte for byte) into `dest`, without the records:
        what reproduce keeps as evidence. The folders they go in are made."""
        sources = []
        if self.is_results():
            self.run()
            sources.append(self.run_file)
            if self.has_summary():
                self.summary()
                sources.append(self.summary_file)
        for trial in self.trials_on_disk():
            self.metadata(trial)
            sources.append(self.trial_dir(trial) / METADATA_FILE)
        for source in sources:
            target = dest / source.relative_to(self.path)
            for folder in reversed(target.relative_to(dest).parents):
                made = dest / folder
                if made.is_symlink():
                    raise UserError(f"{made}: is a link; the tool writes nothing through it")
                made.mkdir(exist_ok=True)
            safewrite.write_bytes(target, source.read_bytes())


def _run_output(name: str) -> bool:
    """A name a run writes: its files, or a scratch file of an interrupted write."""
    scratch = name.startswith(".") and (name.endswith(".part") or name == ".write-test")
    return name in RUN_OUTPUTS or scratch


class _SummaryShape(BaseModel):
    """summary.json before its entries are parsed, each by its workload's model."""

    model_config = {"extra": "allow", "strict": True}
    format_version: int
    thresholds: dict[str, float | None] | None = None
    trials: list[dict[str, object]]


def parse_entry(path: Path, index: int, data: Mapping[str, object]) -> SummaryEntry:
    """One summary entry by its own model: a failed trial by its error, a finished one
    by its workload's (a graph trial needs its paths, a face-tracker trial its figures)."""
    where = f"trials[{index}]"
    model: type[BaseModel]
    if data.get("error") is not None:
        model = FailedEntry
    else:
        workload = data.get("workload")
        if workload is None:
            raise UserError(f"{path}: {where}.workload: required field is missing")
        if not isinstance(workload, str) or workload not in ENTRY_MODELS:
            raise UserError(
                f"{path}: {where}.workload: {workload!r} is not a workload of this roboscale; "
                f"allowed: {', '.join(ENTRY_MODELS)}",
                hint=REWRITE_HINT,
            )
        model = ENTRY_MODELS[workload]
    entry: SummaryEntry = _parse(path, model, data, where)  # type: ignore[assignment]
    return entry


def _current(model: BaseModel) -> dict[str, object]:
    """A model as the current format writes it."""
    data = model.model_dump()
    if "format_version" in data:
        data["format_version"] = FORMAT_VERSION
    return data


def _read_versioned(path: Path) -> dict[str, object]:
    """A JSON object of this format version or the previous one (upgraded on reading)."""
    data = read_json(path, "results file")
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a JSON object, got {type(data).__name__}")
    version = data.get("format_version")
    if (
        not isinstance(version, int)
        or isinstance(version, bool)
        or (version not in READABLE_VERSIONS)
    ):
        allowed = ", ".join(str(v) for v in sorted(READABLE_VERSIONS))
        newer = isinstance(version, int) and version > FORMAT_VERSION
        raise UserError(
            f"{path}: format_version: {version!r} is not supported by this roboscale "
            f"(supported: {allowed})",
            hint="results of a newer roboscale: upgrade roboscale to read them"
            if newer
            else "use the roboscale version that wrote these results, or rerun the experiment",
        )
    # Version 1 lacks what version 2 added (run.packages, metadata.replayed): read as
    # absent. Nothing was renamed, so the fields are taken as they are.
    return data


@functools.cache
def _model_names() -> frozenset[str]:
    found: set[str] = set()
    pending: list[type] = [BaseModel]
    while pending:
        cls = pending.pop()
        found.add(cls.__name__)
        pending += cls.__subclasses__()
    return frozenset(found)


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _parse(path: Path, model: type[M], data: object, prefix: str = "") -> M:
    """`data` as `model`, or a UserError naming the file and the first wrong field."""
    if not isinstance(data, dict):
        raise UserError(f"{path}: {prefix + ': ' if prefix else ''}must be a JSON object")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        first = e.errors()[0]
        # A union's member is named in the location by its model's name: left out.
        loc = tuple(p for p in first["loc"] if p not in _model_names())
        field = _where(((prefix,) if prefix else ()) + loc)
        missing = first["type"] == "missing"
        problem = "required field is missing" if missing else str(first["msg"])
        given = "" if missing else f", got {first.get('input')!r}"[:120]
        more = len(e.errors()) - 1
        also = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise UserError(f"{path}: {field}: {problem}{given}{also}", hint=REWRITE_HINT) from None
