"""`roboscale report DIR`: a self-contained report.html (plots embedded) and summary.md.

Rendered from what is on disk only, so a run cut short by Ctrl-C or a crash
renders from its finished trials; a trial whose records were written but whose
summary entry was not (a crash in between) is summarized again from its files.
"""

from __future__ import annotations

import functools
import time
from html import escape
from pathlib import Path
from typing import Any

import pyarrow as pa

from roboscale.analysis import plots
from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.tables import Table, to_html, to_markdown
from roboscale.analysis.verdict import Thresholds
from roboscale.errors import UserError
from roboscale.records.schema import METADATA_FILE, RECORDS_FILE, TRIALS_DIR
from roboscale.records.store import (
    read_metadata,
    read_records,
    read_run,
    read_summary,
    write_json,
)
from roboscale.safewrite import write_text
from roboscale.workloads.base import (
    FigureSpec,
    TableSpec,
    get_workload,
    known_workloads,
    name_of,
)

Entry = dict[str, Any]
Shown = tuple[str, Table, str]  # a table's title, its head and rows, and its caption


def by_workload(entries: list[Entry]) -> dict[str, list[Entry]]:
    """Entries grouped by workload, in the registry's order."""
    groups = {name: [e for e in entries if name_of(e) == name] for name in known_workloads()}
    return {name: group for name, group in groups.items() if group}


def _figure_specs(groups: dict[str, list[Entry]]) -> list[tuple[FigureSpec, list[Entry]]]:
    """Each workload's figures with its entries; workloads naming one figure share it."""
    out: dict[str, tuple[FigureSpec, list[Entry]]] = {}
    for name, group in groups.items():
        for spec in get_workload(name).figures():
            out.setdefault(spec.title, (spec, []))[1].extend(group)
    return list(out.values())


def _tables(groups: dict[str, list[Entry]]) -> tuple[list[Shown], int]:
    """Each workload's tables over its entries, those shown before the figures first, and
    how many these are; tables with nothing to show are left out."""
    out: dict[str, tuple[TableSpec, list[Entry]]] = {}
    for name, group in groups.items():
        for spec in get_workload(name).tables():
            out.setdefault(spec.title, (spec, []))[1].extend(group)
    specs = sorted(out.values(), key=lambda sg: not sg[0].lead)
    built = [(spec, spec.build(group)) for spec, group in specs]
    shown = [(spec, table) for spec, table in built if table is not None]
    return [(s.title, table, s.caption) for s, table in shown], sum(s.lead for s, _ in shown)


def render_report(run_dir: Path) -> tuple[Path, Path]:
    run = read_run(run_dir)
    summary = read_summary(run_dir)
    th = Thresholds.from_dict(summary.get("thresholds"), str(run_dir / "summary.json"))
    _check_workloads(run_dir / "summary.json", summary["trials"])
    entries = _with_recovered(run_dir, summary["trials"], th)
    records_of = functools.lru_cache(maxsize=None)(functools.partial(_records, run_dir))
    groups = by_workload(entries)
    figures = _figures(groups, records_of)
    tables, leading = _tables(groups)
    tables += _clock_table(entries)
    html = run_dir / "report.html"
    md = run_dir / "summary.md"
    try:
        write_text(html, _html(run, th, entries, figures, tables, leading))
        write_text(md, _markdown(run, th, entries, tables))
    except OSError as e:
        raise UserError(f"{run_dir}: cannot write the report ({e.strerror or e})") from None
    return html, md


def _clock_table(entries: list[Entry]) -> list[Shown]:
    """Trials on real machines: how far their one-way figures can be off (the clocks'
    error bound, measured before and after each trial), and whether that is within the
    spec's env.clock_max_bound_us."""
    rows = [
        [
            str(e["trial"]),
            f"{e['clock']['bound_us']:.0f}",
            f"{e['clock']['max_bound_us']:.0f}",
            "valid" if e["clock"]["valid"] else "invalid",
        ]
        for e in entries
        if isinstance(e.get("clock"), dict)
    ]
    head = ["trial", "one-way error bound (µs)", "allowed (µs)", "one-way figures"]
    return [("Clocks of real machines", (head, rows), "")] if rows else []


def _check_workloads(path: Path, entries: list[Entry]) -> None:
    """A trial of a workload this roboscale does not know would be left out: refused."""
    known = known_workloads()
    for i, entry in enumerate(entries):
        if name_of(entry) not in known:
            raise UserError(
                f"{path}: trials[{i}].workload: {name_of(entry)!r} is not a workload of this "
                f"roboscale; allowed: {', '.join(known)}"
            )


def _records(run_dir: Path, trial: str) -> pa.Table | None:
    path = run_dir / TRIALS_DIR / trial / RECORDS_FILE
    return read_records(run_dir, trial) if path.exists() else None


