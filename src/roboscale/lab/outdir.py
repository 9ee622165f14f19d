"""The results folder a run writes into: never two experiments in one folder.

A folder is taken when it is new or empty. A folder that already holds results of
the same spec (same name, same text) is taken only with `--resume`: the trials it
finished are kept and skipped, the others (failed or never run) run again; or with
`--replace`: its earlier results are removed (`make demo` run twice). A folder
holding another experiment's results, or files that are no results at all, is
refused even then, so one report never mixes two runs and nothing else is removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from roboscale.errors import UserError
from roboscale.records.folder import ResultsFolder
from roboscale.records.models import FailedEntry, SummaryEntry
from roboscale.records.schema import RUN_FILE
from roboscale.spec.planner import TrialPlan

ELSEWHERE = "choose another folder with --out"


def claim(
    out: Path,
    name: str,
    spec_text: str,
    trials: list[TrialPlan],
    resume: bool,
    replace: bool = False,
) -> set[str]:
    """Check that the run may write into `out`; the ids of trials already finished there.
    With `replace`, earlier results of the same spec are removed first."""
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: is a file; --out names a results folder", hint=ELSEWHERE)
    if not out.exists() or not any(out.iterdir()):
        return set()
    folder = ResultsFolder(out)
    if not folder.is_results():
        raise UserError(
            f"{out}: is not empty and holds no roboscale results (no {RUN_FILE}); "
            "allowed: a new or empty folder, or the folder of an unfinished run with --resume",
            hint=ELSEWHERE,
        )
    run = folder.run()
    if run.spec_name != name or run.spec != spec_text:
        raise UserError(
            f"{out}: holds results of experiment {run.spec_name!r} from another spec; "
            "two experiments are never mixed in one folder, even with --resume",
            hint=ELSEWHERE,
        )
    if replace:
        folder.clear()
        return set()
    finished = _finished(folder.summary().trials, trials)
    if not resume:
        raise UserError(
            f"{out}: holds results of {name!r} already ({len(finished)} of {len(trials)} "
            "trials finished); --resume keeps them and runs the others, --replace runs all "
            "again in their place",
            hint=ELSEWHERE,
        )
    return finished


def _finished(entries: Sequence[SummaryEntry], trials: list[TrialPlan]) -> set[str]:
    """Trials whose summary entry has no error and the very parameters planned now."""
    by_id = {e.trial: e.to_dict() for e in entries if not isinstance(e, FailedEntry)}
    done = set()
    for t in trials:
        entry = by_id.get(t.trial)
        if entry is not None and all(entry.get(k) == v for k, v in t.params().items()):
            done.add(t.trial)
    return done
