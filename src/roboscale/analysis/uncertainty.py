"""Figures with their uncertainty: percentiles only where the sample supports them, a
95 % confidence interval on each, and on the ratio of two of them.

- **Support.** A q-th percentile needs at least 1 / (1 - q) messages to have one message
  beyond it: p50 from 2, p90 from 10, p99 from 100, p99.9 from 1,000. Below that the
  figure is withheld and says why ("n = 15 < 100").
- **One run.** The interval of a percentile comes from the order statistics: the number
  of messages below the true percentile is binomial, so the interval runs between the
  order statistics at n·q ± 1.96·sqrt(n·q·(1 - q)) (the normal approximation of the
  binomial; distribution-free). It says how well the messages pin the figure down in that
  run, not how much another run would differ, so it is labelled "single run".
- **Several runs.** A two-level bootstrap: draw runs with replacement, then the messages
  of each drawn run (drawn as the order statistic a resample's percentile lands on: the
  count of resampled messages at or below each value is binomial), and take the
  percentile of the pool. Runs vary more than messages do, and this keeps both.
- **Ratios.** The same draws for both figures, divided; the interval is the 2.5th and
  97.5th percentile of the quotients.
- **Runs that disagree** (hyperfine's warnings): a run whose median is more than
  `OUTLIER_MADS` median absolute deviations from the median of the runs is an outlier,
  and medians that rise or fall monotonically over three or more runs are drift.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
Z95 = 1.959963984540054
REPS = 400
OUTLIER_MADS = 5.0
SEED = 20240611  # fixed: the same folder always renders the same intervals
GRID = 2048  # values a multi-run draw can land on: quantiles 1/2048 apart


def min_samples(q: float) -> int:
    """Messages a q-th percentile (0-100) needs: at least one beyond it."""
    return max(2, math.ceil(1.0 / (1.0 - q / 100.0) - 1e-9))


@dataclass(frozen=True)
class Estimate:
    """A figure, its 95 % interval, and how many runs and messages it stands on; `value`
    None with `note` saying why when the sample does not support it."""

    value: float | None
    low: float | None
    high: float | None
    runs: int
    n: int
    note: str = ""

    @property
    def single_run(self) -> bool:
        return self.runs == 1


def _clean(runs: Sequence[FloatArray]) -> list[FloatArray]:
    return [np.sort(r[~np.isnan(r)]) for r in runs if np.count_nonzero(~np.isnan(r))]


def percentile(runs: Sequence[FloatArray], q: float) -> Estimate:
    """The q-th percentile of the pooled messages of `runs` with its interval."""
    kept = _clean(runs)
    n = sum(r.size for r in kept)
    need = min_samples(q)
    if n < need:
        return Estimate(None, None, None, len(kept), n, f"n = {n} < {need}")
    pooled = np.sort(np.concatenate(kept))
    value = float(np.percentile(pooled, q))
    if len(kept) == 1:
        low, high = _order_interval(pooled, q)
        return Estimate(value, low, high, 1, n, "single run")
    draws = percentile_draws(kept, q, np.random.default_rng(SEED))
    low, high = np.percentile(draws, [2.5, 97.5])
    return Estimate(value, float(low), float(high), len(kept), n)


def _order_interval(values: FloatArray, q: float) -> tuple[float, float]:
    n, p = values.size, q / 100.0
    half = Z95 * math.sqrt(n * p * (1 - p))
    lo = int(np.clip(math.floor(n * p - half), 0, n - 1))
    hi = int(np.clip(math.ceil(n * p + half), 0, n - 1))
    return float(values[lo]), float(values[hi])


def percentile_draws(
    runs: Sequence[FloatArray], q: float, rng: np.random.Generator, reps: int = REPS
) -> FloatArray:
    """Bootstrap draws of the pooled q-th percentile: runs, then messages in each run.
    `runs` must be sorted and free of NaN (as `_clean` makes them). A resample's
    percentile is the order statistic at a binomial rank, so no message is redrawn."""
    p = q / 100.0
    if len(runs) == 1:  # one run: every draw ranks the same sorted messages
        only = runs[0]
        ranks = np.clip(rng.binomial(only.size, p, size=reps), 0, only.size - 1)
        return only[ranks].astype(np.float64)
    # Several runs: each run's cumulative counts on a common grid of the pooled values,
    # so a draw of runs sums k rows instead of merging their messages (linear in runs).
    pooled = np.sort(np.concatenate(runs))
    grid = pooled[np.unique(np.linspace(0, pooled.size - 1, GRID).astype(np.int64))]
    counts = np.stack([np.searchsorted(r, grid, side="right") for r in runs]).astype(np.int32)
    sizes = np.array([r.size for r in runs])
    chosen = rng.integers(0, len(runs), size=(reps, len(runs)))
    below = np.zeros((reps, grid.size), dtype=np.int32)  # messages at or below each value
    for j in range(len(runs)):  # a run at a time: memory of one (reps, grid) table
        below += counts[chosen[:, j]]
    ranks = np.maximum(rng.binomial(sizes[chosen].sum(axis=1), p), 1)
    at = np.argmax(below >= ranks[:, None], axis=1)
    out: FloatArray = grid[at].astype(np.float64)
    return out


def ratio(slow: Sequence[FloatArray], fast: Sequence[FloatArray], q: float = 50.0) -> Estimate:
    """How many times `fast`'s q-th percentile fits in `slow`'s (above 1: fast is faster),
    with the interval of the bootstrap quotients; runs counted as the fewer of the two."""
    a, b = _clean(slow), _clean(fast)
    n = min(sum(r.size for r in a), sum(r.size for r in b))
    need = min_samples(q)
    if n < need:
        return Estimate(None, None, None, min(len(a), len(b)), n, f"n = {n} < {need}")
    top = float(np.percentile(np.concatenate(a), q))
    bottom = float(np.percentile(np.concatenate(b), q))
    if bottom <= 0:
        return Estimate(None, None, None, min(len(a), len(b)), n, "zero latency")
    rng = np.random.default_rng(SEED)
    quotients = percentile_draws(a, q, rng) / np.maximum(percentile_draws(b, q, rng), 1e-12)
    low, high = np.percentile(quotients, [2.5, 97.5])
    runs = min(len(a), len(b))
    note = "single run" if runs == 1 else ""
    return Estimate(top / bottom, float(low), float(high), runs, n, note)


def run_warnings(medians: Sequence[float]) -> list[str]:
    """hyperfine-style warnings about the runs of one configuration, in words."""
    m = np.asarray([x for x in medians if x is not None and math.isfinite(x)], dtype=float)
    out: list[str] = []
    if m.size < 3:
        return out
    centre = float(np.median(m))
    mad = float(np.median(np.abs(m - centre)))
    if mad > 0:
        far = np.nonzero(np.abs(m - centre) > OUTLIER_MADS * mad)[0]
        out += [f"run {int(i) + 1} is an outlier (median {m[i]:.0f} µs, others ~{centre:.0f})"
                for i in far]  # fmt: skip
    steps = np.diff(m)
    if np.all(steps > 0) or np.all(steps < 0):
        way = "rose" if steps[0] > 0 else "fell"
        out.append(f"medians {way} run after run ({m[0]:.0f} -> {m[-1]:.0f} µs): drift")
    return out


def interval_text(e: Estimate, unit: str = "", scale: float = 1.0, digits: int = 3) -> str:
    """'1.80 [1.61, 2.02]' plus the note; the note alone when there is no figure."""
    if e.value is None or e.low is None or e.high is None:
        return f"- ({e.note})" if e.note else "-"
    fmt = f"{{:.{digits}g}}"
    text = f"{fmt.format(e.value / scale)}{unit} [{fmt.format(e.low / scale)}, " \
           f"{fmt.format(e.high / scale)}]"  # fmt: skip
    return text + (f" ({e.note})" if e.note else "")
