"""`roboscale capacity ...`: search, fit, predict, validate. Each command is a thin call.

The main cli calls `add_parser(subparsers)` once and dispatches `capacity` to
`main(args, console)`. `search` runs trials through a lab opener (see `LabOpener`);
the default, `capacity.lab.open_lab`, runs them as ordinary lab trials.
"""

from __future__ import annotations

import argparse
import io
import json
import math
import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rich.console import Console
from rich.table import Table

from roboscale.cliargs import number, path, whole
from roboscale.errors import UserError
from roboscale.safewrite import write_bytes

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from roboscale.capacity.search import Budget, SearchResult
    from roboscale.spec.schema import Spec

HELP = """\
Capacity: how many nodes, at what rate and message size, this host sustains.

  roboscale capacity search SPEC                      find the limits by running trials
  roboscale capacity fit RESULTS... -o MODEL          fit CSLV and the two-resource model
  roboscale capacity predict MODEL --size 4250 --rate 20    max nodes, with an interval
  roboscale capacity predict MODEL --nodes 64 --size 4250   max rate per sender
  roboscale capacity validate MODEL RESULTS...        error on configurations held out
"""


MAX_RATE_HZ = 1_000_000.0  # as a spec's rates
MAX_NODES = 1_000_000
RATE, NODES, SECONDS = number(0, MAX_RATE_HZ), whole(2, MAX_NODES), number(0, 7 * 86400)


class TrialRunner(Protocol):
    """Run one trial (all of the spec's runs) and say whether it was sustained.

    Every trial must be recorded in the results folder like any other trial."""

    def __call__(
        self, backend: str, payload: tuple[str, int], rate_hz: float, pairs: int
    ) -> bool: ...


LabOpener = Callable[[Any, Path, str, Console], AbstractContextManager[TrialRunner]]


