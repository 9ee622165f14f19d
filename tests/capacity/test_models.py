from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from roboscale.capacity.data import Observation
from roboscale.capacity.models import fit_cslv, fit_two_resource, max_nodes, max_rate
from roboscale.errors import UserError

Make = Callable[..., list[Observation]]


def test_two_resource_recovers_known_parameters(make_trials: Make, truth: type) -> None:
    t = truth()
    m = fit_two_resource(make_trials(t), draws=30)
    p = m.params
    assert p["cpu_s_per_node_s"] == pytest.approx(t.per_node, rel=0.05)
    assert p["cpu_s_per_message"] == pytest.approx(t.per_message, rel=0.1)
    assert p["cpu_s_per_byte"] == pytest.approx(t.per_byte, rel=0.1)
    assert p["cpu_budget_cores"] == pytest.approx(t.cpu_budget, rel=0.1)
    low, high = m.details["cpu_bracket_cores"]
    assert low <= p["cpu_budget_cores"] <= high
    assert math.isinf(p["link_budget_bytes_s"])
    assert m.details["misclassified"] <= 1
    fitted = ("cpu_s_per_node_s", "cpu_s_per_message", "cpu_s_per_byte", "cpu_budget_cores")
    assert all((se := m.stderr[k]) is not None and se > 0 for k in fitted)


def test_numeric_arrays_get_their_own_byte_cost(make_trials: Make, truth: type) -> None:
    t = truth()
    m = fit_two_resource(make_trials(t, numeric=(4250,)), draws=20)
    p = m.params
    assert p["cpu_s_per_byte"] == pytest.approx(t.per_byte, rel=0.15)
    assert p["cpu_s_per_numeric_byte"] == pytest.approx(t.per_numeric_byte, rel=0.15)
    assert m.details["kinds_fitted"] == {"bytes": True, "numeric": True}
    for rate in (10.0, 100.0):
        scan = max_nodes(m, 4250, rate, numeric=True)[0]
        assert scan == pytest.approx(t.max_nodes(rate, 4250, True), rel=0.15)
        assert scan < max_nodes(m, 4250, rate)[0]


def test_a_kind_never_fitted_is_priced_like_the_other(make_trials: Make, truth: type) -> None:
    m = fit_two_resource(make_trials(truth()), draws=10)
    assert m.params["cpu_s_per_numeric_byte"] == m.params["cpu_s_per_byte"]
    assert m.details["kinds_fitted"] == {"bytes": True, "numeric": False}


def test_link_budget_is_recovered_when_it_binds(make_trials: Make, truth: type) -> None:
    t = truth(link_budget=2e8)
    m = fit_two_resource(make_trials(t, noise=0.0), draws=20)
    low, high = m.details["link_bracket_bytes_s"]
    assert low <= t.link_budget < high
    assert m.details["misclassified"] == 0


def test_no_link_budget_is_fitted_on_loopback(make_trials: Make, truth: type) -> None:
    t = truth(link_budget=2e8)  # a byte limit the trials show, but no link was crossed
    obs = make_trials(t, noise=0.0, host="hostname=a|link_profile=loopback")
    m = fit_two_resource(obs, draws=10)
    assert math.isinf(m.params["link_budget_bytes_s"])
    assert all(math.isinf(v) for v in m.draws[:, 5])


def test_two_resource_explains_what_cslv_cannot(make_trials: Make, truth: type) -> None:
    """Many nodes at 1 Hz fail (per-node cost); tiny messages fail at high rates
    (per-message cost). CSLV, linear in the size, misses both."""
    t = truth()
    obs = make_trials(t)
    two, cslv = fit_two_resource(obs, draws=20), fit_cslv(obs, draws=20)
    assert not t.sustained(256, 1.0, 11)  # the thesis's 256 nodes at 1 Hz
    assert max_nodes(two, 11, 1.0)[0] == pytest.approx(t.max_nodes(1.0, 11), rel=0.1)
    assert max_nodes(cslv, 11, 1.0)[0] > 1000
    assert max_nodes(two, 11, 1000.0)[0] == pytest.approx(t.max_nodes(1000.0, 11), rel=0.1)
    assert max_nodes(cslv, 11, 1000.0)[0] > 3 * t.max_nodes(1000.0, 11)
    assert cslv.details["misclassified"] > two.details["misclassified"]


def test_max_rate_inverts_max_nodes(make_trials: Make, truth: type) -> None:
    m = fit_two_resource(make_trials(truth()), draws=10)
    rate = max_rate(m, 64, 4250)[0]
    assert max_nodes(m, 4250, rate)[0] == pytest.approx(64, rel=1e-6)


def test_whole_life_cpu_with_varied_message_counts(make_trials: Make, truth: type) -> None:
    t = truth()
    obs = make_trials(t, after_ready=False, messages=lambda rate: int(min(200, 20 * rate)) + 50)
    m = fit_two_resource(obs, draws=10)
    assert m.details["cpu_accounting"] == "whole_life"
    assert m.details["cpu_s_per_node_start"] == pytest.approx(t.start_s, rel=0.1)
    # Start-up noise swamps the short high-rate trials: looser than with after-READY CPU.
    assert m.params["cpu_s_per_message"] == pytest.approx(t.per_message, rel=0.3)


def test_whole_life_cpu_with_fixed_message_counts_is_refused(
    make_trials: Make, truth: type
) -> None:
    with pytest.raises(UserError, match="cannot be told apart"):
        fit_two_resource(make_trials(truth(), after_ready=False), draws=5)


def test_no_boundary_is_refused(make_trials: Make, truth: type) -> None:
    easy = make_trials(truth(cpu_budget=1e9))
    with pytest.raises(UserError, match="all 96 trials were sustained"):
        fit_cslv(easy)


def test_cslv_is_the_thesis_volume(make_trials: Make, truth: type) -> None:
    """With one size and no per-node or per-message cost, N f S is the whole story."""
    t = truth(per_node=0.0, per_message=0.0, per_byte=1e-9, cpu_budget=0.5)
    m = fit_cslv(make_trials(t, sizes=(4250,), noise=0.0), draws=20)
    assert m.details["misclassified"] == 0
    low, high = m.details["bracket_bytes_s"]
    assert low <= 0.5 / 1e-9 < high
    assert max_nodes(m, 4250, 20.0)[0] == pytest.approx(m.params["cslv_bytes_s"] / (20 * 4250))
