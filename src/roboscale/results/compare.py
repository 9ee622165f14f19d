"""`roboscale compare BASE NEW`: the same configurations in two results folders, side by
side, and whether NEW regressed.

A configuration is what a trial measured, whatever its id or run number: workload,
backend, payload, rate, nodes, hosts, link, and the workload's own axes. For each one
found in both folders, the headline latency of each side (echo and the face tracker:
round trip; fan-out and ping: one way, pooled over listeners; chain: end to end; graph:
the first path end to end) is reduced to a statistic (p50 by default), and the ratio
NEW / BASE gets a 95 % bootstrap interval: runs are drawn with replacement, then
messages within each run. With fewer than three runs a side the interval understates how
much runs differ (one run's messages share its load), so the latency is shown but not
judged.

A figure regressed when even the interval's lower end is slower than the threshold
allows (ratio > 1 + threshold with 95 % confidence, at least three runs a side), or when a
configuration that was sustained (or finished) in BASE is not in NEW. Then the command
exits 1, naming them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from roboscale import safewrite
from roboscale.cliargs import path
from roboscale.errors import UserError
from roboscale.records.folder import ResultsFolder
from roboscale.records.models import FailedEntry, GraphEntry, SummaryEntry

FloatArray = npt.NDArray[np.float64]
# What makes two trials the same configuration (TrialParams' fields, run and ids aside).
CONFIG_FIELDS = ("workload", "backend", "subject", "payload", "payload_bytes", "rate_hz",
                 "pairs", "hosts", "link", "cpu", "listeners", "chain_length", "ack",
                 "reliability", "history", "durability", "stack", "workers", "deque_len",
                 "kills", "kill_method", "dispatch", "load_cpu", "load_net_mbit")  # fmt: skip
STATISTICS: dict[str, tuple[Callable[[FloatArray], float], int]] = {
    # name: (the statistic, the fewest messages a side needs for it)
    "p50": (lambda v: float(np.percentile(v, 50)), 10),
    "p90": (lambda v: float(np.percentile(v, 90)), 50),
    "p99": (lambda v: float(np.percentile(v, 99)), 100),
    "mean": (lambda v: float(np.mean(v)), 10),
}
CONFIDENCE = 0.95
# Fewest runs a side to judge a latency: within one run messages share the run's load and
# queues, so their spread understates how much a second run differs (two runs of the demo
# on a loaded machine differed by up to 9.6x, with message intervals of a few percent).
# With two runs, resampling them gives intervals too narrow: two halves of one sweep on a
# loaded machine "differed" by 1.30x [1.12, 1.57].
MIN_RUNS = 3
Config = tuple[Any, ...]


@dataclass(frozen=True)
class Row:
    """One configuration compared."""

    configuration: str
    runs: tuple[int, int]  # base, new
    messages: tuple[int, int]
    base_us: float | None
    new_us: float | None
    ratio: float | None  # new / base: above 1 is slower
    low: float | None
    high: float | None
    significant: bool
    regressed: bool
    note: str = ""
    judged: bool = True  # whether the latency was judged (enough runs a side)

    def ratio_text(self) -> str:
        if self.ratio is None:
            return "-"
        if self.low is None or self.high is None:
            return f"{self.ratio:.3f}"
        return f"{self.ratio:.3f} [{self.low:.3f}, {self.high:.3f}]"


@dataclass(frozen=True)
class Outcome:
    statistic: str
    threshold: float
    rows: list[Row]
    only_base: list[str]
    only_new: list[str]

    @property
    def regressed(self) -> list[Row]:
        return [r for r in self.rows if r.regressed]


def config_of(entry: SummaryEntry) -> Config:
    values = entry.to_dict()
    return tuple(values.get(name) for name in CONFIG_FIELDS)


def describe(config: Config) -> str:
    """A configuration in words: what always matters, then what differs from a default."""
    v = dict(zip(CONFIG_FIELDS, config, strict=True))
    what = v["subject"] or v["payload"]
    words = [str(v["workload"]), str(v["backend"]), str(what), f"{v['rate_hz']:g} Hz"]
    defaults = {"pairs": 1, "hosts": 1, "link": "loopback", "cpu": None, "listeners": 0,
                "chain_length": 0, "ack": False, "reliability": None, "history": None,
                "durability": None, "stack": "", "workers": 0, "deque_len": 0, "kills": 0,
                "kill_method": "", "dispatch": "", "load_cpu": 0.0,
                "load_net_mbit": 0.0}  # fmt: skip
    words += [f"{k}={v[k]}" for k, d in defaults.items() if v.get(k, d) not in (d, None)]
    return " ".join(words)


def headline_us(folder: ResultsFolder, entry: SummaryEntry) -> FloatArray:
    """The trial's headline latency of every message that arrived, in µs."""
    table = folder.records(entry.trial)
    if entry.workload in ("fanout", "ping", "chain"):
        from roboscale.analysis.oneway import flow_of, primary_us

        values = primary_us(flow_of(table), relays=entry.workload == "chain")
    elif isinstance(entry, GraphEntry):
        from roboscale.analysis.graph import latencies_by_node

        paths = latencies_by_node(table, "path")
        first = entry.paths[0].path if entry.paths else None
        values = paths.get(first, np.zeros(0)) if first else np.zeros(0)
    else:  # echo, facetrack: round trips
        sent = table.column("t_sent").to_numpy(zero_copy_only=False).astype(np.float64)
        back = table.column("t_received").to_numpy(zero_copy_only=False).astype(np.float64)
        values = (back - sent) / 1e3
    out: FloatArray = values[~np.isnan(values)]
    return out


