"""The trend of latency against send time over a whole trial, with its uncertainty.

A queue that grows shows as latency rising with send time. Two quarters of a trial miss
a queue that built up and drained in between, and are fooled by one slow quarter; the
slope over the whole trial is not. Latency samples are autocorrelated (a message waits
behind the one before it), so the slope is fitted to the medians of consecutive bins of
messages rather than to every message: each bin is one point, the medians shrug off
single stalls, and the interval is honest about how few independent points there are.

The slope is Theil-Sen's (the median of the pairwise slopes, robust to a few wild
bins) with Sen's distribution-free interval from Kendall's tau (Sen 1968; the same as
scipy.stats.theilslopes), computed here with numpy alone. What the verdict judges is the
latency the trend adds over the trial: slope times the trial's length.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
MAX_BINS = 50
MIN_PER_BIN = 5
MIN_BINS = 8  # fewer points than this give an interval too wide to judge anything
Z90 = 1.6448536269514722  # two-sided 90 %: the lower bound is one-sided 95 %


@dataclass(frozen=True)
class Trend:
    """Latency (µs) against send time (s): slope with its 90 % interval, the fitted level
    at the start, the trial's length, and the bins the fit used."""

    slope_us_per_s: float
    slope_low: float
    slope_high: float
    start_us: float
    duration_s: float
    bins: int

    @property
    def added_us(self) -> float:
        """Latency the trend adds from the first to the last message."""
        return self.slope_us_per_s * self.duration_s

    @property
    def added_low_us(self) -> float:
        return self.slope_low * self.duration_s

    @property
    def added_high_us(self) -> float:
        return self.slope_high * self.duration_s


def binned_medians(t_s: FloatArray, lat_us: FloatArray) -> tuple[FloatArray, FloatArray]:
    """Median send time and median latency of consecutive equal-count bins (send order),
    received messages only; empty when there are too few to bin."""
    got = ~np.isnan(lat_us) & ~np.isnan(t_s)
    t, lat = t_s[got], lat_us[got]
    order = np.argsort(t, kind="stable")
    t, lat = t[order], lat[order]
    bins = min(MAX_BINS, t.size // MIN_PER_BIN)
    if bins < MIN_BINS:
        return np.zeros(0), np.zeros(0)
    edges = np.linspace(0, t.size, bins + 1).astype(np.int64)
    xs = np.array([np.median(t[a:b]) for a, b in itertools.pairwise(edges)])
    ys = np.array([np.median(lat[a:b]) for a, b in itertools.pairwise(edges)])
    return xs, ys


def theil_sen(x: FloatArray, y: FloatArray, z: float = Z90) -> tuple[float, float, float, float]:
    """Slope, its interval (low, high) at the two-sided level of `z`, and the intercept
    (median of y - slope * x)."""
    i, j = np.triu_indices(x.size, k=1)
    dx = x[j] - x[i]
    keep = dx != 0
    slopes = np.sort((y[j] - y[i])[keep] / dx[keep])
    if slopes.size == 0:
        return 0.0, 0.0, 0.0, float(np.median(y))
    slope = float(np.median(slopes))
    n = x.size
    spread = z * math.sqrt(n * (n - 1) * (2 * n + 5) / 18.0)  # sd of Kendall's S, no ties
    low_at = int(np.clip(math.floor((slopes.size - spread) / 2.0), 0, slopes.size - 1))
    high_at = int(np.clip(math.ceil((slopes.size + spread) / 2.0), 0, slopes.size - 1))
    return slope, float(slopes[low_at]), float(slopes[high_at]), float(np.median(y - slope * x))


def latency_trend(t_sent_ns: FloatArray, lat_us: FloatArray) -> Trend | None:
    """The trend of a trial's latencies against their send times; None when too few
    messages arrived to bin (the rule is then not judged)."""
    t_s = (t_sent_ns - np.nanmin(t_sent_ns)) / 1e9 if t_sent_ns.size else t_sent_ns
    xs, ys = binned_medians(t_s.astype(np.float64), lat_us.astype(np.float64))
    if xs.size == 0:
        return None
    slope, low, high, intercept = theil_sen(xs, ys)
    got = ~np.isnan(lat_us)
    duration = float(np.nanmax(t_s[got]) - np.nanmin(t_s[got]))
    start = intercept + slope * float(np.nanmin(t_s[got]))
    return Trend(slope, low, high, max(start, 0.0), duration, int(xs.size))
