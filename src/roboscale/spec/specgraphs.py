"""The graph files a spec names (`sweep.graph`), resolved beside the spec and checked
against it: workload graph needs one, each reads (spec/graphfile.py), its host indices fit
`sweep.hosts`, and no clocked output would send more than the graph workload's bound in
a trial.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from roboscale.errors import SpecError, UserError
from roboscale.spec.graphfile import MAX_OUTPUT_MESSAGES, Graph, read_graph, shown
from roboscale.yamlfile import KeyPath, LineMap, check_regular, dotted, line_for

if TYPE_CHECKING:
    from roboscale.spec.schema import Spec


def with_graphs(spec: Spec, spec_path: Path, lines: LineMap) -> Spec:
    """Check the spec's graph files (relative to the spec) and make their paths absolute:
    workload graph needs one, each loads, and its host indices fit sweep.hosts."""
    sw, file = spec.sweep, str(spec_path)

    def fail(loc: KeyPath, problem: str) -> SpecError:
        return SpecError(file, line_for(loc, lines), dotted(loc), problem)

    if "graph" in sw.workload and not sw.graph:
        raise fail(("sweep", "graph"), "workload graph needs a graph file here, relative to "
                   "the spec (e.g. graph: ../examples/graphs/mobile-robot.yaml)")  # fmt: skip
    resolved = []
    for i, name in enumerate(sw.graph):
        if not name or "\0" in name:
            raise fail(("sweep", "graph", i), f"a graph file's path, relative to the spec; got "
                       f"{shown(name)}")  # fmt: skip
        path = (spec_path.parent / name).resolve()
        if not path.exists():
            raise fail(("sweep", "graph", i), f"no graph file {str(path)!r} (relative to the spec)")
        try:  # a FIFO, a directory or a device is named as such, and never read
            check_regular(path, "graph file")
        except UserError as e:
            raise fail(("sweep", "graph", i), str(e)) from None
        graph = read_graph(path)
        used = graph.hosts
        _check_duration(spec, graph, file, lines)
        for hosts in sw.hosts:
            if 1 < hosts < used:
                raise fail(("sweep", "hosts"), f"graph {name!r} places nodes on hosts 0 to "
                           f"{used - 1}, so hosts is 1 (all on one) or at least {used}; "
                           f"got {hosts}")  # fmt: skip
        resolved.append(str(path))
    return spec.model_copy(update={"sweep": sw.model_copy(update={"graph": resolved})})


def _check_duration(spec: Spec, graph: Graph, file: str, lines: LineMap) -> None:
    """Each clocked output sends its rate times the trial's duration ((messages + warmup)
    at each sweep rate) and at most the graph workload's bound: a trial whose outputs would
    stop early is refused here, not cut short in silence."""
    trial = spec.trial
    for rate in spec.sweep.rate_hz:
        warmup = 0 if trial.mode == "thesis_compat" else trial.warmup
        seconds = (trial.message_count(rate) + warmup) / rate
        for node, out in graph.publishers():
            if out.triggered or out.replay or out.rate_hz * seconds <= MAX_OUTPUT_MESSAGES:
                continue
            field = "messages" if trial.messages is not None else "duration_s"
            loc: KeyPath = ("trial", field) if ("trial", field) in lines else ("sweep", "rate_hz")
            raise SpecError(
                file, line_for(loc, lines), dotted(loc),
                f"a trial of {seconds:,.0f} s at rate_hz {rate:g}: {node.name}'s {out.topic} "
                f"({out.rate_hz:g} Hz, {graph.file}) would send "
                f"{out.rate_hz * seconds:,.0f} messages; at most {MAX_OUTPUT_MESSAGES:,} per "
                "output: fewer trial.messages, or a higher rate_hz",
            )  # fmt: skip
