"""report.html: one self-contained page, usable offline.

The headline comes first, then a table of contents, the verdicts, the tables and the
figures. Plotly's JavaScript is included once, in the head; each figure is a JSON block
that one small script draws, so the page's weight is the library (about 4.6 MB) plus the
figures' data, which `interactive.py` keeps small by downsampling. Tables sort on a click
of their header (numbers by value, the rest as text). The layout is at most 1,240 px
wide and long cells wrap, so there is no sideways scrolling at 1,280 px. Figures still
drawn with matplotlib (the scaling and face-tracker ones) are embedded as PNG.
"""

from __future__ import annotations

import base64
import io
import re
import time
from dataclasses import dataclass
from html import escape
from typing import Any

from roboscale.analysis.headline import SHOWN, Headline
from roboscale.analysis.tables import Table, to_html
from roboscale.analysis.verdict import Thresholds, Verdict
from roboscale.records.models import FailedEntry, RunInfo, SummaryEntry

Shown = tuple[str, Table, str]  # a table's title, its head and rows, and its caption
Figure = tuple[str, str, Any]  # title, caption, a plotly or matplotlib figure


@dataclass(frozen=True)
class Page:
    run: RunInfo
    th: Thresholds
    entries: list[SummaryEntry]
    headline: Headline
    figures: list[Figure]
    tables: list[Shown]
    leading: int


def facts(p: Page) -> list[tuple[str, str]]:
    run, entries = p.run, p.entries
    host = run.host
    failed = sum(1 for e in entries if isinstance(e, FailedEntry))
    held = sum(1 for e in entries if e.sustained)
    created = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(run.created_unix_s))
    backends = run.backends
    runs = sorted({e.run for e in entries})
    return [
        ("experiment", f"{run.spec_name}: {run.spec_description}"),
        ("command", run.command),
        ("started", created),
        ("trials", f"{len(entries)} finished, {held} sustained, "
                   f"{len(entries) - held - failed} not sustained, {failed} failed; "
                   f"{len(runs)} run(s) of each configuration"),
        ("backends", ", ".join(f"{k} ({v})" for k, v in backends.items())),
        ("host", f"{host.cpu_model}, {_or_unknown(host.cores)} cores, "
                 f"kernel {host.kernel}, CPU quota {_or_unknown(host.cpu_quota)}, "
                 f"link {host.link_profile}"),
        ("sustained means", p.th.describe()),
        ("times", "RTT = reply received - sent, on the sender's CLOCK_MONOTONIC, not halved; "
                  "send lag = sent - intended deadline (open-loop pacing); one-way and "
                  "end-to-end latencies as their tables say"),
        ("intervals", "95 % confidence intervals in brackets: within the run for a single "
                      "run (order statistics), by bootstrap over runs then messages for "
                      "several; a percentile only from 1 / (1 - q) messages (p99 from 100)"),
    ]  # fmt: skip


def _or_unknown(value: object) -> str:
    return "?" if value is None else str(value)


def verdict_rows(entries: list[SummaryEntry]) -> list[tuple[str, list[str]]]:
    """Each unsustained trial with the figures of the rules it failed."""
    out = []
    for e in entries:
        if isinstance(e, FailedEntry) or e.sustained:
            continue
        out.append((e.trial, Verdict.from_record(e.verdict).reasons() or ["no reason"]))
    return out


