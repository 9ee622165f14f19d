"""The `roboscale` command: each subcommand is a thin call into a package."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from roboscale import __version__
from roboscale.cliargs import path
from roboscale.errors import UserError
from roboscale.yamlfile import line_for, load_yaml, read_text

LARGE_TRIALS = 10_000  # above this many trials, or LARGE_HOURS, a sweep needs --yes
LARGE_HOURS = 24.0
MAX_TRIALS = 100_000  # never planned: a TrialPlan each would take hundreds of MB

EXAMPLES = """\
examples:
  roboscale bench experiments/thesis-e1.yaml --quick            # a short rate sweep
  roboscale bench experiments/thesis-e1.yaml --backend ros1,zenoh
  roboscale bench experiments/size-sweep.yaml --dry-run         # list trials, run nothing
  roboscale bench experiments/thesis-e5.yaml --quick --record e5.mcap  # Stata replay, recorded
  roboscale report results/thesis-e1-20261122-140000            # re-render a report
  roboscale backends                                            # what is installed
  roboscale bench experiments/paper-quality.yaml --quick --stack runtime  # face tracker
  roboscale capacity predict model.json --size 4250 --rate 20   # how many nodes fit
  roboscale launch examples/launch/workers.yaml                 # a supervised tree of nodes
  roboscale chaos examples/launch/workers.yaml --rate 200 --duration 10
  roboscale status                                              # live trees: restarts, rates
"""

BENCH_HELP = """\
Run an experiment spec: expand its sweep into trials, run each against real
middleware, record every message, and write a results folder with records
(Parquet), metadata, summary.json, summary.md and a self-contained report.html.
Every finished trial is on disk at once: Ctrl-C keeps them, and
`roboscale report DIR` renders them later.

Defaults: the spec's backends and stacks, its full sweep (--quick: its quick: section),
a new folder results/<name>-<time>. The headline first: what was sustained, and a
warning for trials that ran beside other work on this machine (usage.host_* in the
records).
"""

BENCH_EXAMPLES = """\
examples:
  roboscale bench experiments/thesis-e1.yaml --quick            # a short rate sweep
  roboscale bench experiments/size-sweep.yaml --dry-run         # list trials, run nothing
  roboscale bench experiments/thesis-e1.yaml --backend zenoh --out results/e1
  roboscale bench experiments/thesis-e1.yaml --out results/e1 --resume  # after a Ctrl-C
  roboscale bench experiments/demo.yaml --quick --fail-on unsustained   # CI: exit 1 on a miss
"""

REPORT_HELP = """\
Render a results folder again: report.html (self-contained, plots and tables) and
summary.md, written into the folder, and print the headline. For a folder from an
older roboscale, or one a run interrupted: every finished trial is there.
"""

LIST_EXAMPLES = """\
examples:
  roboscale backends        # a table: backend, installed (yes/no), version or how to install
  roboscale stacks          # the same for the face tracker's stacks (--stack of bench)
"""


COMPARE_EXAMPLES = """\
examples:
  roboscale compare results/before results/after                # p50, 10 % threshold
  roboscale compare results/before results/after --statistic p99 --threshold 0.05
  roboscale compare results/before results/after --json cmp.json  # for CI: exit 1 on regression
"""

EXPORT_EXAMPLES = """\
examples:
  roboscale export results/thesis-e1-20261122-140000   # the summary table, CSV, on stdout
  roboscale export results/e1 --format markdown -o e1.md
  roboscale export results/e1 --table records --format json -o records.json
