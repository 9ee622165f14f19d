"""Which results folders a run may write into, and what --resume keeps."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import distribution

from roboscale.errors import UserError
from roboscale.lab.outdir import claim
from roboscale.safewrite import write_json
from roboscale.spec.loader import load_spec
from roboscale.spec.planner import TrialPlan, plan

TEXT = "name: exp\nsweep:\n  rate_hz: [10, 20]\ntrial:\n  runs: 1\n"


def trials(tmp_path: Path) -> list[TrialPlan]:
    path = tmp_path / "s.yaml"
    path.write_text(TEXT)
    return plan(load_spec(path))


def results(out: Path, name: str, text: str, entries: list[dict[str, object]]) -> Path:
    out.mkdir()
    write_json(out / "run.json", {"format_version": 1, "spec_name": name, "spec": text})
    write_json(out / "summary.json", {"format_version": 1, "thresholds": None, "trials": entries})
    return out


def measured(params: dict[str, object]) -> dict[str, object]:
    """A summary entry of a finished trial, its figures made up."""
    figures = {"sent": 10, "received": 10, "lost": 0, "loss": 0.0, "achieved_rate_hz": 10.0,
               "achieved_rate_min_hz": 10.0, "rtt_us": distribution(), "verdict": {},
               "one_way_us": distribution(), "send_lag_us": distribution()}  # fmt: skip
    return {**params, **figures, "sustained": True}


def test_new_and_empty_folders_are_taken(tmp_path: Path) -> None:
    assert claim(tmp_path / "new", "exp", TEXT, trials(tmp_path), resume=False) == set()
    (tmp_path / "empty").mkdir()
    assert claim(tmp_path / "empty", "exp", TEXT, trials(tmp_path), resume=True) == set()


def test_resume_keeps_finished_trials_only(tmp_path: Path) -> None:
    planned = trials(tmp_path)
    done = measured(planned[0].params())
    failed = {**planned[1].params(), "error": "node died", "sustained": False}
    out = results(tmp_path / "r", "exp", TEXT, [done, failed])
    assert claim(out, "exp", TEXT, planned, resume=True) == {planned[0].trial}
    with pytest.raises(UserError, match=r"1 of 2 trials finished\); --resume keeps them"):
        claim(out, "exp", TEXT, planned, resume=False)


def test_a_trial_planned_differently_now_runs_again(tmp_path: Path) -> None:
    planned = trials(tmp_path)
    old = measured({**planned[0].params(), "messages": 5})
    out = results(tmp_path / "r", "exp", TEXT, [old])
    assert claim(out, "exp", TEXT, planned, resume=True) == set()


@pytest.mark.parametrize(("name", "text"), [("other", TEXT), ("exp", TEXT + "seed: 3\n")])
def test_another_experiment_is_refused_even_with_resume(
    tmp_path: Path, name: str, text: str
) -> None:
    out = results(tmp_path / "r", name, text, [])
    with pytest.raises(UserError, match="from another spec; two experiments are never mixed"):
        claim(out, "exp", TEXT, trials(tmp_path), resume=True)


def test_files_that_are_no_results_are_refused(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match="is not empty and holds no roboscale results"):
        claim(tmp_path, "exp", TEXT, [], resume=True)
    with pytest.raises(UserError, match="is a file; --out names a results folder"):
        claim(tmp_path / "notes.txt", "exp", TEXT, [], resume=False)


def test_replace_removes_only_a_runs_own_results_of_the_same_spec(tmp_path: Path) -> None:
    planned = trials(tmp_path)
    out = results(tmp_path / "r", "exp", TEXT, [measured(planned[0].params())])
    (out / "trials" / planned[0].trial).mkdir(parents=True)
    (out / "report.html").write_text("old")
    (out / ".summary.json.abc.part").write_text("")  # a write cut short
    assert claim(out, "exp", TEXT, planned, resume=False, replace=True) == set()
    assert list(out.iterdir()) == []


def test_replace_never_removes_anything_else(tmp_path: Path) -> None:
    planned = trials(tmp_path)
    other = results(tmp_path / "other", "another", "name: another\n", [])
    with pytest.raises(UserError, match="holds results of experiment 'another'"):
        claim(other, "exp", TEXT, planned, resume=False, replace=True)
    assert (other / "run.json").exists()
    mine = results(tmp_path / "mine", "exp", TEXT, [])
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(UserError, match=r"holds notes.txt, which no roboscale run wrote"):
        claim(mine, "exp", TEXT, planned, resume=False, replace=True)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt", "run.json", "summary.json"]
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "a.txt").write_text("x")
    with pytest.raises(UserError, match="holds no roboscale results"):
        claim(tmp_path / "files", "exp", TEXT, planned, resume=False, replace=True)
