"""bench/throughput.py: every system's flood pair delivers a step whole and in order
(real processes, tiny counts, no timing asserted); the search over rates, on a stand-in
pair whose capacity is known (the search is analysis; the pairs above are the real part)."""

from __future__ import annotations

from pathlib import Path

import pytest

import throughput  # bench/throughput.py, importable through tests/bench/conftest.py


def assert_whole_step(system: str, rust: Path | None = None) -> None:
    with throughput.pair(system, 4250, 0.1, rust) as p:  # its probe step arrived whole
        step = p.run(200.0, 40)
    assert step.sent == 40 and step.received == 40 and step.in_order


@pytest.mark.slow
@pytest.mark.zenoh
@pytest.mark.parametrize("system", [throughput.RUNTIME, throughput.ZENOH])
def test_zenoh_flood_pairs_deliver_a_step_whole(system: str, zenoh: None) -> None:
    assert_whole_step(system)


@pytest.mark.slow
@pytest.mark.dds
def test_dds_flood_pair_delivers_a_step_whole(dds: None) -> None:
    assert_whole_step(throughput.DDS)


@pytest.mark.slow
@pytest.mark.ros1
def test_rospy_flood_pair_delivers_a_step_whole(ros1: None) -> None:
    assert_whole_step(throughput.ROSPY)


@pytest.mark.slow
@pytest.mark.zenoh
def test_rust_flood_pair_delivers_a_step_whole(rust_baseline: Path) -> None:
    assert_whole_step(throughput.RUST, rust_baseline)


class Capacity:
    """Stands in for a pair: sustains any rate up to `limit`, fails above."""

    def __init__(self, limit: float) -> None:
        self.limit, self.size, self.steps = limit, 4250, []

    def step(self, rate: float) -> throughput.Step:
        ok = rate <= self.limit
        made = throughput.Step(rate, 10, 10, 10 if ok else 9, ok, rate, ok)
        self.steps.append(made)
        return made


@pytest.mark.parametrize("limit", [300.0, 5000.0, 70_000.0])
def test_the_search_finds_the_capacity_within_its_resolution(limit: float) -> None:
    search = throughput.Search(Capacity(limit))  # type: ignore[arg-type]
    search.bracket()
    for _ in range(3):
        search.refine(4)
    resolution = search.resolution(4)
    assert resolution is not None and len(search.found) == 3
    assert all(limit / resolution <= f <= limit for f in search.found)


def test_a_system_sustaining_nothing_is_reported_as_zero() -> None:
    search = throughput.Search(Capacity(1.0))  # type: ignore[arg-type]
    search.bracket()
    search.refine(4)
    assert search.low is None and search.found == [0.0]


def test_the_goal_is_judged_on_the_ratio_of_each_refinement() -> None:
    def search(found: list[float]) -> throughput.Search:
        s = throughput.Search(Capacity(1e9))  # type: ignore[arg-type]
        for _ in range(3):  # the steps behind the figures: 30 messages that arrived
            s.pair.step(1.0)
        s.found = found
        return s

    met = {throughput.RUNTIME: search([50_000.0] * 3), throughput.ROSPY: search([4000.0] * 3)}
    missed = {throughput.RUNTIME: search([20_000.0] * 3), throughput.ROSPY: search([4000.0] * 3)}
    assert throughput.goals({4250: met})[0]["met"] is True
    assert throughput.goals({4250: missed})[0]["met"] is False
    assert throughput.goals({})[0]["met"] is False  # nothing measured: not met
    few = {throughput.RUNTIME: search([50_000.0] * 3), throughput.ROSPY: search([4000.0])}
    assert throughput.goals({4250: few})[0]["met"] == "not judged"  # one refinement a side