STYLE = """
*{box-sizing:border-box}
body{font-family:system-ui,sans-serif;margin:0 auto;padding:1em 1.2em;max-width:1240px;
color:#222;line-height:1.4}
h1{margin:.2em 0} h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
.sub{color:#555;margin:0 0 .6em} .warn{background:#fff4d6;border-left:4px solid #e0a800;
padding:.4em .8em} #headline{background:#f5f8ff;border:1px solid #cdd9f5;border-radius:6px;
padding:.2em 1em 1em} #headline h3{margin:.8em 0 .2em;font-size:1em} #headline ul{margin:0}
nav#toc{font-size:.92em} nav#toc ol{columns:2;margin:.2em 0}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25em 1em} dt{font-weight:600}
dd{margin:0;overflow-wrap:anywhere}
table{border-collapse:collapse;font-size:.8em;margin:.5em 0;width:100%}
td,th{border:1px solid #ccc;padding:.2em .4em;text-align:right}
td:first-child{overflow-wrap:anywhere;min-width:9em}
th{background:#f3f3f3;cursor:pointer;user-select:none} th:after{content:" \\2195";color:#aaa}
td:first-child,th:first-child{text-align:left} tr.bad td{background:#fff0f0}
img{max-width:100%} figure{margin:0} .plot{width:100%;min-height:300px}
figcaption,.caption{color:#555;font-size:.9em} .err{color:#b00}
ul.verdicts li{margin:.2em 0} code{overflow-wrap:anywhere}
"""

SCRIPT = """
document.querySelectorAll('script[type="application/json"].fig').forEach(function (s) {
  var spec = JSON.parse(s.textContent);
  Plotly.newPlot(s.dataset.target, spec.data, spec.layout,
                 {responsive: true, displaylogo: false});
});
document.querySelectorAll('table.sortable th').forEach(function (th, _) {
  th.addEventListener('click', function () {
    var table = th.closest('table'), body = table.tBodies[0];
    var col = Array.prototype.indexOf.call(th.parentNode.children, th);
    var asc = th.dataset.order !== 'asc';
    th.dataset.order = asc ? 'asc' : 'desc';
    var key = function (tr) {
      var text = tr.children[col] ? tr.children[col].textContent : '';
      var num = parseFloat(text.replace(/,/g, ''));
      return isNaN(num) ? text : num;
    };
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a), y = key(b);
      if (typeof x === 'number' && typeof y === 'number') { return asc ? x - y : y - x; }
      return asc ? String(x).localeCompare(String(y)) : String(y).localeCompare(String(x));
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
"""


def _slug(title: str, used: set[str]) -> str:
    base = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-") or "section"
    slug, k = base, 2
    while slug in used:
        slug, k = f"{base}-{k}", k + 1
    used.add(slug)
    return slug


def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    js: str = get_plotlyjs()
    return js


def figure_html(fig: Any, slug: str, title: str) -> str:
    """A plotly figure as a div and its JSON; a matplotlib one as a PNG."""
    if hasattr(fig, "to_plotly_json"):
        spec = fig.to_json()  # NaN and numpy arrays made JSON by plotly's encoder
        safe = spec.replace("</", "<\\/")
        return (f"<div class='plot' id='plot-{slug}'></div><script type='application/json' "
                f"class='fig' data-target='plot-{slug}'>{safe}</script>")  # fmt: skip
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    uri = "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()
    return f"<img alt='{escape(title)}' src='{uri}'>"


def _headline_html(h: Headline) -> str:
    parts = [f"<p class='warn'>{escape(w)}</p>" for w in h.warnings[:SHOWN]]
    if len(h.warnings) > SHOWN:
        rest = "".join(f"<li>{escape(w)}</li>" for w in h.warnings[SHOWN:])
        parts.append(f"<details class='warn'><summary>{len(h.warnings) - SHOWN} more "
                     f"warnings</summary><ul>{rest}</ul></details>")  # fmt: skip
    for title, sentences in h.sections:
        items = "".join(f"<li>{escape(s)}</li>" for s in sentences[:SHOWN])
        more = sentences[SHOWN:]
        if more:  # the first screen stays the answer; the rest one click away
            rest = "".join(f"<li>{escape(s)}</li>" for s in more)
            items += (f"<li><details><summary>{len(more)} more</summary><ul>{rest}</ul>"
                      f"</details></li>")  # fmt: skip
        parts.append(f"<h3>{escape(title)}</h3><ul>{items}</ul>")
    if not h.sections:
        parts.append("<p>No trial finished; nothing to say yet.</p>")
    return "".join(parts)


