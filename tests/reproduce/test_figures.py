"""Figures and rules over summary entries (hand-made entries: the analysis, not the lab)."""

from __future__ import annotations

from typing import Any

import pytest

from roboscale.reproduce.figures import NoFigure, compute, passes, rule_words
from roboscale.reproduce.model import (
    AtLeast,
    AtMost,
    Between,
    Difference,
    Knee,
    Limit,
    Pick,
    Ratio,
    Unsustained,
    Within,
)


def entry(rate: float, p50: float, sustained: bool = True, **more: Any) -> dict[str, Any]:
    return {"rate_hz": rate, "rtt_us": {"p50": p50}, "sustained": sustained, **more}


RUN = {
    "e": [
        entry(100, 100.0),
        entry(200, 120.0),
        entry(400, 900.0, sustained=False),
        entry(800, 5000.0),
        entry(1600, 0.0, error="node died"),
    ],
    "chain": [
        {
            "payload": "1MB",
            "one_way_us": {"p50": 40.0, "p99": 80.0},
            "per_node": [
                {"hop_us": {"p50": 10.0, "p99": 30.0}},
                {"hop_us": {"p50": 30.0, "p99": 60.0}},
            ],
        }
    ],
}


def test_pick_ratio_difference() -> None:
    p = Pick(experiment="e", where={"rate_hz": 200}, metric="rtt_us.p50")
    q = Pick(experiment="e", where={"rate_hz": 100}, metric="rtt_us.p50")
    assert compute(RUN, p) == 120.0
    assert compute(RUN, Ratio(num=p, den=q)) == pytest.approx(1.2)
    assert compute(RUN, Difference(a=p, b=q)) == pytest.approx(20.0)
    assert (
        compute(RUN, Pick(experiment="e", where={"rate_hz": [100, 3]}, metric="rtt_us.p50")) == 100
    )


def test_knee_stops_at_the_first_unsustained_rate_and_counts() -> None:
    assert compute(RUN, Knee(experiment="e", where={})) == 200
    assert compute(RUN, Unsustained(experiment="e", where={})) == 2  # 400 Hz and the failed one


def test_chain_figures() -> None:
    def chain(metric: str) -> float:
        return compute(RUN, Pick(experiment="chain", where={"payload": "1MB"}, metric=metric))

    assert chain("hop_p50_sum") == 40.0
    assert chain("hop_p50_median") == 20.0
    assert chain("hop_p50_spread") == 3.0
    assert chain("hop_tail_median") == pytest.approx(2.5)
    assert chain("tail") == 2.0


@pytest.mark.parametrize(
    ("where", "problem"),
    [
        ({"rate_hz": 1600}, "failed"),
        ({"rate_hz": 3}, "no trial"),
        ({}, "5 trials"),
    ],
)
def test_no_figure_says_why(where: dict[str, Any], problem: str) -> None:
    with pytest.raises(NoFigure, match=problem):
        compute(RUN, Pick(experiment="e", where=where, metric="rtt_us.p50"))
    with pytest.raises(NoFigure, match="not run"):
        compute({}, Pick(experiment="e", where=where, metric="rtt_us.p50"))


def test_rules_and_their_words() -> None:
    about = Within(target=1.0, tolerance=0.25)
    assert passes(about, 1.25) and passes(about, 0.75) and not passes(about, 1.26)
    assert rule_words(about, "x") == "within ±25 % of 1x (0.75-1.25x)"
    assert passes(Between(low=1, high=2), 2) and not passes(Between(low=1, high=2), 2.1)
    assert passes(AtLeast(bound=1), 1) and not passes(AtMost(bound=0), 1)
    assert rule_words(AtLeast(bound=1000), " Hz") == "at least 1,000 Hz"


def test_a_failure_limit_is_the_last_count_that_kept_up() -> None:
    def held(workers: int, lost: int, ms: float) -> dict[str, Any]:
        summary = {"frames_lost": lost, "latency_p50_ms": ms}
        return {"stack": "s", "workers": workers, "facetrack": {"summary": summary}}

    run = {"h": [held(4, 0, 40.0), held(16, 0, 90.0), held(64, 0, 900.0), held(256, 0, 50.0)]}
    bounds = {"facetrack.summary.frames_lost": 0.0, "facetrack.summary.latency_p50_ms": 500.0}
    limit = Limit(experiment="h", where={"stack": "s"}, axis="workers", bounds=bounds)
    assert compute(run, limit) == 16  # 64 workers passed the latency bound; 256 does not count
    run["h"][1]["facetrack"]["summary"]["frames_lost"] = 1
    assert compute(run, limit) == 4
    run["h"][0]["error"] = "did not start"
    assert compute(run, limit) == 0
    every = {"h": [held(4, 0, 40.0), held(16, 0, 90.0)]}
    with pytest.raises(NoFigure, match="held every workers swept, up to 16: a lower bound"):
        compute(every, limit)
