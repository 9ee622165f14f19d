"""Numerical pieces of the capacity fits: thresholds that separate sustained from
unsustained trials, and non-negative least squares with standard errors."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Boundary:
    """A fitted limit: loads <= value are predicted sustained.

    `low` is the largest observed load on the sustained side and `high` the smallest
    on the unsustained side (inf when no trial was past the limit, so `value` is then
    only a lower bound); `errors` counts the trials this limit misclassifies.
    """

    value: float
    low: float
    high: float
    errors: int

    @property
    def bounded(self) -> bool:
        return math.isfinite(self.high)


UNBOUNDED = Boundary(math.inf, math.inf, math.inf, 0)


@dataclass(frozen=True)
class Cuts:
    """Every way to split sorted distinct loads: cut k predicts the first k groups sustained."""

    levels: FloatArray  # distinct loads, ascending
    errors: npt.NDArray[np.int64]  # misclassified trials per cut, len(levels) + 1


def cuts(loads: FloatArray, sustained: BoolArray) -> Cuts:
    levels, group = np.unique(loads, return_inverse=True)
    ok = np.bincount(group, weights=sustained.astype(np.float64), minlength=levels.size)
    bad = np.bincount(group, weights=(~sustained).astype(np.float64), minlength=levels.size)
    # Cut k: unsustained trials in groups < k are wrongly called sustained,
    # sustained trials in groups >= k are wrongly called unsustained.
    bad_below = np.concatenate([[0.0], np.cumsum(bad)])
    ok_above = np.concatenate([[0.0], np.cumsum(ok)])
    ok_above = ok_above[-1] - ok_above
    return Cuts(levels, np.rint(bad_below + ok_above).astype(np.int64))


def boundary_at(c: Cuts, k: int) -> Boundary:
    """The limit between group k-1 (sustained side) and group k, at their geometric mean."""
    low = float(c.levels[k - 1]) if k > 0 else 0.0
    high = float(c.levels[k]) if k < c.levels.size else math.inf
    if not math.isfinite(high):
        value = low
    elif low > 0:
        value = math.sqrt(low * high)
    else:
        value = high / 2
    return Boundary(value, low, high, int(c.errors[k]))


def best_boundary(loads: FloatArray, sustained: BoolArray) -> Boundary:
    """The limit with the fewest misclassified trials; among ties the lowest (conservative)."""
    if loads.size == 0:
        return UNBOUNDED
    c = cuts(loads, sustained)
    return boundary_at(c, int(np.argmin(c.errors)))


def best_two_limits(
    cpu: FloatArray, link: FloatArray, sustained: BoolArray
) -> tuple[Boundary, Boundary]:
    """Both limits at once: sustained iff cpu <= B_cpu and link <= B_link.

    A link limit is kept only if it lowers the misclassification count: among equal
    counts the unbounded link wins, so CPU explains all it can (fewest assumptions).
    """
    best: tuple[int, Boundary, Boundary] | None = None
    link_cuts = cuts(link, sustained)
    for k in range(link_cuts.levels.size, -1, -1):
        link_limit = boundary_at(link_cuts, k)
        inside = link <= link_limit.low if k > 0 else np.zeros(link.size, dtype=bool)
        if k == link_cuts.levels.size:
            link_limit, inside = UNBOUNDED, np.ones(link.size, dtype=bool)
        outside_errors = int(np.count_nonzero(sustained & ~inside))
        cpu_limit = best_boundary(cpu[inside], sustained[inside])
        errors = outside_errors + cpu_limit.errors
        if best is None or errors < best[0]:
            best = (errors, cpu_limit, link_limit)
    assert best is not None
    errors, cpu_limit, link_limit = best
    return (
        Boundary(cpu_limit.value, cpu_limit.low, cpu_limit.high, errors),
        Boundary(link_limit.value, link_limit.low, link_limit.high, errors),
    )


@dataclass(frozen=True)
class LinearFit:
    coef: FloatArray
    stderr: FloatArray  # NaN for a coefficient held at zero by the constraint
    residual_std: float
    r2: float


def nnls(x: FloatArray, y: FloatArray) -> LinearFit:
    """Least squares with coefficients >= 0, exact for the few columns used here.

    Every subset of columns is solved unconstrained; the feasible one with the
    smallest residual is the constrained optimum (its active set is one of them).
    Standard errors come from sigma^2 (X_A^T X_A)^-1 over the free coefficients.
    """
    n, p = x.shape
    scale = np.linalg.norm(x, axis=0)
    scale[scale == 0] = 1.0
    xs = x / scale
    best_rss = float(y @ y)
    best_cols: tuple[int, ...] = ()
    best_beta = np.zeros(0)
    for size in range(1, p + 1):
        for cols in itertools.combinations(range(p), size):
            beta, *_ = np.linalg.lstsq(xs[:, cols], y, rcond=None)
            if np.any(beta < 0):
                continue
            r = y - xs[:, cols] @ beta
            rss = float(r @ r)
            if rss < best_rss - 1e-15 * max(best_rss, 1.0):
                best_rss, best_cols, best_beta = rss, cols, beta
    coef = np.zeros(p)
    stderr = np.full(p, np.nan)
    cols_list: list[int] = list(best_cols)
    coef[cols_list] = best_beta / scale[cols_list]
    dof = n - len(cols_list)
    sigma2 = best_rss / dof if dof > 0 else math.nan
    if cols_list and dof > 0:
        xa = xs[:, cols_list]
        cov = sigma2 * np.linalg.pinv(xa.T @ xa)
        stderr[cols_list] = np.sqrt(np.clip(np.diag(cov), 0, None)) / scale[cols_list]
    total = float(((y - y.mean()) ** 2).sum())
    r2 = 1.0 - best_rss / total if total > 0 else 1.0
    return LinearFit(coef, stderr, math.sqrt(sigma2) if math.isfinite(sigma2) else math.nan, r2)
