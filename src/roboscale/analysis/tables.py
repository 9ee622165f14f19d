"""The report's tables as rows of strings, shared by the HTML and Markdown writers."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from typing import Any

from roboscale.analysis.oneway import shape_of
from roboscale.analysis.verdict import Verdict

Entry = dict[str, Any]
Table = tuple[list[str], list[list[str]]]


def env_label(e: Entry) -> str:
    """Hosts, link and CPU quota of an entry, empty for a plain single-host trial."""
    parts = [f"{e['hosts']} hosts"] if e.get("hosts", 1) > 1 else []
    parts += [str(e["link"])] if e.get("link", "loopback") != "loopback" else []
    parts += [f"cpu {e['cpu']:g}"] if e.get("cpu") is not None else []
    return " ".join(parts)


def us(value: float | None) -> str:
    if value is None:
        return "-"
    if value >= 10_000:
        return f"{value / 1000:.1f} ms"
    return f"{value:.0f}"


def _verdict(e: Entry) -> str:
    if e.get("error"):
        return "failed"
    if e["sustained"]:
        return "yes"
    v = e.get("verdict") or {}
    reasons = Verdict(**v).reasons() if v else []
    return "no: " + ", ".join(reasons) if reasons else "no"


def _nodes_cell(e: Entry) -> str:
    """p50 per listener, or per hop of a chain (hop latency, not arrival)."""
    key = "hop_us" if shape_of(e).relays else "one_way_us"
    return " / ".join(us(n[key]["p50"]) for n in e.get("per_node", []))


def flow_table(entries: Sequence[Entry]) -> Table | None:
    """One-way trials: delivery to every listener (or the last hop), one-way latency
    (end to end for a chain), the ack round trip, and p50 per listener or per hop."""
    flows = list(entries)
    if not flows:
        return None
    head = [
        "trial", "backend", "workload", "where", "rate Hz", "payload", "run", "reached all/sent",
        "one-way p50 µs", "p90", "p99", "mean", "CI80 of mean", "round trip p50",
        "p50 per listener or hop", "sustained",
    ]  # fmt: skip
    rows = []
    for e in flows:
        lead = [e["trial"], e["backend"], shape_of(e).describe(e), env_label(e) or "local",
                rate_cell(e), e["payload"], str(e["run"])]  # fmt: skip
        if e.get("error"):
            rows.append([*lead, *["-"] * 8, "failed"])
            continue
        o = e["one_way_us"]
        rows.append([
            *lead, f"{e['received']}/{e['sent']}", us(o["p50"]), us(o["p90"]), us(o["p99"]),
            us(o["mean"]),
            "-" if o["mean"] is None else f"{us(o['ci80_low'])} to {us(o['ci80_high'])}",
            us(e["rtt_us"]["p50"]), _nodes_cell(e), _verdict(e),
        ])  # fmt: skip
    return head, rows


def rate_cell(e: Entry) -> str:
    """A trial's rate as a table shows it: a replayed burst claims none."""
    return "burst" if e.get("burst") else f"{e['rate_hz']:g}"


def percentile_table(entries: Sequence[Entry]) -> Table:
    head = [
        "trial", "backend", "where", "rate Hz", "payload", "pairs", "run", "back/sent",
        "achieved Hz", "p50 µs", "p90", "p99", "p99.9", "max", "mean ± std", "CI80 of mean",
        "send lag p99",
        "sustained",
    ]  # fmt: skip
    rows = []
    for e in entries:
        if e.get("error"):
            rows.append([e["trial"], e["backend"], env_label(e) or "local", rate_cell(e),
                         e["payload"], str(e["pairs"]), str(e["run"]), *["-"] * 10,
                         "failed"])  # fmt: skip
            continue
        r, lag = e["rtt_us"], e["send_lag_us"]
        achieved = e["achieved_rate_hz"]
        rows.append([
            e["trial"], e["backend"], env_label(e) or "local", rate_cell(e), e["payload"],
            str(e["pairs"]),
            str(e["run"]), f"{e['received']}/{e['sent']}",
            "-" if achieved is None else f"{achieved:.4g}",
            us(r["p50"]), us(r["p90"]), us(r["p99"]), us(r["p999"]), us(r["max"]),
            "-" if r["mean"] is None else f"{us(r['mean'])} ± {us(r['std'])}",
            "-" if r["mean"] is None else f"{us(r['ci80_low'])} to {us(r['ci80_high'])}",
            us(lag["p99"]), _verdict(e),
        ])  # fmt: skip
    return head, rows


def comparison_table(entries: Sequence[Entry]) -> Table | None:
    """Backends side by side: median of per-run p50 RTT and whether every run held."""
    backends = sorted({e["backend"] for e in entries})
    if len(backends) < 2:
        return None
    configs: dict[tuple[str, str, int, float, int], dict[str, list[Entry]]] = {}
    for e in entries:
        where = env_label(e) or "local"
        key = (where, e["payload"], int(e["payload_bytes"]), float(e["rate_hz"]), int(e["pairs"]))
        configs.setdefault(key, {}).setdefault(e["backend"], []).append(e)
    head = ["where", "payload", "rate Hz", "pairs", *[f"{b} p50 µs" for b in backends]]
    rows = []
    for (where, payload, _, rate, pairs), per in sorted(configs.items()):
        cells = [_cell(per.get(b, [])) for b in backends]
        burst = any(e.get("burst") for group in per.values() for e in group)
        rows.append([where, payload, "burst" if burst else f"{rate:g}", str(pairs), *cells])
    return head, rows


def _cell(entries: list[Entry]) -> str:
    good = [e for e in entries if not e.get("error") and e["rtt_us"]["p50"] is not None]
    if not good:
        return "failed" if entries else "-"
    p50s = sorted(e["rtt_us"]["p50"] for e in good)
    held = all(e["sustained"] for e in entries)
    return us(p50s[len(p50s) // 2]) + ("" if held else " (not sustained)")


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