def _with_recovered(run_dir: Path, entries: list[Entry], th: Thresholds) -> list[Entry]:
    """Summary entries, plus trials whose files exist but whose entry was never appended."""
    known = {e["trial"] for e in entries}
    added = []
    trials = run_dir / TRIALS_DIR
    for meta_path in sorted(trials.glob(f"*/{METADATA_FILE}")) if trials.is_dir() else []:
        trial = meta_path.parent.name
        if trial in known or not (meta_path.parent / RECORDS_FILE).exists():
            continue
        meta = read_metadata(run_dir, trial)
        if meta.get("error"):
            added.append({**meta["params"], "error": meta["error"], "sustained": False})
        else:
            records = read_records(run_dir, trial)
            added.append(summarize_trial(records, meta["params"], th, meta.get("nodes", [])))
    if added:
        path = run_dir / "summary.json"
        all_entries = sorted(entries + added, key=lambda e: str(e["trial"]))
        write_json(path, {"format_version": 1, "thresholds": th.to_dict(), "trials": all_entries})
        return all_entries
    return entries


def _figures(groups: dict[str, list[Entry]], records_of: Any) -> list[tuple[str, str, str]]:
    out = []
    for spec, entries in _figure_specs(groups):
        fig = spec.draw(entries, records_of) if spec.needs_records else spec.draw(entries)
        if fig is not None:
            out.append((spec.title, spec.caption, plots.to_data_uri(fig)))
    return out


def _facts(run: dict[str, Any], th: Thresholds, entries: list[Entry]) -> list[tuple[str, str]]:
    host = run.get("host", {})
    failed = sum(1 for e in entries if e.get("error"))
    held = sum(1 for e in entries if e.get("sustained"))
    created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.get("created_unix_s", 0)))
    backends = run.get("backends", {})
    return [
        ("experiment", f"{run.get('spec_name', '?')}: {run.get('spec_description', '')}"),
        ("command", str(run.get("command", ""))),
        ("started", created),
        ("trials", f"{len(entries)} finished, {held} sustained, {failed} failed"),
        ("backends", ", ".join(f"{k} ({v})" for k, v in backends.items())),
        ("host", f"{host.get('cpu_model', '?')}, {host.get('cores', '?')} cores, "
                 f"kernel {host.get('kernel', '?')}, CPU quota {host.get('cpu_quota', '?')}, "
                 f"link {host.get('link_profile', '?')}"),
        ("sustained means", th.describe()),
        ("times", "RTT = reply received - sent, on the sender's CLOCK_MONOTONIC, not halved; "
                  "send lag = sent - intended deadline (open-loop pacing); one-way and "
                  "end-to-end latencies as their tables say"),
    ]  # fmt: skip


STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1250px;color:#222}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25em 1em} dt{font-weight:600}
table{border-collapse:collapse;font-size:.82em;margin:.5em 0} td,th{border:1px solid #ccc;
padding:.2em .45em;text-align:right} th{background:#f3f3f3} td:first-child{text-align:left}
img{max-width:100%} figcaption,.caption{color:#555;font-size:.9em} .err{color:#b00}
"""


def _html(
    run: dict[str, Any],
    th: Thresholds,
    entries: list[Entry],
    figures: list[tuple[str, str, str]],
    tables: list[Shown],
    leading: int,
) -> str:
    facts = "".join(
        f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in _facts(run, th, entries)
    )
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>roboscale: "
        f"{escape(str(run.get('spec_name', '')))}</title><style>{STYLE}</style></head><body>",
        f"<h1>roboscale report: {escape(str(run.get('spec_name', '')))}</h1><dl>{facts}</dl>",
    ]
    if not entries:
        parts.append("<p class='err'>No trial finished; nothing to show.</p>")
    parts += [_table_html(shown) for shown in tables[:leading]]
    for title, caption, uri in figures:
        parts.append(
            f"<h2>{escape(title)}</h2><figure><img alt='{escape(title)}' src='{uri}'>"
            f"<figcaption>{escape(caption)}</figcaption></figure>"
        )
    parts += [_table_html(shown) for shown in tables[leading:]]
    parts.append(_errors_html(entries))
    parts.append("</body></html>\n")
    return "".join(parts)


def _table_html(shown: Shown) -> str:
    title, table, caption = shown
    note = f"<p class='caption'>{escape(caption)}</p>" if caption else ""
    return f"<h2>{escape(title)}</h2>{note}{to_html(table)}"


def _errors_html(entries: list[Entry]) -> str:
    failed = [e for e in entries if e.get("error")]
    if not failed:
        return ""
    items = "".join(f"<li><b>{escape(e['trial'])}</b>: {escape(e['error'])}</li>" for e in failed)
    return f"<h2>Failed trials</h2><ul class='err'>{items}</ul>"


def _markdown(
    run: dict[str, Any], th: Thresholds, entries: list[Entry], tables: list[Shown]
) -> str:
    lines = [f"# roboscale summary: {run.get('spec_name', '')}", ""]
    lines += [f"- **{k}**: {v}" for k, v in _facts(run, th, entries)]
    for title, table, caption in tables:
        lines += ["", f"## {title}", ""] + ([caption, ""] if caption else []) + [to_markdown(table)]
    failed = [e for e in entries if e.get("error")]
    if failed:
        lines += ["", "## Failed trials", ""] + [f"- `{e['trial']}`: {e['error']}" for e in failed]
    return "\n".join(lines) + "\n"
