"""Expand a spec into the full cross product of trials."""

from __future__ import annotations

import itertools
import random
from dataclasses import asdict, dataclass
from typing import Any

from roboscale.spec.schema import Spec


@dataclass(frozen=True)
class TrialPlan:
    """One trial: everything a runner needs, and nothing it must look up elsewhere."""

    index: int
    trial: str
    backend: str
    rate_hz: float
    payload: str
    payload_bytes: int
    pairs: int
    run: int
    messages: int
    warmup: int
    drain_s: float
    pause_s: float
    publisher_queue: int
    subscriber_queue: int
    mode: str
    match_timeout_s: float
    seed: int

    def params(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def intended_duration_s(self) -> float:
        return (self.messages + self.warmup) / self.rate_hz


def _rate_label(rate: float) -> str:
    return f"{rate:g}".replace("+", "").replace(".", "p")


def plan(spec: Spec, backends: list[str] | None = None) -> list[TrialPlan]:
    """Trials in sweep order (backend, payload, pairs, rate, run), or shuffled by seed.

    Runs of one configuration are interleaved with other configurations only when
    `order: shuffled`; the default keeps the thesis's order for comparability.
    """
    chosen = backends if backends else spec.sweep.backend
    t = spec.trial
    combos = itertools.product(
        chosen, spec.sweep.payload, spec.sweep.pairs, spec.sweep.rate_hz, range(t.runs)
    )
    trials = []
    for backend, (payload, size), pairs, rate, run in combos:
        trial_id = f"{backend}-{_rate_label(rate)}hz-{payload}-p{pairs}-r{run}"
        trials.append(
            TrialPlan(
                index=0,
                trial=trial_id,
                backend=backend,
                rate_hz=rate,
                payload=payload,
                payload_bytes=size,
                pairs=pairs,
                run=run,
                messages=t.message_count(rate),
                warmup=0 if t.mode == "thesis_compat" else t.warmup,
                drain_s=t.drain_s,
                pause_s=t.pause_s,
                publisher_queue=t.publisher_queue,
                subscriber_queue=t.subscriber_queue,
                mode=t.mode,
                match_timeout_s=t.match_timeout_s,
                seed=spec.seed,
            )
        )
    if t.order == "shuffled":
        random.Random(spec.seed).shuffle(trials)
    return [_with_index(tr, i) for i, tr in enumerate(trials)]


def _with_index(trial: TrialPlan, index: int) -> TrialPlan:
    fields = asdict(trial)
    fields["index"] = index
    fields["trial"] = f"t{index:04d}-{trial.trial}"
    return TrialPlan(**fields)