def by_config(folder: ResultsFolder) -> dict[Config, list[SummaryEntry]]:
    groups: dict[Config, list[SummaryEntry]] = {}
    for entry in folder.summary().trials:
        groups.setdefault(config_of(entry), []).append(entry)
    return groups


def bootstrap(
    runs: Sequence[FloatArray], statistic: Callable[[FloatArray], float], draws: int, rng: Any
) -> FloatArray:
    """The statistic of `draws` resamples: runs with replacement (when there are several),
    then messages with replacement within each run drawn."""
    out = np.empty(draws)
    for d in range(draws):
        picks = rng.integers(0, len(runs), len(runs))
        chosen = runs if len(runs) == 1 else [runs[i] for i in picks]
        out[d] = statistic(np.concatenate([r[rng.integers(0, r.size, r.size)] for r in chosen]))
    return out


def _row(
    label: str,
    base: tuple[ResultsFolder, list[SummaryEntry]],
    new: tuple[ResultsFolder, list[SummaryEntry]],
    statistic: str,
    threshold: float,
    draws: int,
    seed: int,
) -> Row:
    (base_dir, base_entries), (new_dir, new_entries) = base, new
    base_ok = [e for e in base_entries if not isinstance(e, FailedEntry)]
    new_ok = [e for e in new_entries if not isinstance(e, FailedEntry)]
    runs = (len(base_entries), len(new_entries))
    lost = _verdict_lost(base_entries, new_entries)
    base_runs = [a for a in (headline_us(base_dir, e) for e in base_ok) if a.size]
    new_runs = [a for a in (headline_us(new_dir, e) for e in new_ok) if a.size]
    messages = (sum(a.size for a in base_runs), sum(a.size for a in new_runs))
    stat, needed = STATISTICS[statistic]
    if min(messages) < needed or not base_runs or not new_runs:
        note = f"too few messages for {statistic} (need {needed} a side)"
        return Row(label, runs, messages, None, None, None, None, None, False, bool(lost),
                   "; ".join(filter(None, [lost, note])))  # fmt: skip
    base_us = stat(np.concatenate(base_runs))
    new_us = stat(np.concatenate(new_runs))
    rng = np.random.default_rng(seed)
    ratios = bootstrap(new_runs, stat, draws, rng) / bootstrap(base_runs, stat, draws, rng)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = (float(x) for x in np.percentile(ratios, [tail, 100 - tail]))
    judged = min(runs) >= MIN_RUNS
    significant = judged and (low > 1 or high < 1)
    slower = judged and low > 1 + threshold
    notes = [lost] if lost else []
    if not judged:
        notes.append(f"{min(runs)} run(s) a side: latency not judged (runs vary more than "
                     f"messages; trial.runs >= {MIN_RUNS})")  # fmt: skip
    return Row(label, runs, messages, base_us, new_us, new_us / base_us, low, high, significant,
               slower or bool(lost), "; ".join(notes), judged)  # fmt: skip


def _verdict_lost(base: list[SummaryEntry], new: list[SummaryEntry]) -> str:
    """What BASE achieved and NEW did not: finishing, or keeping up."""
    if all(not isinstance(e, FailedEntry) for e in base) and any(
        isinstance(e, FailedEntry) for e in new
    ):
        return "failed in NEW, finished in BASE"
    if all(e.sustained for e in base) and not all(e.sustained for e in new):
        return "not sustained in NEW, sustained in BASE"
    return ""


