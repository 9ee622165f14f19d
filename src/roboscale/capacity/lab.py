"""Run capacity-search probes as ordinary lab trials.

Each probe becomes the spec's trial settings at one (backend, payload, rate,
pairs), run `trial.runs` times through the same code as `roboscale bench`, and
appended to the results folder's summary.json, so `capacity fit` reads the search's
trials like any others. A probe is sustained only if every run of it was.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from rich.console import Console

from roboscale.analysis.verdict import Thresholds
from roboscale.capacity.cli import TrialRunner
from roboscale.lab.envs import Environments
from roboscale.lab.outdir import claim
from roboscale.lab.runner import (
    check_backends,
    check_trials,
    prepare_run_dir,
    run_one,
    write_run_file,
)
from roboscale.records.folder import ResultsFolder
from roboscale.records.models import FailedEntry
from roboscale.spec.planner import plan
from roboscale.spec.schema import Spec


@contextmanager
def open_lab(spec: Spec, out: Path, spec_text: str, console: Console) -> Iterator[TrialRunner]:
    """Start each backend's infrastructure once; yield a function that runs one probe."""
    backends = check_backends(list(spec.sweep.backend))
    claim(out, spec.name, spec_text, [], resume=False)
    prepare_run_dir(out)
    folder = ResultsFolder(out)
    write_run_file(folder, spec, spec_text, "roboscale capacity search", backends)
    th = Thresholds(**spec.verdict.model_dump())
    counter = 0

    with Environments(out, backends) as envs:

        def run(backend: str, payload: tuple[str, int], rate_hz: float, pairs: int) -> bool:
            nonlocal counter
            if backend not in backends:
                backends.update(check_backends([backend]))
            sweep = spec.sweep.model_copy(
                update={
                    "backend": [backend],
                    "payload": [payload],
                    "rate_hz": [rate_hz],
                    "pairs": [pairs],
                }
            )
            ok = True
            trials = plan(spec.model_copy(update={"sweep": sweep}))
            check_trials(trials, backends)
            for t in trials:
                if counter and t.pause_s:
                    time.sleep(t.pause_s)
                t = replace(t, index=counter, trial=f"t{counter:04d}-{t.trial.split('-', 1)[1]}")
                counter += 1
                entry = run_one(backends[backend], envs, t, folder, th)
                folder.add_entry(entry, th.to_dict())
                held = not isinstance(entry, FailedEntry) and entry.sustained
                ok = ok and held
                mark = "[green]ok[/green]" if held else "[yellow]not sustained[/yellow]"
                console.print(f"    {t.trial}: {mark}")
            return ok

        yield run
