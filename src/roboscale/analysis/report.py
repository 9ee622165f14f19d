"""`roboscale report DIR`: a self-contained report.html (plots embedded) and summary.md.

Rendered from what is on disk only, so a run cut short by Ctrl-C or a crash
renders from its finished trials; a trial whose records were written but whose
summary entry was not (a crash in between) is summarized again from its files.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import NamedTuple

import pyarrow as pa

from roboscale.analysis import interactive
from roboscale.analysis.headline import Headline, headline, markdown
from roboscale.analysis.page import Figure, Page, Shown, facts, page_html, verdict_rows
from roboscale.analysis.plots import RecordsOf
from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.tables import to_markdown
from roboscale.analysis.verdict import Thresholds
from roboscale.errors import UserError
from roboscale.records.folder import ResultsFolder
from roboscale.records.models import FailedEntry, NodeHeader, Summary, SummaryEntry
from roboscale.safewrite import write_text
from roboscale.workloads.base import (
    FigureSpec,
    TableSpec,
    get_workload,
    known_workloads,
    name_of,
)


def by_workload(entries: list[SummaryEntry]) -> dict[str, list[SummaryEntry]]:
    """Entries grouped by workload, in the registry's order."""
    groups = {name: [e for e in entries if name_of(e) == name] for name in known_workloads()}
    return {name: group for name, group in groups.items() if group}


def _figure_specs(
    groups: dict[str, list[SummaryEntry]],
) -> list[tuple[FigureSpec, list[SummaryEntry]]]:
    """Each workload's figures with its entries; workloads naming one figure share it."""
    out: dict[str, tuple[FigureSpec, list[SummaryEntry]]] = {}
    for name, group in groups.items():
        for spec in get_workload(name).figures():
            out.setdefault(spec.title, (spec, []))[1].extend(group)
    return list(out.values())


def _tables(groups: dict[str, list[SummaryEntry]]) -> tuple[list[Shown], int]:
    """Each workload's tables over its entries, those shown before the figures first, and
    how many these are; tables with nothing to show are left out."""
    out: dict[str, tuple[TableSpec, list[SummaryEntry]]] = {}
    for name, group in groups.items():
        for spec in get_workload(name).tables():
            out.setdefault(spec.title, (spec, []))[1].extend(group)
    specs = sorted(out.values(), key=lambda sg: not sg[0].lead)
    built = [(spec, spec.build(group)) for spec, group in specs]
    shown = [(spec, table) for spec, table in built if table is not None]
    return [(s.title, table, s.caption) for s, table in shown], sum(s.lead for s, _ in shown)


class Rendered(NamedTuple):
    html: Path
    md: Path
    headline: Headline


def render_report(run_dir: Path) -> tuple[Path, Path]:
    """Write report.html and summary.md; their paths."""
    done = render(run_dir)
    return done.html, done.md


def render(run_dir: Path) -> Rendered:
    """Write report.html and summary.md; their paths and the headline."""
    folder = ResultsFolder(run_dir)
    run = folder.run()
    summary = folder.summary()
    th = Thresholds.from_dict(summary.thresholds, str(folder.summary_file))
    folder.check_trials(summary)
    entries = _with_recovered(folder, summary, th)
    _check_workloads(folder.summary_file, entries)
    # Bounded: a thousand trials of records do not fit in memory at once.
    records_of = functools.lru_cache(maxsize=32)(functools.partial(_records, folder))
    groups = by_workload(entries)
    quick = "--quick" in run.command
    head = headline(entries, records_of, quick)
    figures = _figures(groups, records_of)
    usage = interactive.usage_by_node(entries, functools.partial(_nodes, folder))
    if usage is not None:
        figures.append(("CPU and memory per node", USAGE_CAPTION, usage))
    tables, leading = _tables(groups)
    tables += _clock_table(entries)
    html = run_dir / "report.html"
    md = run_dir / "summary.md"
    page = Page(run, th, entries, head, figures, tables, leading)
    try:
        write_text(html, page_html(page))
        write_text(md, _markdown(page))
    except OSError as e:
        raise UserError(f"{run_dir}: cannot write the report ({e.strerror or e})") from None
    return Rendered(html, md, head)


