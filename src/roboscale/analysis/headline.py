"""The answer first: what a results folder says, in sentences, for the top of the report,
summary.md and the terminal after `bench`.

- echo and one-way workloads: per configuration (workload, payload, rate, pairs, where)
  the fastest backend by median latency and how many times faster it is than each other
  one, with the ratio's 95 % interval (`uncertainty.ratio`: runs, then messages); the
  highest rate each backend sustained per payload, and what stopped it there (the first
  failed rule's figure);
- graph workloads: each path's end-to-end median per backend, with its interval;
- the face tracker: quality, latency and frames lost per stack.

A ratio whose interval holds 1 says "no clear difference". Every sentence says how many
runs it stands on ("single run" where one), and a quick run says it is quick.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from roboscale.analysis.stats import FloatArray, column
from roboscale.analysis.tables import env_label, rate_label
from roboscale.analysis.uncertainty import Estimate, percentile, ratio, run_warnings
from roboscale.analysis.verdict import Verdict
from roboscale.records.models import (
    FacetrackEntry,
    FacetrackSummary,
    FailedEntry,
    GraphEntry,
    MeasuredEntry,
    PathFigures,
    SummaryEntry,
    TrialParams,
)
from roboscale.workloads.base import name_of

RecordsOf = Callable[[str], pa.Table | None]
ONE_WAY = ("fanout", "ping", "chain")
SHOWN = 8  # sentences per section on the terminal and the report's first screen


@dataclass(frozen=True)
class Headline:
    """Sentences under a heading per workload, and warnings that apply to all of them."""

    sections: list[tuple[str, list[str]]]
    warnings: list[str]

    def lines(self, shown: int = SHOWN) -> list[str]:
        """Plain text for the terminal: each section's first `shown` sentences."""
        out = [f"note: {w}" for w in self.warnings[:shown]]
        if len(self.warnings) > shown:
            out.append(f"note: ... and {len(self.warnings) - shown} more in summary.md")
        for title, sentences in self.sections:
            out += [f"{title}:", *[f"  - {s}" for s in sentences[:shown]]]
            if len(sentences) > shown:
                out.append(f"  ... and {len(sentences) - shown} more in summary.md")
        return out


def latency_us(entry: TrialParams, table: pa.Table) -> FloatArray:
    """A trial's headline latency per message (NaN where lost): the round trip of an echo,
    the one-way (a chain's end-to-end) latency of the one-way workloads, the first path's
    end to end of a graph."""
    if isinstance(entry, GraphEntry):
        from roboscale.analysis.graph import latencies_by_node

        paths = latencies_by_node(table, "path")
        first = entry.paths[0].path if entry.paths else None
        return paths.get(first, np.zeros(0)) if first else np.zeros(0)
    if name_of(entry) in ONE_WAY:
        from roboscale.analysis.oneway import flow_of, primary_us, shape_of

        return primary_us(flow_of(table), shape_of(entry).relays)
    rtt: FloatArray = (column(table, "t_received") - column(table, "t_sent")) / 1e3
    return rtt


def workload_label(entry: TrialParams) -> str:
    """The workload with its own axes ("fanout x4", "chain of 5 ack"); "" for echo."""
    if name_of(entry) in ONE_WAY:
        from roboscale.analysis.oneway import shape_of

        return shape_of(entry).describe(entry)
    return "" if name_of(entry) == "echo" else name_of(entry)


def fmt_us(value: float | None) -> str:
    if value is None:
        return "-"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.3g} s"
    if abs(value) >= 1000:
        return f"{value / 1000:.3g} ms"
    return f"{value:.3g} µs"


def _rate(rate: float) -> str:
    return f"{rate:g} Hz"


def _config(e: TrialParams) -> tuple[str, str, int, float, int, str]:
    return (workload_label(e), e.payload, e.payload_bytes, e.rate_hz, e.pairs, env_label(e))


def _runs_note(runs: int, quick: bool) -> str:
    parts = ["single run" if runs == 1 else f"{runs} runs"] + (["quick"] if quick else [])
    return ", ".join(parts)


