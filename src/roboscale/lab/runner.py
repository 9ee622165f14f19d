"""Run a planned sweep: every finished trial is on disk before the next one starts."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

import roboscale
from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.verdict import Thresholds
from roboscale.backends.base import Backend, get_backend
from roboscale.env.clock import OffsetEstimate, TrialClock
from roboscale.env.hostfacts import host_facts
from roboscale.errors import UserError
from roboscale.lab.envs import Environments, Placement, check_placement
from roboscale.lab.nodes import NodeFailure
from roboscale.lab.outdir import claim
from roboscale.lab.trial import collect, node_usage, run_nodes, wall_clock
from roboscale.records.raw import shift_times
from roboscale.records.schema import FORMAT_VERSION, RUN_FILE
from roboscale.records.store import (
    append_summary,
    read_records,
    trial_dir,
    write_json,
    write_trial,
)
from roboscale.spec.planner import TrialPlan
from roboscale.spec.schema import Spec
from roboscale.workloads.base import get_workload, workload_of

TRIAL_OVERHEAD_S = 1.5  # process start and connection, for the ETA only


@dataclass
class RunOutcome:
    run_dir: Path
    trials: int
    failed: int
    interrupted: bool


def estimate_s(t: TrialPlan) -> float:
    """How long a trial takes, for the ETA and --dry-run."""
    return t.intended_duration_s + t.drain_s * 0.2 + t.pause_s + TRIAL_OVERHEAD_S


def prepare_run_dir(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise UserError(
            f"{out}: cannot write results there ({e.strerror or e})",
            hint="choose another folder with --out",
        ) from None


def check_backends(names: list[str]) -> dict[str, Backend]:
    backends = {name: get_backend(name) for name in names}
    for backend in backends.values():
        backend.check()
    return backends


def check_trials(trials: list[TrialPlan], backends: dict[str, Backend]) -> None:
    """What would fail mid-sweep is refused before anything runs."""
    for t in trials:
        check_placement(backends[t.backend], t)
    if any(t.emulated for t in trials):
        from roboscale.env.netcmd import require_root

        require_root()


def run_one(
    backend: Backend, envs: Environments, t: TrialPlan, run_dir: Path, th: Thresholds
) -> dict[str, Any]:
    out = trial_dir(run_dir, t.trial)
    raw = out / "raw"
    if out.exists():
        shutil.rmtree(out)
    raw.mkdir(parents=True)
    meta: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "tool_version": roboscale.__version__,
        "backend": backend.name,
        "backend_version": backend.version(),
        "params": t.params(),
        "host": host_facts(),
        "warmup_discarded": t.warmup,
        "start": wall_clock(),
    }
    try:
        where = envs.placement(t)
        meta["env"] = where.facts
        if where.machine is not None:  # real machines: theirs, not the controller's facts
            meta["host"] = dict(where.machine)
        meta["host"]["link_profile"] = t.link_crossed
        meta["host"]["cpu_quota"] = t.cpu if t.cpu is not None else meta["host"]["cpu_quota"]
        infra = envs.infrastructure(t)
        clocks_before = envs.clocks()
        with envs.background_load(t):
            run_nodes(backend, infra, t, raw, where)
        if clocks_before:
            meta["clocks"] = to_local_clock(backend, t, raw, where, clocks_before, envs.clocks())
        tables, nodes = collect(t, raw, where)
    except (NodeFailure, UserError, OSError, ValueError) as e:
        # A node, the hosts, the infrastructure or a raw file failed this trial: it is
        # recorded as failed and the sweep goes on; finished trials stay on disk.
        meta.update(end=wall_clock(), error=str(e))
        write_trial(run_dir, t.trial, [], meta)
        return {**t.params(), "error": str(e), "sustained": False}
    meta.update(end=wall_clock(), nodes=nodes, usage=node_usage(nodes))
    write_trial(run_dir, t.trial, tables, meta)
    shutil.rmtree(raw)
    entry = summarize_trial(read_records(run_dir, t.trial), t.params(), th, nodes)
    entry["usage"] = meta["usage"]
    if "clocks" in meta:
        entry["clock"] = meta["clocks"]["one_way"]
    return entry


def to_local_clock(
    backend: Backend,
    t: TrialPlan,
    raw: Path,
    where: Placement,
    before: dict[str, OffsetEstimate],
    after: dict[str, OffsetEstimate],
) -> dict[str, Any]:
    """Put every node's timestamps on this machine's clock, with the offset of its host
    measured before and after the trial, and say how far one-way figures can be off:
    the bounds of the two hosts a message crosses, added."""
    clocks = {host: TrialClock(before[host], after[host]) for host in before}
    processes = get_workload(t.workload).processes(t, together=backend.placement == "pair")
    for stage in processes:
        for process in stage:
            for node in process.nodes:
                shift_times(raw / f"{node.name}.raw", clocks[where.names[node.host]].offset_ns)
    bounds = sorted((c.bound_ns for c in clocks.values()), reverse=True)
    bound_us = (sum(bounds[:2]) if len(bounds) > 1 else 0) / 1e3
    return {
        "hosts": {host: c.as_dict() for host, c in clocks.items()},
        "one_way": {
            "bound_us": round(bound_us, 1),
            "valid": bound_us <= t.clock_max_bound_us,
            "max_bound_us": t.clock_max_bound_us,
        },
    }


def write_run_file(
    run_dir: Path, spec: Spec, spec_text: str, command: str, backends: dict[str, Backend]
) -> None:
    write_json(
        run_dir / RUN_FILE,
        {
            "format_version": FORMAT_VERSION,
            "tool_version": roboscale.__version__,
            "spec_name": spec.name,
            "spec_description": spec.description,
            "spec": spec_text,
            "command": command,
            "created_unix_s": time.time(),
            "host": host_facts(),
            "backends": {name: b.version() for name, b in backends.items()},
        },
    )


def run_sweep(
    spec: Spec,
    trials: list[TrialPlan],
    run_dir: Path,
    spec_text: str,
    command: str,
    console: Console,
    resume: bool = False,
) -> RunOutcome:
    """Run the trials; with `resume`, those `run_dir` holds finished already are kept."""
    backends = check_backends(sorted({t.backend for t in trials}))
    check_trials(trials, backends)
    finished = claim(run_dir, spec.name, spec_text, trials, resume)
    prepare_run_dir(run_dir)
    if not (run_dir / RUN_FILE).exists():
        write_run_file(run_dir, spec, spec_text, command, backends)
    if finished:
        console.print(f"resuming: {len(finished)} finished trials kept, {len(trials)} planned")
        trials = [t for t in trials if t.trial not in finished]
    th = Thresholds(**spec.verdict.model_dump())
    failed = 0
    done = 0
    estimate = [estimate_s(t) for t in trials]
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[done]}/{task.fields[n]} trials"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    try:
        with (
            Environments(run_dir, backends) as envs,
            Progress(*columns, console=console) as bar,
        ):
            task = bar.add_task("starting", total=sum(estimate), n=len(trials), done=0)
            for t in trials:
                if done and t.pause_s:
                    time.sleep(t.pause_s)
                bar.update(
                    task,
                    description=f"{t.backend} {t.workload} "
                    + ("burst " if t.burst else f"{t.rate_hz:g} Hz ")
                    + f"{t.subject or t.payload} x{t.measured_nodes} run {t.run}",
                )
                entry = run_one(backends[t.backend], envs, t, run_dir, th)
                append_summary(run_dir, entry, th.to_dict())
                failed += bool(entry.get("error"))
                done += 1
                bar.update(task, completed=sum(estimate[:done]), done=done)
                _log_trial(console, entry)
    except KeyboardInterrupt:
        return RunOutcome(run_dir, done, failed, interrupted=True)
    return RunOutcome(run_dir, done, failed, interrupted=False)


def _log_trial(console: Console, e: dict[str, Any]) -> None:
    if e.get("error"):
        console.print(f"  [red]✗ {e['trial']}: {e['error']}[/red]")
        return
    key, arrived, what = workload_of(e).log_words
    rtt = e[key]
    mark = "[green]✓[/green]" if e["sustained"] else "[yellow]✗[/yellow]"
    p50, p99, rate = (
        _figure(v) for v in (rtt.get("p50"), rtt.get("p99"), e.get("achieved_rate_hz"))
    )
    pace = "a burst, sent back to back" if e.get("burst") else f"{rate} Hz achieved"
    console.print(
        f"  {mark} {e['trial']}: {e['received']}/{e['sent']} {arrived}, "
        f"{pace}, {what} p50 {p50} µs p99 {p99} µs"
    )


def _figure(value: float | None) -> str:
    """A figure of a trial line; `-` where the trial has none (nothing arrived, or a
    replay too short to time), never None or a traceback."""
    return "-" if value is None else f"{value:.0f}"
