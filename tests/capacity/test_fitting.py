from __future__ import annotations

import math

import numpy as np

from roboscale.capacity.fitting import best_boundary, best_two_limits, nnls


def test_nnls_recovers_coefficients_and_clamps_negative_ones() -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(1, 10, size=(200, 3))
    y = x @ np.array([2.0, 0.5, 0.0]) + rng.normal(0, 0.01, 200) - 0.3 * x[:, 2] * 0
    fit = nnls(x, y)
    assert np.allclose(fit.coef, [2.0, 0.5, 0.0], atol=0.01)
    assert fit.stderr[0] < 0.01 and fit.stderr[1] < 0.01
    # A truly negative effect is held at zero, not fitted negative.
    neg = nnls(x, x[:, 0] - 0.5 * x[:, 1])
    assert neg.coef[1] == 0.0 and np.all(neg.coef >= 0)


def test_boundary_separates_and_brackets() -> None:
    loads = np.array([1.0, 2.0, 4.0, 8.0, 16.0])
    ok = np.array([True, True, True, False, False])
    b = best_boundary(loads, ok)
    assert (b.low, b.high, b.errors) == (4.0, 8.0, 0)
    assert b.value == math.sqrt(32.0)


def test_boundary_with_noise_minimizes_errors_and_reports_them() -> None:
    loads = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    ok = np.array([True, True, False, True, False, False])
    b = best_boundary(loads, ok)
    assert b.errors == 1 and b.low in (2.0, 4.0)


def test_all_sustained_gives_an_unbounded_limit() -> None:
    b = best_boundary(np.array([1.0, 2.0]), np.array([True, True]))
    assert not b.bounded and b.value == 2.0


def test_two_limits_use_the_link_only_when_it_explains_failures() -> None:
    cpu = np.array([0.1, 0.2, 0.3, 0.9, 0.1, 0.2])
    link = np.array([1.0, 2.0, 3.0, 1.0, 50.0, 60.0])
    ok = np.array([True, True, True, False, False, False])
    cpu_limit, link_limit = best_two_limits(cpu, link, ok)
    assert cpu_limit.errors == 0
    assert 3.0 <= link_limit.value < 50.0
    # Without link-bound failures the link stays unbounded.
    _, free = best_two_limits(cpu[:4], link[:4], ok[:4])
    assert not free.bounded
