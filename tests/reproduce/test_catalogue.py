"""The catalogue's declarations against the specs they name: every figure picks trials
that the experiment's plan (quick and full) really holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.reproduce.catalogue import EXPERIMENT_BY_ID, EXPERIMENTS, FINDINGS
from roboscale.reproduce.figures import experiments_of, matching, rule_words
from roboscale.reproduce.model import Difference, Figure, Pick, Ratio
from roboscale.reproduce.runner import load_experiment
from roboscale.spec.planner import plan

REPO = Path(__file__).resolve().parents[2]


def leaves(f: Figure) -> list[Figure]:
    if isinstance(f, Ratio):
        return leaves(f.num) + leaves(f.den)
    if isinstance(f, Difference):
        return leaves(f.a) + leaves(f.b)
    return [f]


def test_ids_are_unique_and_every_experiment_is_declared() -> None:
    assert len({f.id for f in FINDINGS}) == len(FINDINGS)
    assert len(EXPERIMENT_BY_ID) == len(EXPERIMENTS)
    for f in FINDINGS:
        assert set(f.experiments) <= set(EXPERIMENT_BY_ID), f.id
        reason = f.cannot_run or f.no_result
        assert reason or f.checks, f"{f.id}: neither checks nor a reason it has none"
        for check in f.checks:
            assert experiments_of(check.figure) <= set(f.experiments), (f.id, check.label)
            assert rule_words(check.rule, check.unit)


@pytest.mark.parametrize("quick", [True, False], ids=["quick", "full"])
def test_every_figure_picks_planned_trials(quick: bool) -> None:
    params = {}
    for exp in EXPERIMENTS:
        spec = load_experiment(REPO, exp, quick)
        params[exp.id] = [t.params() for t in plan(spec, exp.backends, None)]
    for f in FINDINGS:
        for check in f.checks:
            for leaf in leaves(check.figure):
                assert not isinstance(leaf, Ratio | Difference)
                found = matching(params[leaf.experiment], leaf.where)
                wanted = "exactly one" if isinstance(leaf, Pick) else "some"
                ok = len(found) == 1 if isinstance(leaf, Pick) else bool(found)
                assert ok, f"{f.id}: {check.label}: {wanted} trial of {leaf.where}, {len(found)}"


def test_the_seeds_parameters_are_the_experiments() -> None:
    """The issue's parameters: E7 at 4.25 KB (11 B its own row), E3 and E4 at 11 B."""
    by_id = {f.id: f for f in FINDINGS}
    assert "laserscan" in str(by_id["E7-256-1hz"].checks[0].figure)
    assert "text" in str(by_id["E7-256-1hz-11b"].checks[0].figure)
    for exp in ("thesis-e3-11b", "thesis-e4-11b"):
        spec = load_experiment(REPO, EXPERIMENT_BY_ID[exp], quick=True)
        assert spec.sweep.payload == [("text", 11)]
    spec = load_experiment(REPO, EXPERIMENT_BY_ID["thesis-e7-100hz"], quick=True)
    assert spec.sweep.pairs == [1, 2, 4] and spec.sweep.rate_hz == [100.0]


# Issue 25's "Findings with no row", and the thesis's E2 and E9, each with its row.
ISSUE_ROWS = [
    "E2-reboot", "E2-no-reboot", "E9-horizontal",  # the thesis's E2 and E9
    "E4-11b-wifi-slower",  # E4 at 11 B
    "E5-sensor-cpu", "E5-video-cpu", "E5-video-40hz",  # E5: CPU limits, video 20/40 Hz
    "E7-100hz-senders",  # 100 Hz with 1, 2 and 4 senders
    "E7-256-200hz", "E7-256-10hz",  # 256 nodes at 200 Hz and 10 Hz
    "LR-q5-freq-scaling", "LR-q5-realtime", "LR-q5-load",  # Q5's comparisons
    "LR-q6-graded", "LR-q6-jump",  # Q6
    "LR-listener-sync",  # Q7
    "LR-pingpong-increment", "LR-chain-additive", "LR-step-outliers",  # Q8
    "P-chaos-10-25", "P-restart-main-supervisor",  # chaos at 10 and 25, main node, supervisor
    "P-latency-workers", "P-quality-workers",  # against the number of workers
]  # fmt: skip


def test_every_finding_the_issue_lists_has_a_row() -> None:
    ids = {f.id for f in FINDINGS}
    assert [i for i in ISSUE_ROWS if i not in ids] == []
