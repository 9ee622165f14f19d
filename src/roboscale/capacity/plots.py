"""Capacity figures: each function takes data and returns a matplotlib Figure.

matplotlib is imported lazily with the Agg backend, so importing this module
costs nothing and never needs a display.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from roboscale.capacity.data import Observation
from roboscale.capacity.models import FittedModel, max_rate
from roboscale.capacity.validate import Validation

STYLE = {
    "cslv": ("CSLV (thesis)", "tab:orange", "--"),
    "two_resource": ("two-resource", "tab:blue", "-"),
}


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _pooled(obs: Sequence[Observation]) -> tuple[float, float] | None:
    """Mean and std of RTT over runs: the std pools within-run spread and between-run spread."""
    means = [o.rtt_mean_us for o in obs if o.rtt_mean_us is not None]
    stds = [o.rtt_std_us or 0.0 for o in obs if o.rtt_mean_us is not None]
    if not means:
        return None
    between = float(np.var(means)) if len(means) > 1 else 0.0
    return float(np.mean(means)), math.sqrt(float(np.mean(np.square(stds))) + between)


def latency_vs_nodes(obs: Sequence[Observation], size: int | None = None) -> Any:
    """The thesis's Figure 4.4: mean RTT (log scale, ms) against node count, one line per rate,
    with standard deviation bars; failed trials have no RTT and are left out."""
    plt = _pyplot()
    size = min(o.payload_bytes for o in obs) if size is None else size
    payload = min((o.payload for o in obs if o.payload_bytes == size), default="")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_rate: dict[float, dict[int, list[Observation]]] = defaultdict(lambda: defaultdict(list))
    for o in obs:
        if o.payload == payload:
            by_rate[o.rate_hz][o.nodes].append(o)
    for rate in sorted(by_rate):
        points = [(n, _pooled(group)) for n, group in sorted(by_rate[rate].items())]
        kept = [(n, p) for n, p in points if p is not None]
        if not kept:
            continue
        x = [n for n, _ in kept]
        y = [p[0] / 1e3 for _, p in kept]
        err = [p[1] / 1e3 for _, p in kept]
        lower = [min(e, v * 0.999) for e, v in zip(err, y, strict=True)]  # stay above 0 on log
        ax.errorbar(x, y, yerr=[lower, err], marker="o", capsize=3, label=f"{rate:g} Hz")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("nodes (N = 2 x pairs)")
    ax.set_ylabel("mean round trip (ms)")
    ax.set_title(f"Latency against node count, {payload} ({size} B)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(title="rate")
    fig.tight_layout()
    return fig


def sustained_map(obs: Sequence[Observation], models: dict[str, FittedModel]) -> Any:
    """Sustained (o) and unsustained (x) trials over nodes x rate, one panel per payload,
    with each model's boundary: the highest rate it predicts N nodes sustain."""
    plt = _pyplot()
    payloads = sorted({(o.payload_bytes, o.payload) for o in obs})
    fig, axes = plt.subplots(1, len(payloads), figsize=(4.5 * len(payloads), 4), squeeze=False)
    nodes_all = [o.nodes for o in obs]
    grid = np.geomspace(max(min(nodes_all) / 2, 1), max(nodes_all) * 2, 60)
    for ax, (size, payload) in zip(axes[0], payloads, strict=True):
        mine = [o for o in obs if o.payload == payload]
        numeric = mine[0].numeric
        for ok, marker, color in ((True, "o", "tab:green"), (False, "x", "tab:red")):
            pts = [o for o in mine if o.sustained == ok]
            ax.scatter(
                [o.nodes for o in pts],
                [o.rate_hz for o in pts],
                marker=marker,
                color=color,
                label="sustained" if ok else "not sustained",
                zorder=3,
            )
        for name, model in models.items():
            label, color, style = STYLE.get(name, (name, "gray", ":"))
            rates = [max_rate(model, float(n), float(size), numeric)[0] for n in grid]
            ax.plot(grid, np.clip(rates, 1e-3, None), style, color=color, label=label)
        rates_seen = [o.rate_hz for o in obs]
        ax.set_ylim(min(rates_seen) / 3, max(rates_seen) * 3)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("nodes")
        ax.set_ylabel("rate per sender (Hz)")
        ax.set_title(f"{payload} ({size} B)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].legend(fontsize="small")
    fig.tight_layout()
    return fig


def predicted_vs_measured(validation: Validation) -> Any:
    """Predicted against measured max N per held-out configuration, with 80 % intervals."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5, 5))
    values: list[float] = []
    for name in STYLE:
        rows = [r for r in validation.rows if r.model == name and r.rel_error is not None]
        rows = [r for r in rows if r.predicted is not None and math.isfinite(r.predicted)]
        if not rows:
            continue
        label, color, _ = STYLE[name]
        x = [float(r.measured or 0) for r in rows]
        y = [float(r.predicted or 0) for r in rows]
        low = [
            max(yv - (r.low if r.low is not None else yv), 0) for yv, r in zip(y, rows, strict=True)
        ]
        high = [
            max((r.high if r.high is not None else yv) - yv, 0)
            for yv, r in zip(y, rows, strict=True)
        ]
        high = [h if math.isfinite(h) else 0.0 for h in high]
        ax.errorbar(x, y, yerr=[low, high], fmt="o", color=color, capsize=3, label=label)
        values += x + y
    if values:
        lo, hi = max(min(values) / 2, 0.5), max(values) * 2
        ax.plot([lo, hi], [lo, hi], color="gray", lw=1, label="exact")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
    ax.set_xlabel("measured max nodes")
    ax.set_ylabel("predicted max nodes (held out)")
    ax.set_title("Leave-one-configuration-out")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    fig.tight_layout()
    return fig
