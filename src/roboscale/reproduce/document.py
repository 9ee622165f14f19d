"""docs/reproduction.md, written from the catalogue and the kept runs only: every
figure in it is computed here from committed summaries, none is typed by hand."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from roboscale.analysis import uncertainty
from roboscale.analysis.uncertainty import Estimate
from roboscale.reproduce.evidence import Evidence, Run
from roboscale.reproduce.figures import NoFigure, compute, experiments_of, number, passes
from roboscale.reproduce.figures import rule_words as words
from roboscale.reproduce.model import Check, Experiment, Finding

MIN_RUNS = 3
SEED_TITLES = {
    "thesis": "Seeds 000-002: the thesis (ROS 1 between two Raspberry Pi 3s)",
    "labreport": "Seed 003: the lab report (ROS 2 over DDS)",
    "paper": "Seed 004: the Erlang paper (ROS against Erlang/OTP face trackers)",
}


@dataclass
class CheckResult:
    check: Check
    values: dict[int, float] = field(default_factory=dict)  # run number -> figure
    missing: dict[int, str] = field(default_factory=dict)  # run number -> why none

    @property
    def passed(self) -> list[int]:
        return [k for k, v in self.values.items() if passes(self.check.rule, v)]

    @property
    def verdict(self) -> str:
        if not self.values:
            return "no figure"
        passed = len(self.passed)
        if passed == len(self.values) and not self.missing:
            return "agrees"
        return "disagrees" if passed == 0 else "partly"


def evaluate(check: Check, runs: dict[str, list[Run]]) -> CheckResult:
    """The check's figure in every run its experiments share."""
    needed = sorted(experiments_of(check.figure))
    numbers = set.intersection(*[{r.record.run for r in runs.get(e, [])} for e in needed])
    result = CheckResult(check)
    for k in sorted(numbers):
        entries = {e: next(r for r in runs[e] if r.record.run == k).entries for e in needed}
        try:
            result.values[k] = compute(entries, check.figure)
        except NoFigure as e:
            result.missing[k] = str(e)
    return result


def finding_verdict(finding: Finding, results: Sequence[CheckResult], ran: bool) -> str:
    if finding.no_result:
        return "no seed result"
    if finding.cannot_run:
        return "cannot run here"
    if not ran:
        return "not run"
    verdicts = {r.verdict for r in results}
    if verdicts == {"agrees"}:
        return "agrees"
    if verdicts == {"no figure"}:
        return "no figure"
    return "disagrees" if verdicts <= {"disagrees", "no figure"} else "partly"


def estimate(values: dict[int, float]) -> Estimate | None:
    """The figure over its runs: the median, with the 95 % interval of the answers
    issue's bootstrap (analysis/uncertainty.py) over runs. The kept summaries hold one
    figure per run, not the messages behind it, so the draws are of runs only; one run
    has no interval and says "single run"."""
    if not values:
        return None
    v = list(values.values())
    if len(v) == 1:
        return Estimate(v[0], None, None, 1, 1, "single run")
    return uncertainty.percentile([np.array([x], dtype=np.float64) for x in v], 50.0)


def _interval(values: dict[int, float], unit: str) -> str:
    e = estimate(values)
    if e is None or e.value is None:
        return "-"
    if e.low is None or e.high is None:
        return f"{number(e.value)}{unit} ({e.note})"
    return f"{number(e.value)}{unit} [{number(e.low)}, {number(e.high)}] ({e.runs} runs)"


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.gmtime(t))


def _runs_line(exp: Experiment, runs: list[Run]) -> str:
    quick = runs[0].record.quick
    parts = []
    for r in runs:
        rec = r.record
        busy = " **busy**" if rec.busy else ""
        failed = f", {rec.failed} of {rec.trials} trials failed" if rec.failed else ""
        other = f"others {rec.other.other_cores:.2f} cores, " if rec.other else ""
        parts.append(
            f"run {rec.run} {_when(rec.start_unix_s)} UTC, {other}load "
            f"{rec.load.before:.1f} → max {rec.load.max:.1f}{busy}{failed}"
        )
    variant = f"quick variant: {exp.quick_differs}" if quick else "full spec"
    command = runs[0].record.command
    return f"`{command}` ({variant}; {exp.full_differs}): " + "; ".join(parts)


def _short(text: str, limit: int = 160) -> str:
    """A reason as a table cell holds it: one line, cut at `limit` (the kept summary.json
    has it whole)."""
    one = " ".join(text.replace("|", "/").split())
    return one if len(one) <= limit else one[: limit - 1] + "…"


def _check_row(r: CheckResult) -> str:
    c = r.check
    per_run = ", ".join(
        f"{number(v)}" + ("" if k in r.passed else "✗") for k, v in r.values.items()
    )
    missing = "; ".join(f"run {k}: {_short(why)}" for k, why in r.missing.items())
    shown = per_run + (f" (no figure: {missing})" if missing else "")
    return (
        f"| {c.label} | {c.seed_value} | {_interval(r.values, c.unit)} | {shown or '-'} | "
        f"{words(c.rule, c.unit)} | {r.verdict} |"
    )


