"""`roboscale report DIR`: a self-contained report.html (plots embedded) and summary.md.

Rendered from what is on disk only, so a run cut short by Ctrl-C or a crash
renders from its finished trials; a trial whose records were written but whose
summary entry was not (a crash in between) is summarized again from its files.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any

import pyarrow as pa

from roboscale.analysis import flowplots, plots
from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.tables import (
    Table,
    comparison_table,
    echo_entries,
    flow_table,
    percentile_table,
    to_html,
    to_markdown,
)
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

Entry = dict[str, Any]
COMPARISON = "Backends side by side"
FIGURES: list[tuple[str, str, Callable[..., Any], bool]] = [
    ("Latency against message id", "Thesis Figure 3.5 style: round trip of each message id, "
     "mean over runs and senders, one line per rate.", plots.latency_by_id, True),
    ("Mean latency against rate", "Mean round trip with one standard deviation; hollow markers "
     "are configurations that were not sustained.", plots.mean_vs_rate, True),
    ("Round trip by payload size", "Lab-report style box plots (median, quartiles, 1.5 IQR "
     "whiskers, outliers), backends side by side.", plots.box_by_size, True),
    ("Latency against node count", "Thesis Figure 4.4 style: mean round trip (log scale) "
     "against nodes, N = 2 x pairs, one line per rate, with one standard deviation.",
     plots.latency_vs_nodes, True),
    ("Latency against host count", "Thesis Experiment 9: mean round trip against the number "
     "of emulated hosts, half of them senders talking to every echoer host.",
     plots.latency_vs_hosts, True),
    ("One-way latency by payload size", "Lab-report style box plots of the one-way workloads: "
     "a box per listener count (fan-out, pooled over listeners), per ping mode (the ack's "
     "round trip beside it), or per chain hop (arrival minus the previous hop's) and end to "
     "end.", flowplots.flow_boxes, True),
    ("One-way mean latency with CI80", "Mean with its 80 % confidence interval per payload "
     "size, same series as the box plots.", flowplots.flow_means, True),
    ("Achieved rate and loss", "Where a configuration stops keeping up: the slowest sender's "
     "achieved rate over the target, and the share of messages never echoed.",
     plots.rate_and_loss, False),
]  # fmt: skip


def render_report(run_dir: Path) -> tuple[Path, Path]:
    run = read_run(run_dir)
    summary = read_summary(run_dir)
    th = Thresholds.from_dict(summary.get("thresholds"), str(run_dir / "summary.json"))
    entries = _with_recovered(run_dir, summary["trials"], th)
    records_of = functools.lru_cache(maxsize=None)(functools.partial(_records, run_dir))
    figures = _figures(entries, records_of)
    tables = [("Percentiles per trial", percentile_table(entries))]
    if (flows := flow_table(entries)) is not None:
        tables = [("One-way workloads per trial", flows)]
        if echo_entries(entries):
            tables.insert(0, ("Percentiles per trial", percentile_table(entries)))
    if (compare := comparison_table(entries)) is not None:
        tables.insert(0, (COMPARISON, compare))
    html = run_dir / "report.html"
    md = run_dir / "summary.md"
    try:
        html.write_text(_html(run, th, entries, figures, tables))
        md.write_text(_markdown(run, th, entries, tables))
    except OSError as e:
        raise UserError(f"{run_dir}: cannot write the report ({e.strerror or e})") from None
    return html, md


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
            added.append(summarize_trial(read_records(run_dir, trial), meta["params"], th))
    if added:
        path = run_dir / "summary.json"
        all_entries = sorted(entries + added, key=lambda e: str(e["trial"]))
        write_json(path, {"format_version": 1, "thresholds": th.to_dict(), "trials": all_entries})
        return all_entries
    return entries


def _figures(entries: list[Entry], records_of: Any) -> list[tuple[str, str, str]]:
    out = []
    for title, caption, draw, needs_records in FIGURES:
        fig = draw(entries, records_of) if needs_records else draw(entries)
        if fig is not None:
            out.append((title, caption, plots.to_data_uri(fig)))
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
                  "send lag = sent - intended deadline (open-loop pacing)"),
    ]  # fmt: skip


STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1250px;color:#222}
h1{margin-bottom:.2em} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25em 1em} dt{font-weight:600}
table{border-collapse:collapse;font-size:.82em;margin:.5em 0} td,th{border:1px solid #ccc;
padding:.2em .45em;text-align:right} th{background:#f3f3f3} td:first-child{text-align:left}
img{max-width:100%} figcaption{color:#555;font-size:.9em} .err{color:#b00}
"""


def _html(
    run: dict[str, Any],
    th: Thresholds,
    entries: list[Entry],
    figures: list[tuple[str, str, str]],
    tables: list[tuple[str, Table]],
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
    lead = [t for t in tables if t[0] == COMPARISON]
    for title, table in lead:
        parts.append(f"<h2>{escape(title)}</h2>{to_html(table)}")
    for title, caption, uri in figures:
        parts.append(
            f"<h2>{escape(title)}</h2><figure><img alt='{escape(title)}' src='{uri}'>"
            f"<figcaption>{escape(caption)}</figcaption></figure>"
        )
    for title, table in tables[len(lead) :]:
        parts.append(f"<h2>{escape(title)}</h2>{to_html(table)}")
    parts.append(_errors_html(entries))
    parts.append("</body></html>\n")
    return "".join(parts)


def _errors_html(entries: list[Entry]) -> str:
    failed = [e for e in entries if e.get("error")]
    if not failed:
        return ""
    items = "".join(f"<li><b>{escape(e['trial'])}</b>: {escape(e['error'])}</li>" for e in failed)
    return f"<h2>Failed trials</h2><ul class='err'>{items}</ul>"


def _markdown(
    run: dict[str, Any], th: Thresholds, entries: list[Entry], tables: list[tuple[str, Table]]
) -> str:
    lines = [f"# roboscale summary: {run.get('spec_name', '')}", ""]
    lines += [f"- **{k}**: {v}" for k, v in _facts(run, th, entries)]
    for title, table in tables:
        lines += ["", f"## {title}", "", to_markdown(table)]
    failed = [e for e in entries if e.get("error")]
    if failed:
        lines += ["", "## Failed trials", ""] + [f"- `{e['trial']}`: {e['error']}" for e in failed]
    return "\n".join(lines) + "\n"
