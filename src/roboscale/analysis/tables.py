"""The report's tables as rows of strings, shared by the HTML and Markdown writers."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Literal

from roboscale.analysis.oneway import shape_of
from roboscale.analysis.verdict import Verdict
from roboscale.records.models import (
    Distribution,
    FailedEntry,
    MeasuredEntry,
    OneWayEntry,
    SummaryEntry,
    TrialParams,
)

Table = tuple[list[str], list[list[str]]]


def env_label(e: TrialParams) -> str:
    """Hosts, link and CPU quota of an entry, empty for a plain single-host trial."""
    parts = [f"{e.hosts} hosts"] if e.hosts > 1 else []
    parts += [e.link] if e.link != "loopback" else []
    parts += [f"cpu {e.cpu:g}"] if e.cpu is not None else []
    return " ".join(parts)


def us(value: float | None) -> str:
    """Microseconds in a column headed µs: never another unit, thousands separated."""
    if value is None:
        return "-"
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:.2g}"


Percentile = Literal["p50", "p90", "p99", "p999"]
NEEDS: dict[Percentile, int] = {"p50": 2, "p90": 10, "p99": 100, "p999": 1000}


def pct(d: Distribution, q: Percentile) -> str:
    """A percentile with its 95 % interval where stored, or why it is missing."""
    value = getattr(d, q)
    if value is None:
        n, need = d.n, NEEDS[q]
        return f"needs {need} (n={n})" if n is not None and n < need else "-"
    low, high = (d.p50_low, d.p50_high) if q == "p50" else (d.p99_low, d.p99_high)
    if q not in ("p50", "p99") or low is None or high is None:
        return us(value)
    return f"{us(value)} [{us(low)}, {us(high)}]"


def _nodes_cell(e: OneWayEntry) -> str:
    """p50 per listener, or per hop of a chain (hop latency, not arrival)."""
    relays = shape_of(e).relays
    shown = [n.hop_us if relays else n.one_way_us for n in e.per_node]
    return " / ".join(us(d.p50 if d else None) for d in shown)


def flow_table(entries: Sequence[SummaryEntry]) -> Table | None:
    """One-way trials: delivery to every listener (or the last hop), one-way latency
    (end to end for a chain), the ack round trip, and p50 per listener or per hop."""
    flows = list(entries)
    if not flows:
        return None
    head = [
        "trial", "backend", "workload", "where", "rate Hz", "payload", "run", "reached all/sent",
        "one-way p50 µs [95 %]", "p90 µs", "p99 µs [95 %]", "mean µs", "round trip p50 µs",
        "p50 per listener or hop µs", "sustained",
    ]  # fmt: skip
    rows = []
    for e in flows:
        lead = [e.trial, e.backend, shape_of(e).describe(e), env_label(e) or "local",
                rate_cell(e), e.payload, str(e.run)]  # fmt: skip
        if not isinstance(e, OneWayEntry):
            rows.append([*lead, *["-"] * 7, "failed"])
            continue
        o = e.one_way_us
        rows.append([
            *lead, f"{e.received}/{e.sent}", pct(o, "p50"), pct(o, "p90"), pct(o, "p99"),
            us(o.mean), us(e.rtt_us.p50), _nodes_cell(e), _verdict_short(e),
        ])  # fmt: skip
    return head, rows


def rate_cell(e: TrialParams) -> str:
    """A trial's rate as a table shows it: a replayed burst claims none."""
    return "burst" if e.burst else f"{e.rate_hz:g}"


def rate_label(e: TrialParams) -> str:
    """A trial's rate as a label or a sentence names it, with its unit."""
    return "burst" if e.burst else f"{e.rate_hz:g} Hz"


def percentile_table(entries: Sequence[SummaryEntry]) -> Table:
    """Each trial: what came back, the achieved rate, percentiles with their 95 % intervals
    (within the trial), and the verdict."""
    head = [
        "trial", "backend", "where", "rate Hz", "payload", "pairs", "run", "back/sent",
        "achieved Hz", "p50 µs [95 %]", "p99 µs [95 %]", "p99.9 µs", "max µs", "send lag p99 µs",
        "sustained",
    ]  # fmt: skip
    rows = []
    for e in entries:
        lead = [e.trial, e.backend, env_label(e) or "local", rate_cell(e),
                e.payload, str(e.pairs), str(e.run)]  # fmt: skip
        if isinstance(e, FailedEntry):
            rows.append([*lead, *["-"] * 7, "failed"])
            continue
        r, lag = e.rtt_us, e.send_lag_us
        achieved = e.achieved_rate_hz
        rows.append([
            *lead, f"{e.received}/{e.sent}",
            "-" if achieved is None else f"{achieved:.4g}",
            pct(r, "p50"), pct(r, "p99"), pct(r, "p999"), us(r.max), pct(lag, "p99"),
            _verdict_short(e),
        ])  # fmt: skip
    return head, rows


def _verdict_short(e: SummaryEntry) -> str:
    """yes, or the rules that failed (their figures are in the report's verdict list)."""
    if isinstance(e, FailedEntry):
        return "failed"
    if e.sustained:
        return "yes"
    failed = [r.rule for r in Verdict.from_record(e.verdict).failed()]
    return "no: " + ", ".join(failed) if failed else "no"


def comparison_table(entries: Sequence[SummaryEntry]) -> Table | None:
    """Backends side by side: median of per-run p50 RTT and whether every run held."""
    backends = sorted({e.backend for e in entries})
    if len(backends) < 2:
        return None
    configs: dict[tuple[str, str, int, float, int], dict[str, list[SummaryEntry]]] = {}
    for e in entries:
        where = env_label(e) or "local"
        key = (where, e.payload, e.payload_bytes, e.rate_hz, e.pairs)
        configs.setdefault(key, {}).setdefault(e.backend, []).append(e)
    head = ["where", "payload", "rate Hz", "pairs", *[f"{b} p50 µs [95 %]" for b in backends]]
    rows = []
    for (where, payload, _, rate, pairs), per in sorted(configs.items()):
        cells = [_cell(per.get(b, [])) for b in backends]
        burst = any(e.burst for group in per.values() for e in group)
        rows.append([where, payload, "burst" if burst else f"{rate:g}", str(pairs), *cells])
    return head, rows


def _cell(entries: list[SummaryEntry]) -> str:
    """The p50 with its interval (one run), or the median of the runs' p50s and their
    range (several); marked when any run was not sustained."""
    good = [e.rtt_us for e in entries if isinstance(e, MeasuredEntry)]
    p50s = sorted(d.p50 for d in good if d.p50 is not None)
    if not p50s:
        return "failed" if entries else "-"
    held = "" if all(e.sustained for e in entries) else " (not sustained)"
    if len(p50s) == 1:
        return pct(next(d for d in good if d.p50 is not None), "p50") + held
    middle = p50s[len(p50s) // 2]
    return f"{us(middle)} (runs {us(p50s[0])} to {us(p50s[-1])}){held}"


def to_markdown(table: Table) -> str:
    head, rows = table
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def to_html(table: Table) -> str:
    head, rows = table
    th = "".join(f"<th>{escape(h)}</th>" for h in head)
    body = "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table>"