"""


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="roboscale",
        description="Measure, predict and harden the communication of robot software.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--version", action="version", version=f"roboscale {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    raw = argparse.RawDescriptionHelpFormatter
    b = sub.add_parser("bench", help="run an experiment spec", description=BENCH_HELP,
                       epilog=BENCH_EXAMPLES, formatter_class=raw)  # fmt: skip
    b.add_argument("spec", type=path, help="experiment spec (YAML); see experiments/")
    b.add_argument(
        "--backend",
        help="comma-separated backends to run instead of the spec's, e.g. ros1,zenoh",
    )
    b.add_argument(
        "--stack",
        help="comma-separated face-tracker stacks to run instead of the spec's (workload "
        "facetrack), e.g. runtime or runtime,ros1; see `roboscale stacks`",
    )
    b.add_argument(
        "--out",
        type=path,
        help="results folder (default: results/<name>-<time>); a new or empty one, never "
        "another experiment's",
    )
    b.add_argument(
        "--resume",
        action="store_true",
        help="--out holds an unfinished run of this spec: keep its finished trials, run the rest",
    )
    b.add_argument(
        "--replace",
        action="store_true",
        help="--out holds results of this very spec: remove them and run every trial again "
        "(never another experiment's folder, nor files a run did not write)",
    )
    b.add_argument(
        "--yes",
        action="store_true",
        help=f"run a sweep above {LARGE_TRIALS:,} trials or {LARGE_HOURS:g} h without asking",
    )
    b.add_argument(
        "--record",
        type=path,
        metavar="FILE.mcap",
        help="record what the echoers received (a spec with replay:), with receive times, as "
        "one MCAP file for Foxglove or `ros2 bag`",
    )
    b.add_argument("--quick", action="store_true", help="apply the spec's quick: overrides")
    b.add_argument(
        "--dry-run",
        action="store_true",
        help="print the planned trials, marking those that would be refused and why, and exit",
    )
    b.add_argument(
        "--fail-on",
        type=_fail_on,
        default=(),
        metavar="unsustained|failed",
        help="exit 1 when a trial was not sustained (failed ones included) or failed, for CI "
        "jobs; both: --fail-on unsustained,failed",
    )

    r = sub.add_parser(
        "report",
        help="render report.html and summary.md from a results folder",
        description=REPORT_HELP,
        epilog="example:\n  roboscale report results/thesis-e1-20261122-140000",
        formatter_class=raw,
    )
    r.add_argument("results", type=path, help="a results folder written by `roboscale bench`")

    from roboscale.results import compare, export

    compare.add_parser(sub)
    sub.choices["compare"].epilog = COMPARE_EXAMPLES
    export.add_parser(sub)
    sub.choices["export"].epilog = EXPORT_EXAMPLES
    for name, what in (("backends", "backends"), ("stacks", "face-tracker stacks")):
        sub.add_parser(
            name,
            help=f"list {what}, whether each is installed, and versions",
            description=f"List the {what} this roboscale knows:\nwhether each is installed "
            "here, its version, or how to install it (nothing is measured).",
            epilog=LIST_EXAMPLES,
            formatter_class=raw,
        )
    from roboscale.capacity.cli import add_parser as add_capacity
    from roboscale.lab.hosts_cli import add_parser as add_hosts
    from roboscale.reproduce.cli import add_parser as add_reproduce

    add_capacity(sub)
    add_hosts(sub)
    add_reproduce(sub)
    from roboscale.runtime import cli as runtime_cli

    runtime_cli.add_parsers(sub)
    return p


def cmd_bench(args: argparse.Namespace, console: Console) -> int:
    from roboscale.analysis.report import render
    from roboscale.lab.runner import estimate_s, run_sweep
    from roboscale.spec.loader import load_spec, profiles_path
    from roboscale.spec.planner import count_trials, plan, rate_samples

    backends = [b.strip() for b in args.backend.split(",")] if args.backend else None
    if backends:
        _check_names(backends)
    spec = load_spec(args.spec, quick=args.quick, backends=backends)
    if args.stack:
        from roboscale.spec.facetrackcheck import check_facetrack

        spec = _with_stacks(spec, [s.strip() for s in args.stack.split(",")])
        check_facetrack(spec, f"{args.spec} with --stack {args.stack}", {})
    profiles = profiles_path(spec, args.spec)
    count = count_trials(spec, backends)
    est = sum(estimate_s(t) * n for t, n in rate_samples(spec, backends))
    runs = spec.trial.runs
    variant = " (quick: short trials, indicative only)" if args.quick else ""
    console.print(
        f"[bold]{spec.name}[/bold]{variant}: {count:,} trials, {runs} run{'s' * (runs > 1)} "
        f"of each configuration, about {_duration(est)}"
    )
    _check_size(args, count, est)
    trials = plan(spec, backends, str(profiles) if profiles else None)
    if args.record is not None:
        _check_record(args.record, spec.replay)
    if args.dry_run:
        return _dry_run(trials, console)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out = args.out or Path("results") / f"{spec.name}-{stamp}"
    command = shlex.join(["roboscale", *sys.argv[1:]])
    text = read_text(args.spec, "spec file")
    captures = None
    if args.record is not None:
        captures = Path(tempfile.mkdtemp(prefix="roboscale-record-"))  # private: mode 0700
        trials = [replace(t, record=str(captures)) for t in trials]
    try:
        if args.resume and args.replace:
            raise UserError("--resume keeps earlier trials, --replace removes them: choose one")
        outcome = run_sweep(
            spec, trials, out, text, command, console, resume=args.resume, replace=args.replace
        )
        if captures is not None and spec.replay is not None:
            chosen = tuple(spec.replay_topics or ())
            _write_recording(args.record, captures, (spec.replay, chosen), console)
    finally:
        if captures is not None:
            shutil.rmtree(captures, ignore_errors=True)
    html, md, headline = render(outcome.run_dir)
    for line in headline.lines():  # the answer first (no markup: intervals use brackets)
        console.print(line, markup=False, highlight=False)
    if outcome.interrupted:
        console.print(
            f"[yellow]interrupted: {outcome.trials} of {len(trials)} trials kept[/yellow]"
        )
    if outcome.failed:
        console.print(f"[red]{outcome.failed} trial(s) failed; see summary.md[/red]")
    console.print(f"[bold]report:[/bold] {html}\n[bold]summary:[/bold] {md}")
    if outcome.interrupted:
        return 130
    gate = _gate(outcome.run_dir, args.fail_on, console)
    return 1 if outcome.failed == len(trials) or gate else 0


FAIL_ON = ("unsustained", "failed")


def _fail_on(text: str) -> tuple[str, ...]:
    chosen = tuple(w.strip() for w in text.split(",") if w.strip())
    for word in chosen:
        if word not in FAIL_ON:
            raise argparse.ArgumentTypeError(f"{word!r}; allowed: {', '.join(FAIL_ON)}")
    return chosen


def _gate(run_dir: Path, fail_on: tuple[str, ...], console: Console) -> bool:
    """Whether --fail-on fails the run: the trials that were not sustained or failed."""
    from roboscale.records.folder import ResultsFolder
    from roboscale.records.models import FailedEntry

    if not fail_on:
        return False
    entries = ResultsFolder(run_dir).summary().trials
    failed = [e.trial for e in entries if isinstance(e, FailedEntry)]
    held = [e.trial for e in entries if not isinstance(e, FailedEntry) and not e.sustained]
    bad = (failed if "failed" in fail_on or "unsustained" in fail_on else []) + (
        held if "unsustained" in fail_on else []
    )
    if bad:
        console.print(f"[red]--fail-on {','.join(fail_on)}: {len(bad)} trial(s): "
                      f"{escape(', '.join(sorted(bad)))}[/red]")  # fmt: skip
    return bool(bad)


def _dry_run(trials: list[Any], console: Console) -> int:
    """The planned trials; those that would be refused are marked, with the reason."""
    from roboscale.lab.runner import estimate_s, refusals

    refused = refusals(trials)
    for t in trials:
        msgs = f"{t.messages} msgs + {t.warmup} warm-up"
        line = f"  {escape(t.trial)}  {msgs}, ~{estimate_s(t):.1f} s"
        if t.trial in refused:
            line += f"  [yellow]would be refused: {escape(refused[t.trial])}[/yellow]"
        console.print(line)
    if refused:
        console.print(
            f"[yellow]{len(refused)} of {len(trials)} trials would be refused; `roboscale "
            "bench` refuses the whole sweep until they can run[/yellow]"
        )
    return 0


def _check_record(record: Path, replay: str | None) -> None:
    if record.suffix != ".mcap":
        raise UserError(f"--record: {record}: an .mcap file, e.g. --record trial.mcap")
    if replay is None:
        raise UserError(
            "--record records a replayed stream; the spec has no replay:",
            hint="add `replay: stata` or `replay: my.bag` to the spec",
        )
    if os.path.lexists(record):  # a dangling link too: writing it would create its target
        raise UserError(f"--record: {record} exists already; choose a new file")


def _write_recording(
    record: Path, folder: Path, replay: tuple[str, tuple[str, ...]], console: Console
) -> None:
    """The echoers' captures as one MCAP file; `replay`: the source and its chosen topics."""
    from roboscale.bags import write_mcap

    captures = sorted(folder.glob("*.rec"))
    count = write_mcap(record, captures, *replay)
    console.print(f"[bold]recorded:[/bold] {record} ({count:,} messages)")


