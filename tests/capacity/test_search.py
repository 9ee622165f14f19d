from __future__ import annotations

import pytest

from roboscale.capacity.search import Budget, search_max_nodes, search_max_rate


class FakeClock:
    """Each trial advances time by a fixed amount: no real waiting, no timing asserts."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def nodes_trial(limit: int, clock: FakeClock, cost_s: float = 10.0) -> tuple[list[int], object]:
    seen: list[int] = []

    def run(n: int) -> bool:
        seen.append(n)
        clock.now += cost_s
        return n <= limit

    return seen, run


@pytest.mark.parametrize("limit", [2, 3, 10, 37, 100, 254])
def test_node_search_brackets_the_boundary(limit: int) -> None:
    clock = FakeClock()
    seen, run = nodes_trial(limit, clock)
    res = search_max_nodes(run, max_nodes=256, rel_tol=0.0, abs_tol=2, budget=Budget(1e9, clock))  # type: ignore[arg-type]
    assert res.stop == "tight"
    assert res.sustained is not None and res.unsustained is not None
    assert res.sustained <= limit < res.unsustained
    assert res.unsustained - res.sustained <= 2
    assert all(n % 2 == 0 for n in seen)
    assert seen[:2] == [2, 4] or limit < 4
    assert len(seen) <= 2 * 9  # exponential + bisection: logarithmic


def test_node_search_stops_at_the_cap_and_at_the_floor() -> None:
    clock = FakeClock()
    _, run = nodes_trial(10_000, clock)
    res = search_max_nodes(run, max_nodes=100, budget=Budget(1e9, clock))  # type: ignore[arg-type]
    assert res.stop == "cap" and res.sustained == 100 and res.unsustained is None
    _, fail = nodes_trial(0, clock)
    res = search_max_nodes(fail, budget=Budget(1e9, clock))  # type: ignore[arg-type]
    assert res.stop == "floor" and res.sustained is None and res.unsustained == 2


def test_relative_tolerance_stops_early() -> None:
    clock = FakeClock()
    seen, run = nodes_trial(200, clock)
    res = search_max_nodes(run, rel_tol=0.5, budget=Budget(1e9, clock))  # type: ignore[arg-type]
    # 128..256 is 100 % wide: one bisection to 192 leaves 33 %, within 50 %.
    assert res.stop == "tight" and res.sustained == 192 and res.unsustained == 256
    assert len(seen) == 9


def test_budget_is_respected() -> None:
    clock = FakeClock()
    seen, run = nodes_trial(1000, clock, cost_s=10.0)
    res = search_max_nodes(run, max_nodes=1024, budget=Budget(35.0, clock))  # type: ignore[arg-type]
    # Three 10 s trials fit in 35 s; a fourth would overrun, so it is never started.
    assert res.stop == "budget" and len(seen) == 3 and clock.now <= 35.0
    assert [p.value for p in res.probes] == [2, 4, 8]


def test_rate_search_brackets_geometrically() -> None:
    clock = FakeClock()
    seen: list[float] = []

    def run(rate: float) -> bool:
        seen.append(rate)
        clock.now += 5
        return rate <= 1400.0

    res = search_max_rate(run, start_hz=100, rel_tol=0.05, budget=Budget(1e9, clock))
    assert res.stop == "tight"
    assert res.sustained is not None and res.unsustained is not None
    assert res.sustained <= 1400 < res.unsustained
    assert res.unsustained / res.sustained - 1 <= 0.05
    assert seen[:5] == [100, 200, 400, 800, 1600]


def test_rate_search_goes_down_from_a_failing_start() -> None:
    res = search_max_rate(lambda r: r <= 30, start_hz=1000, rel_tol=0.1)
    assert res.sustained is not None and res.sustained <= 30 < (res.unsustained or 0)


def test_bad_search_arguments_are_refused() -> None:
    with pytest.raises(ValueError):
        search_max_nodes(lambda n: True, start=3, step=2)
    with pytest.raises(ValueError):
        search_max_rate(lambda r: True, start_hz=0)