def headline(entries: Sequence[SummaryEntry], records_of: RecordsOf, quick: bool) -> Headline:
    good: list[MeasuredEntry] = [e for e in entries if not isinstance(e, FailedEntry)]
    sections: list[tuple[str, list[str]]] = []
    streams = [e for e in good if name_of(e) in ("echo", *ONE_WAY)]
    warnings = ["quick run: short trials, figures are indicative only"] if quick else []
    warnings += beside_other_work(good)
    if streams:
        fastest = _fastest(streams, records_of, quick, warnings)
        sections.append(("Fastest backend per configuration", fastest))
        sections.append(("Highest sustained rate", _sustained(streams)))
    graphs = [e for e in good if isinstance(e, GraphEntry)]
    if graphs:
        sections.append(("Graph paths, end to end", _graph(graphs, quick)))
        jitter = _jitter(graphs, records_of)
        sections.append(("Graph clocks: send jitter against the period", jitter))
    faces = [e for e in good if isinstance(e, FacetrackEntry) and e.facetrack]
    if faces:
        sections.append(("Face tracker per stack", _faces(faces)))
    failed = [e for e in entries if isinstance(e, FailedEntry)]
    if failed:
        sections.append(("Failed", [f"{len(failed)} trial(s) failed: see the end of the "
                                    "report"]))  # fmt: skip
    return Headline([(t, s) for t, s in sections if s], warnings)


# Other work beside a trial above a quarter of one core, or any steal above 1 % of one
# core, on average while its nodes ran: enough to stall a 1 kHz round trip by
# milliseconds on a 2-core machine (docs/runtime.md, "Where the 1 kHz stalls come from").
OTHER_CORES = 0.25
STEAL_CORES = 0.01


def beside_other_work(entries: Sequence[MeasuredEntry]) -> list[str]:
    """A warning when trials ran beside other work on their machine, or while the
    hypervisor stole CPU: their late round trips may be the machine's, not the
    middleware's (usage.host_*, lab/trial.py host_cpu). A trial with a background load
    of its own (`load_cpu`, sweep.cpu_load) is not judged: that load is the experiment,
    and the machine's CPU counts it as other work."""
    busy: list[tuple[float, float, MeasuredEntry]] = []
    for e in entries:
        u = e.usage
        load = (e.model_extra or {}).get("load_cpu", 0.0)  # a planner field, kept as given
        if not u.host_window_s or (isinstance(load, int | float) and load > 0):
            continue
        other = (u.host_other_cpu_s or 0.0) / u.host_window_s
        steal = (u.host_steal_s or 0.0) / u.host_window_s
        if other >= OTHER_CORES or steal >= STEAL_CORES:
            busy.append((other, steal, e))
    if not busy:
        return []
    other, steal, worst = max(busy, key=lambda b: b[0] + b[1])
    return [
        f"{len(busy)} of {len(entries)} trials ran beside other work on this machine "
        f"(most: {worst.trial}, {other:.2f} cores of other processes, {steal:.2f} of "
        "hypervisor steal, on average): their late round trips may be the machine's "
        "(usage.host_other_cpu_s, host_steal_s in summary.json)"
    ]


def _latencies(group: list[MeasuredEntry], records_of: RecordsOf) -> list[FloatArray]:
    out = []
    for e in group:
        table = records_of(e.trial)
        if table is not None:
            out.append(latency_us(e, table))
    return out


def _fastest(
    entries: list[MeasuredEntry], records_of: RecordsOf, quick: bool, warnings: list[str]
) -> list[str]:
    """Per configuration, the fastest backend and its ratio to each other one; hyperfine's
    warnings about runs that disagree go to `warnings`."""
    configs: dict[tuple[str, str, int, float, int, str], dict[str, list[MeasuredEntry]]] = {}
    for e in entries:
        configs.setdefault(_config(e), {}).setdefault(e.backend, []).append(e)
    out: list[str] = []
    wins: dict[str, int] = {}
    for key in sorted(configs, key=lambda k: (k[0], k[2], k[3], k[4], k[5])):
        workload, payload, _, _, pairs, env = key
        per = {b: _latencies(g, records_of) for b, g in configs[key].items()}
        medians = {b: percentile(runs, 50.0) for b, runs in per.items()}
        known = {b: m for b, m in medians.items() if m.value is not None}
        where = ", ".join(
            p
            for p in (
                payload,
                rate_label(next(iter(configs[key].values()))[0]),
                f"{pairs} pairs" if pairs > 1 else "",
                env,
                workload,
            )
            if p
        )
        for b, runs in per.items():
            run_p50s = [float(np.nanmedian(r)) for r in runs if np.any(~np.isnan(r))]
            warnings += [f"{b} at {where}: {w}" for w in run_warnings(run_p50s)]
        kind = "RTT" if not workload else "latency"
        if len(known) < 2:
            for b, m in known.items():
                out.append(f"{where}: {b} only, p50 {kind} {fmt_us(m.value)} "
                           f"[{fmt_us(m.low)}, {fmt_us(m.high)}] "
                           f"({_runs_note(m.runs, quick)})")  # fmt: skip
            continue
        fast = min(known, key=lambda b: known[b].value or 0.0)
        wins[fast] = wins.get(fast, 0) + 1
        unsustained = sorted(b for b, g in configs[key].items()
                             if not all(e.sustained for e in g))  # fmt: skip
        note = f" [not sustained: {', '.join(unsustained)}]" if unsustained else ""
        for slow in sorted(b for b in known if b != fast):
            r = ratio(per[slow], per[fast])
            out.append(_ratio_sentence(fast, slow, where, r, kind, known, quick) + note)
    compared = sum(wins.values())
    if compared > 1:
        tally = ", ".join(f"{b} in {n}" for b, n in sorted(wins.items(), key=lambda w: -w[1]))
        out.insert(0, f"fastest by median latency: {tally} of {compared} configurations")
    return out