def _with_stacks(spec: Any, stacks: list[str]) -> Any:
    """The spec with its `stack` axis replaced, after checking the names and that one of
    its workloads has that axis."""
    from roboscale.facetrack.stack import known_stacks
    from roboscale.workloads.base import get_workload

    for name in stacks:
        if name not in known_stacks():
            raise UserError(f"--stack: unknown stack {name!r}; known: {', '.join(known_stacks())}")
    if not any("stack" in get_workload(w).axes for w in spec.sweep.workload):
        raise UserError(
            f"--stack: the spec's workloads ({', '.join(spec.sweep.workload)}) have no stack "
            "axis; it applies to workload facetrack"
        )
    return spec.model_copy(update={"sweep": spec.sweep.model_copy(update={"stack": stacks})})


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


def _check_size(args: argparse.Namespace, count: int, est: float) -> None:
    """A sweep that would run for days, or not fit in memory, is a typo until confirmed."""
    if count <= LARGE_TRIALS and est <= LARGE_HOURS * 3600:
        return
    _, lines = load_yaml(args.spec)  # parsed again only to point at the sweep's line
    spec = f"{args.spec}:{line_for(('sweep',), lines)}"
    if count > MAX_TRIALS:
        raise UserError(
            f"{spec}: sweep: {count:,} trials (the product of the sweep's lists and "
            f"trial.runs); allowed: at most {MAX_TRIALS:,}, even with --yes",
            hint="shorten the sweep's lists, or split it into several specs",
        )
    if not (args.yes or args.dry_run):
        raise UserError(
            f"{spec}: sweep: {count:,} trials, about {_duration(est)}; above "
            f"{LARGE_TRIALS:,} trials or {LARGE_HOURS:g} h a sweep runs only with --yes",
            hint="check the sweep's lists (--dry-run lists the trials), then add --yes",
        )