def _verdicts_html(p: Page) -> str:
    rows = verdict_rows(p.entries)
    if not rows:
        return "<p>Every finished trial was sustained.</p>" if p.entries else ""
    items = "".join(
        f"<li><code>{escape(trial)}</code>: {escape('; '.join(reasons))}</li>"
        for trial, reasons in rows
    )
    return f"<ul class='verdicts'>{items}</ul>"


def page_html(p: Page) -> str:
    used: set[str] = set()
    sections: list[tuple[str, str, str]] = []  # slug, title, body
    sections.append((_slug("Headline", used), "Headline", _headline_html(p.headline)))
    sections.append((_slug("Verdicts", used), "Not sustained, and why", _verdicts_html(p)))
    for title, table, caption in p.tables[: p.leading]:
        sections.append((_slug(title, used), title, _table_body(table, caption)))
    for title, caption, fig in p.figures:
        slug = _slug(title, used)
        body = (f"<figure>{figure_html(fig, slug, title)}<figcaption>{escape(caption)}"
                f"</figcaption></figure>")  # fmt: skip
        sections.append((slug, title, body))
    for title, table, caption in p.tables[p.leading :]:
        sections.append((_slug(title, used), title, _table_body(table, caption)))
    failed = [e for e in p.entries if isinstance(e, FailedEntry)]
    if failed:
        items = "".join(f"<li><b>{escape(e.trial)}</b>: {escape(e.error)}</li>"
                        for e in failed)  # fmt: skip
        sections.append((_slug("Failed trials", used), "Failed trials",
                         f"<ul class='err'>{items}</ul>"))  # fmt: skip
    about = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts(p))
    sections.append((_slug("This run", used), "This run", f"<dl>{about}</dl>"))
    name = escape(p.run.spec_name)
    held = sum(1 for e in p.entries if e.sustained)
    sub = (f"{len(p.entries)} trials, {held} sustained &middot; "
           f"<code>{escape(p.run.command)}</code>")  # fmt: skip
    toc = "".join(f"<li><a href='#{slug}'>{escape(title)}</a></li>" for slug, title, _ in sections)
    first, rest = sections[0], sections[1:]
    body = "".join(f"<section id='{s}'><h2>{escape(t)}</h2>{b}</section>" for s, t, b in rest)
    return (
        f"<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>roboscale: {name}</title><style>{STYLE}</style>"
        f"<script>{_plotly_js()}</script></head><body>"
        f"<h1>roboscale report: {name}</h1><p class='sub'>{sub}</p>"
        f"<section id='{first[0]}'><h2>{escape(first[1])}</h2>{first[2]}</section>"
        f"<nav id='toc'><h2>Contents</h2><ol>{toc}</ol></nav>{body}"
        f"<script>{SCRIPT}</script></body></html>\n"
    )


def compact(table: Table) -> tuple[Table, list[str]]:
    """The table without the columns that hold one value in every row (but the first), and
    those columns as "name: value", said once above it: fewer columns, no sideways
    scrolling."""
    head, rows = table
    if len(rows) < 2:
        return table, []
    same = [i for i in range(1, len(head)) if len({r[i] for r in rows if i < len(r)}) == 1]
    if len(head) - len(same) < 2:
        return table, []
    keep = [i for i in range(len(head)) if i not in same]
    said = [f"{head[i]}: {rows[0][i]}" for i in same]
    return ([head[i] for i in keep], [[r[i] for i in keep] for r in rows]), said


def _table_body(table: Table, caption: str) -> str:
    shown, said = compact(table)
    every = f"Every row: {'; '.join(said)}." if said else ""
    text = " ".join(t for t in (caption, every) if t)
    note = f"<p class='caption'>{escape(text)}</p>" if text else ""
    return note + to_html(shown).replace("<table>", "<table class='sortable'>", 1)
