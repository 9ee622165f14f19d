"""`roboscale reproduce`: run the seeds' findings and write docs/reproduction.md."""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console

from roboscale import safewrite
from roboscale.cliargs import path
from roboscale.errors import UserError
from roboscale.reproduce.catalogue import EXPERIMENT_BY_ID, EXPERIMENTS, FINDINGS
from roboscale.reproduce.evidence import Evidence
from roboscale.reproduce.model import SEEDS, Experiment, Finding

RUNS = 3

HELP = """\
Run every seed finding's experiment through the lab (as `roboscale bench` does),
RUNS times each, keep their summaries under DOCS/reproduction/, and write
DOCS/reproduction.md from all kept runs: each finding's quote, parameters, figure with
its 95 % interval over runs, the rule and the verdict. Experiments that need root or a stack
this machine lacks are listed as not run.
"""

EXAMPLES = """\
examples:
  roboscale reproduce --dry-run                    # every finding, its trials and time
  roboscale reproduce --quick --seed labreport     # the lab report's rows, quick variants
  roboscale reproduce --quick --finding E7-100hz-senders
  roboscale reproduce --document-only              # rewrite the document from kept runs
"""


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "reproduce",
        help="reproduce the seed papers' findings and write docs/reproduction.md",
        description=HELP,
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--seed", choices=SEEDS, action="append", help="only this seed's findings")
    p.add_argument(
        "--finding", action="append", metavar="ID", help="only this finding (e.g. E7-256-1hz)"
    )
    p.add_argument("--quick", action="store_true", help="the experiments' quick variants")
    p.add_argument("--dry-run", action="store_true", help="list findings, trials and time")
    p.add_argument(
        "--runs",
        type=int,
        default=None,
        help=f"runs per experiment (the seed's own count where it gives one, else {RUNS})",
    )
    p.add_argument("--docs", type=path, default=Path("docs"), help="the docs folder (docs)")
    p.add_argument("--root", type=path, default=Path("."), help="the folder of experiments/")
    p.add_argument(
        "--work", type=path, default=Path("results/reproduce"), help="full results go here"
    )
    p.add_argument(
        "--document-only", action="store_true", help="run nothing: write the document again"
    )


def select(seeds: list[str] | None, ids: list[str] | None) -> list[Finding]:
    known = {f.id for f in FINDINGS}
    for i in ids or []:
        if i not in known:
            raise UserError(f"--finding: unknown finding {i!r}; known: {', '.join(sorted(known))}")
    return [f for f in FINDINGS if (not seeds or f.seed in seeds) and (not ids or f.id in ids)]


def main(args: argparse.Namespace, console: Console) -> int:
    from roboscale.reproduce.document import render
    from roboscale.reproduce.runner import estimate, missing, run_experiment

    if args.runs is not None and not 1 <= args.runs <= 100:
        raise UserError(f"--runs {args.runs}: allowed: 1 to 100")
    findings = select(args.seed, args.finding)
    wanted = list(dict.fromkeys(e for f in findings for e in f.experiments))
    evidence = Evidence(args.docs / "reproduction")
    if args.dry_run:
        return _dry_run(findings, wanted, args, console)
    if not args.document_only:
        for exp_id in wanted:
            exp = EXPERIMENT_BY_ID[exp_id]
            lacks = missing(exp)
            if lacks:
                console.print(f"[yellow]{exp_id}: not run, needs {'; '.join(lacks)}[/yellow]")
                continue
            est = estimate(args.root, exp, args.quick, runs_of(exp, args.runs))
            console.print(f"{exp_id}: {est.trials} trials, about {est.seconds / 60:.1f} min")
            run_experiment(
                args.root, exp, quick=args.quick, runs=runs_of(exp, args.runs), work=args.work,
                evidence=evidence, console=console,
            )  # fmt: skip
    doc = args.docs / "reproduction.md"
    safewrite.write_text(doc, render(FINDINGS, EXPERIMENTS, evidence))
    console.print(f"[bold]written:[/bold] {doc}")
    return 0


def runs_of(exp: Experiment, asked: int | None) -> int:
    """--runs when given, else the seed's own count for this experiment, else RUNS."""
    return asked if asked is not None else exp.runs or RUNS


def _dry_run(
    findings: list[Finding], wanted: list[str], args: argparse.Namespace, console: Console
) -> int:
    from roboscale.reproduce.runner import estimate, missing

    total = 0.0
    for f in findings:
        if f.no_result:
            console.print(f"{f.id}: no seed result: {f.no_result}")
        elif f.cannot_run:
            console.print(f"{f.id}: cannot run here: {f.cannot_run}")
        else:
            console.print(f"{f.id}: {', '.join(f.experiments)}")
    for exp_id in wanted:
        exp = EXPERIMENT_BY_ID[exp_id]
        runs = runs_of(exp, args.runs)
        est = estimate(args.root, exp, args.quick, runs)
        lacks = missing(exp)
        note = f"  [yellow]not run here: needs {'; '.join(lacks)}[/yellow]" if lacks else ""
        console.print(
            f"  {exp_id}: {est.trials} trials ({runs} runs), about {est.seconds / 60:.1f} min{note}"
        )
        total += est.seconds if not lacks else 0
    console.print(f"[bold]about {total / 60:.0f} min[/bold] for what can run here")
    return 0