def _check_names(names: list[str]) -> None:
    from roboscale.backends.base import known_backends

    for name in names:
        if name not in known_backends():
            raise UserError(
                f"--backend: unknown backend {name!r}; known: {', '.join(known_backends())}"
            )


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    from roboscale.analysis.report import render

    html, md, headline = render(args.results)
    for line in headline.lines():
        console.print(line, markup=False, highlight=False)
    console.print(f"[bold]report:[/bold] {html}\n[bold]summary:[/bold] {md}")
    return 0


def cmd_stacks(args: argparse.Namespace, console: Console) -> int:
    from roboscale.facetrack.stack import get_stack, known_stacks

    table = Table("stack", "available", "what runs / version / how to install")
    for name in known_stacks():
        stack = get_stack(name)
        try:
            stack.check()
            table.add_row(name, "[green]yes[/green]", escape(f"{stack.summary}; {stack.version()}"))
        except UserError as e:
            table.add_row(name, "[red]no[/red]", escape(str(e)))
    console.print(table)
    return 0


def cmd_backends(args: argparse.Namespace, console: Console) -> int:
    from roboscale.backends.base import get_backend, known_backends

    table = Table("backend", "available", "version / how to install")
    for name in known_backends():
        backend = get_backend(name)
        try:
            backend.check()
            table.add_row(name, "[green]yes[/green]", escape(backend.version()))
        except UserError as e:
            table.add_row(name, "[red]no[/red]", escape(str(e)))
    console.print(table)
    return 0


def cmd_compare(args: argparse.Namespace, console: Console) -> int:
    from roboscale.results.compare import main as compare_main

    return compare_main(args, console)


def cmd_export(args: argparse.Namespace, console: Console) -> int:
    from roboscale.results.export import main as export_main

    return export_main(args, console)


def cmd_hosts(args: argparse.Namespace, console: Console) -> int:
    from roboscale.lab.hosts_cli import main as hosts_main

    return hosts_main(args, console)


def cmd_reproduce(args: argparse.Namespace, console: Console) -> int:
    from roboscale.reproduce.cli import main as reproduce_main

    return reproduce_main(args, console)


def cmd_capacity(args: argparse.Namespace, console: Console) -> int:
    from roboscale.capacity.cli import main as capacity_main

    return capacity_main(args, console)


COMMANDS = {
    "bench": cmd_bench,
    "report": cmd_report,
    "compare": cmd_compare,
    "export": cmd_export,
    "backends": cmd_backends,
    "stacks": cmd_stacks,
    "capacity": cmd_capacity,
    "hosts": cmd_hosts,
    "reproduce": cmd_reproduce,
}


def _commands() -> dict[str, Callable[[argparse.Namespace, Console], int]]:
    from roboscale.runtime import cli as runtime_cli

    return {**COMMANDS, **runtime_cli.COMMANDS}


def _os_message(e: OSError) -> str:
    """`PATH: what went wrong` for a file operation that failed on a path."""
    where = f"{e.filename} -> {e.filename2}" if e.filename2 is not None else f"{e.filename}"
    return f"{where}: {e.strerror or e}"


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    console = Console(stderr=False, soft_wrap=True)
    err = Console(stderr=True, soft_wrap=True)
    try:
        code = _commands()[args.command](args, console)
    except UserError as e:
        err.print(f"[red]error:[/red] {escape(str(e))}", highlight=False)
        code = 2
    except OSError as e:
        if e.filename is None:  # not about a path: a bug or the machine, shown in full
            raise
        err.print(f"[red]error:[/red] {escape(_os_message(e))}", highlight=False)
        code = 2
    except KeyboardInterrupt:
        err.print("[yellow]interrupted[/yellow]")
        code = 130
    sys.exit(code)