def compare(
    base_dir: Path,
    new_dir: Path,
    *,
    statistic: str = "p50",
    threshold: float = 0.10,
    draws: int = 1000,
    seed: int = 0,
) -> Outcome:
    base, new = ResultsFolder(base_dir), ResultsFolder(new_dir)
    base_configs, new_configs = by_config(base), by_config(new)
    rows = [
        _row(describe(config), (base, entries), (new, new_configs[config]), statistic,
             threshold, draws, seed)
        for config, entries in base_configs.items()
        if config in new_configs
    ]  # fmt: skip
    only_base = [describe(c) for c in base_configs if c not in new_configs]
    only_new = [describe(c) for c in new_configs if c not in base_configs]
    if not rows:
        raise UserError(
            f"{base_dir} and {new_dir} share no configuration; nothing to compare",
            hint="compare runs of the same spec (configurations match by workload, backend, "
            "payload, rate and the other axes, not by trial id)",
        )
    return Outcome(statistic, threshold, rows, only_base, only_new)


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _result(row: Row) -> str:
    if row.regressed:
        return "[red]REGRESSED[/red]"
    if row.ratio is not None and not row.judged:
        return "not judged"
    if row.ratio is None or not row.significant:
        return "no significant change"
    return "[green]faster[/green]" if row.ratio < 1 else "slower, within threshold"


def print_outcome(outcome: Outcome, console: Console) -> None:
    stat = outcome.statistic
    table = Table("configuration", "runs base/new", f"base {stat} µs", f"new {stat} µs",
                  f"new/base [{CONFIDENCE:.0%} CI]", "result", "note")  # fmt: skip
    for r in outcome.rows:
        table.add_row(escape(r.configuration), f"{r.runs[0]}/{r.runs[1]}", _us(r.base_us),
                      _us(r.new_us), r.ratio_text(), _result(r), escape(r.note))  # fmt: skip
    console.print(table)
    for what, names in (("only in BASE", outcome.only_base), ("only in NEW", outcome.only_new)):
        if names:
            console.print(f"{what} (not compared): {escape(', '.join(names))}")
    bad = outcome.regressed
    limit = f"{outcome.threshold:.0%}"
    if bad:
        console.print(
            f"[red]{len(bad)} of {len(outcome.rows)} configurations regressed (slower beyond "
            f"{limit}, or no longer sustained or finished):[/red]"
        )
        for r in bad:
            console.print(f"  {escape(r.configuration)}: {r.ratio_text()} {escape(r.note)}")
    else:
        console.print(f"no regression beyond {limit} in {len(outcome.rows)} configurations")


def add_parser(sub: Any) -> None:
    c = sub.add_parser(
        "compare",
        help="compare two results folders configuration by configuration; exit 1 on regression",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("base", type=path, help="the results folder to compare against")
    c.add_argument("new", type=path, help="the results folder of the change")
    c.add_argument("--threshold", type=_share, default=0.10,
                   help="a slowdown beyond this share fails (default 0.10: 10 %%)")  # fmt: skip
    c.add_argument("--statistic", choices=sorted(STATISTICS), default="p50",
                   help="what to compare of each latency (default p50)")  # fmt: skip
    c.add_argument("--draws", type=_draws, default=1000, help="bootstrap draws (default 1000)")
    c.add_argument("--json", type=path, metavar="FILE", help="also write the comparison here")


def _share(text: str) -> float:
    try:
        value = float(text.rstrip("%")) / (100 if text.endswith("%") else 1)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a share such as 0.1 or 10%") from None
    if not 0 <= value < 10:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed: 0 to 10 (0 % to 1000 %)")
    return value


def _draws(text: str) -> int:
    if not text.isdigit() or not 100 <= int(text) <= 100_000:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number from 100 to 100000")
    return int(text)


def main(args: argparse.Namespace, console: Console) -> int:
    outcome = compare(args.base, args.new, statistic=args.statistic, threshold=args.threshold,
                      draws=args.draws)  # fmt: skip
    print_outcome(outcome, console)
    if args.json is not None:
        doc = {"base": str(args.base), "new": str(args.new), "statistic": outcome.statistic,
               "threshold": outcome.threshold, "confidence": CONFIDENCE,
               "rows": [asdict(r) for r in outcome.rows], "only_base": outcome.only_base,
               "only_new": outcome.only_new}  # fmt: skip
        safewrite.write_text(args.json, json.dumps(doc, indent=2) + "\n")
    return 1 if outcome.regressed else 0
