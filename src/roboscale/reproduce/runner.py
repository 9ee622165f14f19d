"""Running a finding's experiments through the lab, as `roboscale bench` does, a few
times each, with the load average sampled and other processes' CPU time measured during
every run (busy.py), and keeping their summaries as evidence."""

from __future__ import annotations

import os
import shlex
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console

from roboscale.errors import UserError
from roboscale.lab.runner import estimate_s, run_sweep
from roboscale.reproduce.busy import CpuMeter
from roboscale.reproduce.evidence import Evidence
from roboscale.reproduce.model import Experiment, LoadStats, RunRecord
from roboscale.spec.loader import load_spec, profiles_path
from roboscale.spec.planner import count_trials, plan, rate_samples
from roboscale.spec.schema import Spec
from roboscale.yamlfile import read_text

LOAD_PERIOD_S = 1.0


class LoadSampler:
    """Samples the 1-minute load average every second on a thread of its own, which
    stop() joins."""

    def __init__(self, period_s: float = LOAD_PERIOD_S) -> None:
        self.period_s = period_s
        self.before = os.getloadavg()[0]
        self.peak = self.before
        self.samples = 1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="load-sampler", daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.period_s):
            self.peak = max(self.peak, os.getloadavg()[0])
            self.samples += 1

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def stats(self) -> LoadStats:
        after = os.getloadavg()[0]
        cores = os.cpu_count() or 1
        peak = max(self.peak, after)
        return LoadStats(
            cores=cores, before=self.before, max=peak, after=after, samples=self.samples
        )


def load_experiment(root: Path, exp: Experiment, quick: bool) -> Spec:
    """The experiment's spec with its overrides, one run per sweep (reproduce repeats)."""
    spec = load_spec(root / exp.spec, quick=quick, backends=exp.backends)
    updates: dict[str, object] = {"trial": spec.trial.model_copy(update={"runs": 1})}
    if exp.stacks is not None:
        updates["sweep"] = spec.sweep.model_copy(update={"stack": list(exp.stacks)})
    return spec.model_copy(update=updates)


@dataclass(frozen=True)
class Estimate:
    trials: int
    seconds: float


def estimate(root: Path, exp: Experiment, quick: bool, runs: int) -> Estimate:
    spec = load_experiment(root, exp, quick)
    per_run = sum(estimate_s(t) * n for t, n in rate_samples(spec, exp.backends))
    return Estimate(count_trials(spec, exp.backends) * runs, per_run * runs)


def missing(exp: Experiment) -> list[str]:
    """What this machine lacks for the experiment: root, a backend, a stack."""
    from roboscale.backends.base import get_backend, known_backends
    from roboscale.facetrack.stack import get_stack, known_stacks

    lacks = []
    for need in exp.needs:
        if need == "root":
            if os.geteuid() != 0:
                lacks.append("root (emulated hosts, links or CPU quotas)")
            continue
        try:
            if need in known_backends():
                get_backend(need).check()
            elif need in known_stacks():
                get_stack(need).check()
            else:
                lacks.append(f"{need} (unknown)")
        except UserError as e:
            lacks.append(f"{need} ({e})")
    return lacks


def run_experiment(
    root: Path,
    exp: Experiment,
    *,
    quick: bool,
    runs: int,
    work: Path,
    evidence: Evidence,
    console: Console,
) -> list[RunRecord]:
    """Run the experiment `runs` times; each run's summaries go into the evidence."""
    spec = load_experiment(root, exp, quick)
    spec_path = root / exp.spec
    text = read_text(spec_path, "spec file")
    profiles = profiles_path(spec, spec_path)
    trials = plan(spec, exp.backends, str(profiles) if profiles else None)
    evidence.clear(exp.id)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    records = []
    for k in range(1, runs + 1):
        out = work / f"{exp.id}-{stamp}" / f"run-{k}"
        command = _command(exp, quick)
        console.print(f"[bold]{exp.id}[/bold] run {k} of {runs}: {command}")
        start = time.time()
        meter = CpuMeter().start()
        with LoadSampler() as load:
            outcome = run_sweep(spec, trials, out, text, command, console)
        other = meter.stop()
        record = RunRecord(
            experiment=exp.id,
            run=k,
            quick=quick,
            command=command,
            spec=exp.spec,
            start_unix_s=start,
            end_unix_s=time.time(),
            load=load.stats(),
            other=other,
            busy=other.other_cores > other.threshold_cores,
            trials=outcome.trials,
            failed=outcome.failed,
        )
        evidence.keep(out, record)
        records.append(record)
        mark = " [yellow]busy[/yellow]" if record.busy else ""
        console.print(
            f"  other work {other.other_cores:.2f} cores (own {other.own_cpu_s:.0f} CPU-s in "
            f"{other.wall_s:.0f} s){mark}; load average {record.load.before:.2f} before, "
            f"{record.load.max:.2f} at most; {outcome.failed} of {outcome.trials} trials failed"
        )
        if outcome.interrupted:
            raise KeyboardInterrupt
    return records


def _command(exp: Experiment, quick: bool) -> str:
    argv = ["roboscale", "bench", exp.spec]
    if quick:
        argv.append("--quick")
    if exp.backends:
        argv += ["--backend", ",".join(exp.backends)]
    if exp.stacks:
        argv += ["--stack", ",".join(exp.stacks)]
    return shlex.join(argv)
