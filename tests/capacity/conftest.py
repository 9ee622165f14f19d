"""Synthetic trials generated from known capacity parameters, for the model tests."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.conftest import distribution, trial_params

from roboscale.capacity.data import Observation
from roboscale.safewrite import write_json


@dataclass(frozen=True)
class Truth:
    start_s: float = 0.3  # CPU seconds to start one node
    per_node: float = 0.008  # cores per live node
    per_message: float = 40e-6  # CPU seconds per message crossing the host
    per_byte: float = 2e-9  # CPU seconds per byte
    per_numeric_byte: float = 20e-9  # CPU seconds per byte of a numeric array (laserscan)
    cpu_budget: float = 1.6  # cores
    link_budget: float = math.inf  # bytes/s

    def per_node_cost(self, rate: float, size: float, numeric: bool = False) -> float:
        byte = self.per_numeric_byte if numeric else self.per_byte
        return self.per_node + self.per_message * rate + byte * rate * size

    def demand(self, nodes: float, rate: float, size: float, numeric: bool = False) -> float:
        return nodes * self.per_node_cost(rate, size, numeric)

    def sustained(self, nodes: float, rate: float, size: float, numeric: bool = False) -> bool:
        return (
            self.demand(nodes, rate, size, numeric) <= self.cpu_budget
            and nodes * rate * size <= self.link_budget
        )

    def max_nodes(self, rate: float, size: float, numeric: bool = False) -> float:
        cpu = self.cpu_budget / self.per_node_cost(rate, size, numeric)
        return min(cpu, self.link_budget / (rate * size))


SIZES = (11, 4250, 307200)
RATES = (1.0, 10.0, 100.0, 1000.0)
NODES = (2, 4, 8, 16, 32, 64, 128, 256)


def synthetic(
    truth: Truth,
    *,
    sizes: Sequence[int] = SIZES,
    rates: Sequence[float] = RATES,
    nodes: Sequence[int] = NODES,
    runs: int = 1,
    noise: float = 0.01,
    seed: int = 1,
    messages: int | Callable[[float], int] = 200,
    after_ready: bool = True,
    backend: str = "native",
    host: str = "hostname=a",
    source: str = "results/a",
    numeric: Sequence[int] = (),
) -> list[Observation]:
    """Trials of every size x rate x nodes x run; sizes listed in `numeric` are laserscans
    (arrays of numbers, priced by `per_numeric_byte`)."""
    rng = np.random.default_rng(seed)
    out = []
    for size in sizes:
        kind = size in numeric
        for rate in rates:
            for n in nodes:
                for run in range(runs):
                    pairs = n // 2
                    ok = truth.sustained(n, rate, size, kind)
                    count = messages(rate) if callable(messages) else messages
                    stream = count / rate
                    alive = stream + 1.0
                    sent = pairs * count
                    # Nodes cost CPU while alive, messages only while streaming; an
                    # overloaded host uses no more than its budget.
                    idle = alive * n * truth.per_node
                    busy = stream * (truth.demand(n, rate, size, kind) - n * truth.per_node)
                    ready = min(idle + busy, alive * truth.cpu_budget)
                    ready *= 1 + noise * rng.standard_normal()
                    cpu = truth.start_s * n * (1 + noise * rng.standard_normal()) + ready
                    out.append(
                        Observation(
                            source=source,
                            trial=f"{backend}-{size}-{rate:g}-{n}-{run}",
                            backend=backend,
                            host=host,
                            payload="laserscan" if kind else f"{size}B",
                            payload_bytes=size,
                            rate_hz=rate,
                            pairs=pairs,
                            run=run,
                            sustained=ok,
                            failed=False,
                            achieved_rate_hz=rate if ok else rate * 0.7,
                            sent=sent,
                            received=sent,
                            warmup=0,
                            drain_s=1.0,
                            cpu_s=cpu,
                            cpu_ready_s=ready if after_ready else None,
                            rtt_mean_us=200.0 if ok else 20000.0,
                            rtt_std_us=20.0 if ok else 5000.0,
                            rtt_p50_us=190.0 if ok else 15000.0,
                        )
                    )
    return out


@pytest.fixture
def make_trials() -> Callable[..., list[Observation]]:
    return synthetic


def write_results(
    folder: Path,
    obs: Sequence[Observation],
    *,
    host: dict[str, Any] | None = None,
    per_trial_host: bool = True,
) -> Path:
    """A results folder as the lab writes it: run.json, summary.json, trials/*/metadata.json."""
    facts = host or {"hostname": "a", "cpu_model": "test cpu", "cores": 2, "cpu_affinity": 2}
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "run.json", {"format_version": 1, "host": facts, "backends": {}})
    trials = []
    for o in obs:
        usage = {"cpu_s_total": o.cpu_s, "peak_rss_kb_max": 30000}
        if o.cpu_ready_s is not None:
            usage["cpu_s_after_ready"] = o.cpu_ready_s
        params = trial_params(
            trial=o.trial,
            backend=o.backend,
            rate_hz=o.rate_hz,
            payload=o.payload,
            payload_bytes=o.payload_bytes,
            pairs=o.pairs,
            run=o.run,
            messages=o.sent // o.pairs,
            warmup=o.warmup,
            drain_s=o.drain_s,
        )
        trials.append(
            {
                **params,
                "sent": o.sent,
                "received": o.received,
                "lost": o.sent - o.received,
                "loss": (o.sent - o.received) / o.sent if o.sent else 1.0,
                "achieved_rate_hz": o.achieved_rate_hz,
                "achieved_rate_min_hz": o.achieved_rate_hz,
                "rtt_us": distribution(mean=o.rtt_mean_us, std=o.rtt_std_us, p50=o.rtt_p50_us),
                "one_way_us": distribution(),
                "send_lag_us": distribution(),
                "sustained": o.sustained,
                "verdict": {},
                "usage": usage,
            }
        )
        if per_trial_host:
            meta = folder / "trials" / o.trial
            meta.mkdir(parents=True, exist_ok=True)
            doc = {"format_version": 1, "params": params, "host": facts}
            write_json(meta / "metadata.json", doc)
    write_json(folder / "summary.json", {"format_version": 1, "thresholds": {}, "trials": trials})
    return folder


@pytest.fixture
def results_folder() -> Callable[..., Path]:
    return write_results


@pytest.fixture
def truth() -> type[Truth]:
    return Truth