def _ratio_sentence(fast: str, slow: str, where: str, r: Estimate, kind: str,
                    medians: dict[str, Estimate], quick: bool) -> str:  # fmt: skip
    figures = (f"p50 {kind} {fmt_us(medians[fast].value)} vs {fmt_us(medians[slow].value)}; "
               f"{_runs_note(r.runs, quick)}")  # fmt: skip
    if r.value is None or r.low is None or r.high is None:
        return f"{where}: {fast} and {slow} not compared ({r.note})"
    interval = f"{times(r.value)}x [{times(r.low)}, {times(r.high)}]"
    if r.low <= 1.0:
        return f"{where}: no clear difference between {fast} and {slow} ({interval}; {figures})"
    return f"{fast} {interval} faster than {slow} at {where} ({figures})"


def times(value: float) -> str:
    """A ratio: two significant digits, whole numbers from 100 up (never 8e+04)."""
    return f"{value:.2g}" if value < 100 else f"{value:,.0f}"


def _first_failure(e: MeasuredEntry) -> str:
    reasons = Verdict.from_record(e.verdict).reasons()
    return reasons[0] if reasons else "not sustained"


def _sustained(entries: list[MeasuredEntry]) -> list[str]:
    lines: dict[tuple[str, str, str, int, int, str], dict[float, list[MeasuredEntry]]] = {}
    for e in entries:
        if e.burst:
            continue  # sent back to back: no rate to have sustained
        key = (e.backend, workload_label(e), e.payload, e.payload_bytes, e.pairs, env_label(e))
        lines.setdefault(key, {}).setdefault(e.rate_hz, []).append(e)
    out = []
    for key in sorted(lines, key=lambda k: (k[0], k[1], k[3], k[4], k[5])):
        backend, workload, payload, _, pairs, env = key
        by_rate = lines[key]
        rates = sorted(by_rate)
        held = [r for r in rates if all(e.sustained for e in by_rate[r])]
        who = " ".join(p for p in (backend, workload, payload,
                                   f"x{pairs}" if pairs > 1 else "", env) if p)  # fmt: skip
        broke = [r for r in rates if r not in held]
        if not broke:
            out.append(f"{who}: sustained at every rate tried, up to {_rate(rates[-1])}")
            continue
        first_bad = broke[0]
        bad = next(e for e in by_rate[first_bad] if not e.sustained)
        reason = _first_failure(bad)
        if not held:
            out.append(f"{who}: not sustained at any rate tried; at {_rate(first_bad)}: "
                       f"{reason}")  # fmt: skip
            continue
        below = [r for r in held if r < first_bad]
        top = _rate(below[-1]) if below else "none below it"
        above = [_rate(r) for r in held if r > first_bad]  # a noisy machine: say so
        again = f" (held again at {', '.join(above)})" if above else ""
        out.append(f"{who}: sustained up to {top}; at {_rate(first_bad)}: {reason}{again}")
    return out