USAGE_CAPTION = (
    "Per node of each trial: CPU time after the nodes were ready over the trial's length "
    "(100 % = one core), and peak resident memory. Nodes sharing a process (native) show the "
    "process's figures each."
)


def _nodes(folder: ResultsFolder, trial: str) -> list[NodeHeader]:
    """Each node's header of a trial (its CPU and memory), none where the trial left no
    records."""
    if not folder.has_records(trial):
        return []
    return folder.metadata(trial).nodes


def _clock_table(entries: list[SummaryEntry]) -> list[Shown]:
    """Trials on real machines: how far their one-way figures can be off (the clocks'
    error bound, measured before and after each trial), and whether that is within the
    spec's env.clock_max_bound_us."""
    rows = [
        [
            e.trial,
            f"{e.clock.bound_us:.0f}",
            f"{e.clock.max_bound_us:.0f}",
            "valid" if e.clock.valid else "invalid",
        ]
        for e in entries
        if not isinstance(e, FailedEntry) and e.clock is not None
    ]
    head = ["trial", "one-way error bound (µs)", "allowed (µs)", "one-way figures"]
    return [("Clocks of real machines", (head, rows), "")] if rows else []


def _check_workloads(path: Path, entries: list[SummaryEntry]) -> None:
    """A trial of a workload this roboscale does not know would be left out: refused."""
    known = known_workloads()
    for i, entry in enumerate(entries):
        if name_of(entry) not in known:
            raise UserError(
                f"{path}: trials[{i}].workload: {name_of(entry)!r} is not a workload of this "
                f"roboscale; allowed: {', '.join(known)}"
            )


def _records(folder: ResultsFolder, trial: str) -> pa.Table | None:
    return folder.records(trial) if folder.has_records(trial) else None


def _with_recovered(folder: ResultsFolder, summary: Summary, th: Thresholds) -> list[SummaryEntry]:
    """Summary entries, plus trials whose files exist but whose entry was never appended
    (then written back to summary.json)."""
    known = {e.trial for e in summary.trials}
    added: list[SummaryEntry] = []
    for trial in folder.trials_on_disk():
        if trial in known or not folder.has_records(trial):
            continue
        meta = folder.metadata(trial)
        if meta.error is not None:
            added.append(FailedEntry.model_validate({**meta.params.to_dict(), "error": meta.error}))
        else:
            records = folder.records(trial)
            added.append(summarize_trial(records, meta.params, th, meta.nodes))
    trials = summary.trials
    if added:
        trials = sorted([*trials, *added], key=lambda e: e.trial)
        folder.write_summary(summary.model_copy(update={"thresholds": th.to_dict(),
                                                        "trials": trials}))  # fmt: skip
    return trials


def _figures(groups: dict[str, list[SummaryEntry]], records_of: RecordsOf) -> list[Figure]:
    out: list[Figure] = []
    for spec, entries in _figure_specs(groups):
        fig = spec.draw(entries, records_of) if spec.needs_records else spec.draw(entries)
        if fig is not None:
            out.append((spec.title, spec.caption, fig))
    return out


def _markdown(p: Page) -> str:
    lines = [f"# roboscale summary: {p.run.spec_name}", "", "## Headline", ""]
    lines += markdown(p.headline)
    unsustained = verdict_rows(p.entries)
    if unsustained:
        lines += ["", "## Not sustained", ""]
        lines += [f"- `{trial}`: {'; '.join(reasons)}" for trial, reasons in unsustained]
    lines += ["", "## This run", ""] + [f"- **{k}**: {v}" for k, v in facts(p)]
    for title, table, caption in p.tables:
        lines += ["", f"## {title}", ""] + ([caption, ""] if caption else []) + [to_markdown(table)]
    failed = [e for e in p.entries if isinstance(e, FailedEntry)]
    if failed:
        lines += ["", "## Failed trials", ""] + [f"- `{e.trial}`: {e.error}" for e in failed]
    return "\n".join(lines) + "\n"