def add_parser(sub: Any) -> None:
    """Register `capacity` and its subcommands on the main parser's subparsers."""
    fmt = argparse.RawDescriptionHelpFormatter
    cap = sub.add_parser(
        "capacity",
        help="capacity search, models and predictions",
        description=HELP,
        formatter_class=fmt,
    )
    csub = cap.add_subparsers(dest="capacity_command", metavar="SUBCOMMAND", required=True)

    s = csub.add_parser("search", help="find the largest sustained N (or rate) by running trials")
    s.add_argument("spec", type=path, help="experiment spec: its backends, payloads and rates")
    s.add_argument(
        "--by",
        choices=("nodes", "rate"),
        default="nodes",
        help="search node count per (payload, rate), or rate per (payload, pairs)",
    )
    s.add_argument("--backend", help="comma-separated backends instead of the spec's")
    s.add_argument("--max-nodes", type=NODES, default=256, help="never probe more nodes (256)")
    s.add_argument("--max-rate", type=RATE, default=100_000.0, help="never probe above (Hz)")
    s.add_argument(
        "--rel-tol", type=number(0, 0.5), default=0.1, help="stop when the bracket is this tight"
    )
    s.add_argument(
        "--budget-s",
        type=SECONDS,
        default=3600.0,
        help="time budget of the whole search",
    )
    s.add_argument("--quick", action="store_true", help="apply the spec's quick: overrides")
    s.add_argument(
        "--out", type=path, help="results folder (default results/<name>-capacity-<time>)"
    )

    f = csub.add_parser("fit", help="fit the capacity models on results folders")
    f.add_argument("results", type=path, nargs="+", help="results folders of one host")
    f.add_argument("-o", "--output", type=path, required=True, help="model file to write (JSON)")
    f.add_argument("--backend", help="fit this backend's trials only")
    f.add_argument(
        "--bootstrap", type=whole(10, 100_000), default=200, help="bootstrap resamples (200)"
    )
    f.add_argument("--seed", type=whole(0), default=0, help="bootstrap seed")
    f.add_argument("--plots", type=path, help="also write figures (PNG) into this folder")

    p = csub.add_parser("predict", help="max nodes for (size, rate), or max rate for (nodes, size)")
    p.add_argument("model", type=path, help="model file from `capacity fit`")
    p.add_argument(
        "--size", required=True, help="message size: bytes, '4KB', text, laserscan, image"
    )
    p.add_argument("--rate", type=RATE, help="rate per sender (Hz): predicts max nodes")
    p.add_argument(
        "--nodes",
        type=NODES,
        help="node count (2 x pairs, 2 or more): predicts max rate",
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")

    v = csub.add_parser("validate", help="prediction error on configurations left out")
    v.add_argument("model", type=path, help="model file from `capacity fit`")
    v.add_argument("results", type=path, nargs="+", help="results folders of the same host")
    v.add_argument("--json", type=path, help="also write the table as JSON here")
    v.add_argument("--plots", type=path, help="also write figures (PNG) into this folder")
    v.add_argument(
        "--report", type=path, help="also write one self-contained HTML page (tables, figures)"
    )


# --- fit ---------------------------------------------------------------------------------


def cmd_fit(args: argparse.Namespace, console: Console) -> int:
    from roboscale.capacity import data, modelfile

    obs = data.load(args.results, backend=args.backend)
    model = modelfile.build(obs, args.results, draws=args.bootstrap, seed=args.seed)
    modelfile.save(model, args.output)
    _print_model(console, model)
    if args.plots:
        from roboscale.capacity import plots

        written = _save_figures(
            args.plots,
            {
                "latency-vs-nodes": plots.latency_vs_nodes(obs),
                "sustained-map": plots.sustained_map(obs, model.models),
            },
        )
        console.print(f"[bold]figures:[/bold] {', '.join(written)}")
    console.print(f"[bold]model:[/bold] {args.output}")
    return 0


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "unbounded"
    return f"{value:.4g}{unit}"


def _print_model(console: Console, model: Any) -> None:
    console.print(
        f"[bold]{model.backend}[/bold] on {model.host.get('hostname', '?')} "
        f"({model.host.get('cpu_model', '?')}, {model.host.get('cores', '?')} cores): "
        f"{model.trials} trials"
    )
    table = Table("model", "parameter", "value", "std. error")
    for name, fm in model.models.items():
        for key, value in fm.params.items():
            table.add_row(name, key, _fmt(value), _fmt(fm.stderr.get(key)))
        table.add_row(name, "misclassified trials", str(fm.details.get("misclassified")), "")
    console.print(table)


def _save_figures(folder: Path, figures: Mapping[str, Figure]) -> list[str]:
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, fig in figures.items():
        path = folder / f"{name}.png"
        image = io.BytesIO()  # rendered in memory, then written without following a link
        fig.savefig(image, format="png", dpi=110)
        plt.close(fig)
        write_bytes(path, image.getvalue())
        written.append(str(path))
    return written


# --- predict -----------------------------------------------------------------------------


def _size(text: str) -> tuple[int, bool]:
    """Bytes of the --size payload, and whether it is an array of numbers (laserscan)."""
    from roboscale.spec.payloads import is_numeric, parse_payload, payload_kind

    value: object = int(text) if text.strip().isdigit() else text
    try:
        name, size = parse_payload(value)
    except ValueError as e:
        raise UserError(f"--size: {e}") from None
    if payload_kind(name) == "custom":
        raise UserError(f"--size: {CUSTOM_TYPES}")
    return size, is_numeric(name)


# The capacity model prices a payload by its bytes and whether it is an array of numbers;
# a message type of .msg files is priced by neither yet.
CUSTOM_TYPES = (
    "message types of .msg files are not in the capacity model; allowed: their size in "
    "bytes (the bench report shows it), or laserscan for a type that is mostly an array of "
    "numbers"
)


def cmd_predict(args: argparse.Namespace, console: Console) -> int:
    from roboscale.capacity import modelfile
    from roboscale.capacity.predict import predict_max_nodes, predict_max_rate

    if (args.rate is None) == (args.nodes is None):
        raise UserError("give either --rate (predicts max nodes) or --nodes (predicts max rate)")
    model = modelfile.load(args.model)
    size, numeric = _size(args.size)
    span, models = model.fitted_range, model.models.values()
    what = f"{size} B {'numeric arrays' if numeric else 'messages'}"
    if args.rate is not None:
        preds = [predict_max_nodes(m, span, size, args.rate, numeric) for m in models]
        ask = f"max nodes for {what} at {args.rate:g} Hz"
    else:
        preds = [predict_max_rate(m, span, args.nodes, size, numeric) for m in models]
        ask = f"max rate per sender for {args.nodes:g} nodes with {what}"
    if args.json:
        console.print_json(
            json.dumps(
                {
                    "question": ask,
                    "predictions": [
                        {
                            k: (str(v) if isinstance(v, float) and not math.isfinite(v) else v)
                            for k, v in p.to_dict().items()
                        }
                        for p in preds
                    ],
                }
            )
        )
        return 0
    unit = "" if args.rate is not None else " Hz"
    table = Table("model", "prediction", "80 % interval", "binding budget", title=ask)
    for p in preds:
        table.add_row(
            p.model, _fmt(p.value, unit), f"{_fmt(p.low)} - {_fmt(p.high)}{unit}", p.binding
        )
    console.print(table)
    for p in preds:
        for w in p.warnings:
            console.print(f"[yellow]warning ({p.model}): {w}[/yellow]")
    return 0


# --- validate ----------------------------------------------------------------------------


def cmd_validate(args: argparse.Namespace, console: Console) -> int:
    from roboscale.capacity import data, modelfile
    from roboscale.capacity.validate import cross_validate, evaluate

    model = modelfile.load(args.model)
    obs = data.load(args.results, backend=model.backend)
    _check_same_host(model, obs, args.model)
    draws = int(model.fit_options.get("bootstrap", 50))
    seed = int(model.fit_options.get("seed", 0))
    result = cross_validate(obs, draws=min(draws, 50), seed=seed)
    _print_validation(console, "leave one configuration out", result)
    out: dict[str, object] = {"cross_validation": result.to_dict()}
    unseen = [o for o in obs if o.source not in model.sources]
    held = evaluate(model.models, unseen) if unseen else None
    if held is not None:
        _print_validation(console, "the model as fitted, on results it was not fitted on", held)
        out["unseen_results"] = held.to_dict()
    if args.json:
        from roboscale.capacity.modelfile import encode
        from roboscale.safewrite import write_json

        write_json(args.json, encode(out))  # strict JSON: infinities as "inf"
    if args.plots:
        from roboscale.capacity import plots

        written = _save_figures(
            args.plots,
            {
                "predicted-vs-measured": plots.predicted_vs_measured(result),
                "latency-vs-nodes": plots.latency_vs_nodes(obs),
                "sustained-map": plots.sustained_map(obs, model.models),
            },
        )
        console.print(f"[bold]figures:[/bold] {', '.join(written)}")
    if args.report:
        from roboscale.capacity import report

        report.write(args.report, model, obs, result, held)
        console.print(f"[bold]report:[/bold] {args.report}")
    return 0


def _check_same_host(model: Any, obs: list[Any], path: Path) -> None:
    hosts = sorted({o.host for o in obs})
    if hosts != [model.host_fingerprint]:
        raise UserError(
            f"{path}: the model was fitted on host setup {model.host_fingerprint}, "
            f"but these results come from {', '.join(hosts)}",
            hint="validate a model on results of the host it was fitted on",
        )


def _print_validation(console: Console, title: str, result: Any) -> None:
    table = Table(
        "model",
        "size (B)",
        "rate (Hz)",
        "measured max N",
        "first failing N",
        "predicted",
        "80 % interval",
        "|error|",
        title=title,
    )
    for r in result.rows:
        err = "-" if r.rel_error is None else f"{r.rel_error:.0%}"
        table.add_row(
            r.model,
            r.size_label,
            f"{r.rate_hz:g}",
            _fmt(r.measured),
            _fmt(r.first_unsustained),
            _fmt(r.predicted),
            f"{_fmt(r.low)} - {_fmt(r.high)}",
            err if r.note is None else r.note,
        )
    console.print(table)
    for name, line in result.headline():
        console.print(f"  {name}: {line}")


# --- search ------------------------------------------------------------------------------


def cmd_search(args: argparse.Namespace, console: Console) -> int:
    from roboscale.capacity.lab import open_lab

    return run_search(args, console, open_lab)


def _targets(spec: Any, args: argparse.Namespace) -> list[tuple[str, tuple[str, int], float]]:
    """(backend, payload, rate or pairs) per configuration to search."""
    backends = [b.strip() for b in args.backend.split(",")] if args.backend else spec.sweep.backend
    third = spec.sweep.rate_hz if args.by == "nodes" else spec.sweep.pairs
    return [(b, p, float(x)) for b in backends for p in spec.sweep.payload for x in third]


def _search_one(
    run: TrialRunner,
    args: argparse.Namespace,
    target: tuple[str, tuple[str, int], float],
    budget: Budget,
    spec: Spec,
) -> tuple[SearchResult, dict[str, float]]:
    """One configuration: nodes at a fixed rate, or rate at a fixed pair count."""
    from roboscale.capacity.search import search_max_nodes, search_max_rate

    backend, payload, x = target
    if args.by == "nodes":

        def at_nodes(nodes: int) -> bool:
            return run(backend, payload, x, nodes // 2)

        res = search_max_nodes(
            at_nodes, max_nodes=args.max_nodes, rel_tol=args.rel_tol, budget=budget
        )
        return res, {"rate_hz": x}
    pairs = int(x)

    def at_rate(rate: float) -> bool:
        return run(backend, payload, rate, pairs)

    res = search_max_rate(
        at_rate,
        start_hz=min(spec.sweep.rate_hz),
        max_hz=args.max_rate,
        rel_tol=args.rel_tol,
        budget=budget,
    )
    return res, {"pairs": pairs, "nodes": 2 * pairs}


def run_search(args: argparse.Namespace, console: Console, open_lab: LabOpener) -> int:
    """Search every configuration of the spec, sharing the time budget between them."""
    from roboscale.capacity.search import Budget
    from roboscale.safewrite import write_json
    from roboscale.spec.loader import load_spec
    from roboscale.yamlfile import read_text

    spec = load_spec(args.spec, quick=args.quick)
    from roboscale.spec.payloads import payload_kind

    if any(payload_kind(name) == "custom" for name, _ in spec.sweep.payload):
        raise UserError(f"{args.spec}: sweep.payload: {CUSTOM_TYPES}")
    if args.by == "rate" and args.max_rate < min(spec.sweep.rate_hz):
        raise UserError(
            f"--max-rate: {args.max_rate:g} Hz is below the spec's lowest rate "
            f"({min(spec.sweep.rate_hz):g} Hz), where the search starts; allowed: at least that"
        )
    targets = _targets(spec, args)
    out = args.out or Path("results") / f"{spec.name}-capacity-{time.strftime('%Y%m%d-%H%M%S')}"
    began = time.monotonic()
    found: list[dict[str, object]] = []
    with open_lab(spec, out, read_text(args.spec, "spec file"), console) as run:
        for i, (backend, payload, x) in enumerate(targets):
            left = args.budget_s - (time.monotonic() - began)
            budget = Budget(seconds=left / (len(targets) - i))
            res, key = _search_one(run, args, (backend, payload, x), budget, spec)
            entry = {
                "backend": backend,
                "payload": payload[0],
                "payload_bytes": payload[1],
                "search": args.by,
                **key,
                **res.to_dict(),
            }
            found.append(entry)
            console.print(
                f"  {backend} {payload[0]} {key}: sustained {_fmt(res.sustained)}, "
                f"fails at {_fmt(res.unsustained)} ({res.stop}, "
                f"{len(res.probes)} trials)"
            )
            write_json(out / "capacity-search.json", {"format_version": 1, "searches": found})
    console.print(f"[bold]results:[/bold] {out}  (fit with: roboscale capacity fit {out} -o MODEL)")
    return 0


COMMANDS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    "search": cmd_search,
    "fit": cmd_fit,
    "predict": cmd_predict,
    "validate": cmd_validate,
}


def main(args: argparse.Namespace, console: Console) -> int:
    """Dispatch `roboscale capacity <subcommand>`."""
    return COMMANDS[args.capacity_command](args, console)