def render_finding(
    f: Finding, experiments: dict[str, Experiment], runs: dict[str, list[Run]]
) -> tuple[str, str]:
    """The finding's section, and its verdict."""
    ran = bool(f.experiments) and all(runs.get(e) for e in f.experiments)
    results = [evaluate(c, runs) for c in f.checks] if ran else []
    verdict = finding_verdict(f, results, ran)
    lines = [f"### {f.id}: {verdict}", "", f"> {f.quote}", "", f"- Where: {f.section}."]
    lines.append(f"- Parameters: {f.parameters}.")
    lines.append(f"- Rule: {f.reading}.")
    if f.by_construction:
        lines.append(f"- **By construction**: {f.by_construction}.")
    if f.no_result:
        lines.append(f"- Not judged: {f.no_result}.")
    if f.cannot_run:
        lines.append(f"- Not run: {f.cannot_run}.")
    required = sorted({n for e in f.experiments for n in experiments[e].needs})
    if required:
        lines.append(f"- Needs: {', '.join(required)}.")
    for e in f.experiments:
        exp = experiments[e]
        if runs.get(e):
            lines.append(f"- Ran: {_runs_line(exp, runs[e])}.")
        else:
            needs = ", ".join(exp.needs) or "nothing special"
            lines.append(f"- Not run: `{exp.spec}` (needs {needs}); no kept results.")
    if results:
        lines += [
            "",
            "| figure | seed | measured: median [95 % interval] (runs) "
            "| per run (✗: fails the rule) | rule | verdict |",
            "|---|---|---|---|---|---|",
            *[_check_row(r) for r in results],
        ]
        fewest = min((len(r.values) for r in results), default=0)
        if fewest < MIN_RUNS:
            lines += ["", f"Fewer than {MIN_RUNS} runs behind a figure: a first look only."]
    return "\n".join(lines) + "\n", verdict


HEADER = """# Reproducing the seed papers' findings

This file is written by `roboscale reproduce` from `src/roboscale/reproduce/catalogue.py`
(each finding declared once: the seed's words, the experiment with the seed's
parameters, how its figure is computed, the rule) and from the summaries of the runs
kept under [reproduction/](reproduction/) (`summary.json`, `metadata.json`, `run.json`
and `reproduce.json` of every run). `tests/reproduce/test_document.py` writes it again
from them and fails if it differs: no figure here is typed by hand.

How to read a finding: the quote is the seed's own; the figure is computed in every run
(each run is one `roboscale bench` of the experiment, repeated by `roboscale reproduce`)
and shown as its median over runs with a 95 % interval: the bootstrap of
`src/roboscale/analysis/uncertainty.py` (the statistics of every roboscale report), which
draws runs and, where records allow, the messages within them. The summaries kept here
hold one figure per run, so the draws are of runs; the number of runs is given, and a
figure from one run says "single run" and has no interval. With 3 runs the interval is
wide by nature: it says how little 3 runs pin a figure down. A rule states what the seed's words
mean ("about the same" is within ±25 %). A check **agrees** when every run meets its
rule, **disagrees** when none does, **partly** otherwise; a finding agrees when all its
checks do. **By construction** marks an agreement that follows from how a link profile
was calibrated. A run is **busy** when other processes took more than a quarter of
one core on average while it ran: `others c cores` is the machine's process CPU time
(/proc/stat) less the run's own process tree (getrusage of it and its children; orphans
of the tree come to it as their subreaper and count too), over the run's wall time
(`src/roboscale/reproduce/busy.py`; a run kept before this was measured is marked from
its load average). `load a → max b` is the 1-minute load average before the run and
its highest during it; it counts the run's own processes too, so it is shown, not used
for the mark. Findings this machine cannot measure,
and experiments not run (they need root, a stack, or hours), are listed, never dropped.
"""


def render(findings: Sequence[Finding], experiments: Sequence[Experiment], ev: Evidence) -> str:
    by_id = {e.id: e for e in experiments}
    runs = {e: ev.runs(e) for e in ev.experiments() if e in by_id}
    sections: dict[str, list[str]] = {seed: [] for seed in SEED_TITLES}
    table = ["| finding | seed | verdict |", "|---|---|---|"]
    for f in findings:
        text, verdict = render_finding(f, by_id, runs)
        sections[f.seed].append(text)
        table.append(f"| [{f.id}](#{f.id.lower()}-{_anchor(verdict)}) | {f.section} | {verdict} |")
    counts = Counter(row.rsplit("|", 2)[1].strip() for row in table[2:])
    tally = ", ".join(f"{verdict}: {n}" for verdict, n in sorted(counts.items()))
    headline = f"**{len(findings)} findings: {tally}.**"
    out = [HEADER, "## Every finding", "", headline, "", *table, ""]
    for seed, title in SEED_TITLES.items():
        out += [f"## {title}", "", *sections[seed]]
    return "\n".join(out).rstrip() + "\n"


def _anchor(verdict: str) -> str:
    return verdict.replace(" ", "-")