def _graph(entries: list[GraphEntry], quick: bool) -> list[str]:
    """Each path's end to end per backend: median (with its interval in one run, the runs'
    range in several), mean and worst case, and the source messages that never reached
    the path's end (dropped at a fusion or lost), as the reference system reports them."""
    out = []
    groups: dict[tuple[str, str, str], list[GraphEntry]] = {}
    for e in entries:
        groups.setdefault((Path(e.graph).stem, env_label(e), e.backend), []).append(e)
    for (graph, env, backend), group in sorted(groups.items()):
        rows: dict[str, list[PathFigures]] = {}
        for e in group:
            for p in e.paths:
                rows.setdefault(p.path, []).append(p)
        where = " ".join(x for x in (graph, env) if x)
        for path, runs in rows.items():
            d = [r.e2e_us for r in runs if r.e2e_us.p50 is not None]
            p50s = [x.p50 for x in d if x.p50 is not None]
            sources = sum(r.sources for r in runs)
            dropped = sources - sum(r.followed for r in runs)
            if not d:
                out.append(f"{where}, {backend}: path {path}: nothing followed to its end "
                           f"({sources} sources)")  # fmt: skip
                continue
            if len(d) == 1 and d[0].p50_low is not None:
                p50 = f"{fmt_us(p50s[0])} [{fmt_us(d[0].p50_low)}, {fmt_us(d[0].p50_high)}]"
            elif len(d) > 1:
                p50 = f"{fmt_us(float(np.median(p50s)))} (runs {fmt_us(min(p50s))} to " \
                      f"{fmt_us(max(p50s))})"  # fmt: skip
            else:
                p50 = fmt_us(p50s[0])
            mean = fmt_us(float(np.mean([x.mean for x in d if x.mean is not None])))
            worst = fmt_us(max((x.max for x in d if x.max is not None), default=None))
            out.append(f"{where}, {backend}: path {path} end to end p50 {p50}, mean {mean}, "
                       f"worst {worst}; {dropped} of {sources} source messages dropped "
                       f"({_runs_note(len(d), quick)})")  # fmt: skip
    return out


def _jitter(entries: list[GraphEntry], records_of: RecordsOf) -> list[str]:
    """Per backend, the publisher on a clock (source or timer) whose sends lag their
    deadlines most: p99 and worst lag against its period, runs pooled."""
    from roboscale.analysis.graph import clock_jitter

    out = []
    by: dict[tuple[str, str], dict[str, list[tuple[float, FloatArray]]]] = {}
    for e in entries:
        table = records_of(e.trial)
        if table is None:
            continue
        key = (Path(e.graph).stem, e.backend)
        for name, (period, lag) in clock_jitter(table).items():
            by.setdefault(key, {}).setdefault(name, []).append((period, lag))
    for (graph, backend), nodes in sorted(by.items()):
        worst_name, worst = "", -1.0
        for name, runs in nodes.items():
            lag = np.concatenate([lag for _, lag in runs])
            if lag.size and float(lag.max()) > worst:
                worst_name, worst = name, float(lag.max())
        if not worst_name:
            continue
        runs = nodes[worst_name]
        lag = np.concatenate([lag for _, lag in runs])
        period = float(np.median([p for p, _ in runs])) * 1e6
        p99 = percentile([lag], 99.0)
        p99_text = fmt_us(p99.value) if p99.value is not None else f"- ({p99.note})"
        out.append(f"{graph}, {backend}: {worst_name} sends up to {fmt_us(worst)} late "
                   f"({worst / period:.1%} of its {fmt_us(period)} period; p99 {p99_text}), "
                   f"the most of {len(nodes)} clocked publishers")  # fmt: skip
    return out


def _faces(entries: list[FacetrackEntry]) -> list[str]:
    out = []
    for stack in sorted({e.stack for e in entries}):
        mine: list[FacetrackSummary] = [
            e.facetrack.summary for e in entries if e.stack == stack and e.facetrack
        ]
        jac = [s.mean_jaccard for s in mine if s.mean_jaccard is not None]
        lat = [s.latency_p50_ms for s in mine if s.latency_p50_ms is not None]
        lost = sum(s.frames_lost for s in mine)
        out.append(
            f"{stack}: mean Jaccard {np.mean(jac):.3f}" if jac else f"{stack}: no quality figure"
        )
        out[-1] += (f", latency p50 {fmt_us(1e3 * float(np.median(lat)))}" if lat else "") + \
            f", {lost} frames lost over {len(mine)} trial(s)"  # fmt: skip
    return out


def markdown(h: Headline) -> list[str]:
    out = [f"> {w}" for w in h.warnings]
    for title, sentences in h.sections:
        out += ["", f"**{title}**", "", *[f"- {s}" for s in sentences]]
    return out
