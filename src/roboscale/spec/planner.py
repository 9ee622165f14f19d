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
    hosts: int = 1
    link: str = "loopback"
    cpu: float | None = None
    topology: str = "star"
    sender_hosts: int = 0  # hosts 0..sender_hosts-1 run senders, the others echoers
    profiles: str | None = None
    verify_link: bool = True
    subnet: str = "10.231.0.0/24"

    def params(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def emulated(self) -> bool:
        """Whether the trial runs on emulated hosts (namespaces, links, CPU quotas)."""
        return self.hosts > 1 or self.link != "loopback" or self.cpu is not None

    @property
    def env_key(self) -> tuple[Any, ...]:
        """Trials with the same key can share one set of emulated hosts."""
        return (self.hosts, self.link, self.cpu, self.topology, self.profiles, self.subnet)

    def host_of(self, role: str, pair: int) -> int:
        """The host index of a pair's sender or echoer: each sender host talks to every
        echoer host, pairs spread round-robin over them."""
        if self.hosts == 1:
            return 0
        s, e = self.sender_hosts, self.hosts - self.sender_hosts
        return pair % s if role == "sender" else s + (pair // s) % e

    @property
    def intended_duration_s(self) -> float:
        return (self.messages + self.warmup) / self.rate_hz


def _rate_label(rate: float) -> str:
    return f"{rate:g}".replace("+", "").replace(".", "p")


def _env_label(hosts: int, link: str, cpu: float | None) -> str:
    parts = [f"h{hosts}"] if hosts > 1 else []
    parts += [link] if link != "loopback" else []
    parts += [f"cpu{_rate_label(cpu)}"] if cpu is not None else []
    return "".join(f"-{p}" for p in parts)


def _senders(hosts: int, fraction: float) -> int:
    return 0 if hosts == 1 else min(hosts - 1, max(1, int(hosts * fraction)))


def plan(
    spec: Spec, backends: list[str] | None = None, profiles: str | None = None
) -> list[TrialPlan]:
    """Trials in sweep order (hosts, link, cpu, backend, payload, pairs, rate, run), or
    shuffled by seed. Emulated-host axes come first so that trials sharing hosts run
    together and the hosts come up once.

    Runs of one configuration are interleaved with other configurations only when
    `order: shuffled`; the default keeps the thesis's order for comparability.
    """
    chosen = backends if backends else spec.sweep.backend
    t, sw, env = spec.trial, spec.sweep, spec.env
    combos = itertools.product(
        sw.hosts, sw.link, sw.cpu, chosen, sw.payload, sw.pairs, sw.rate_hz, range(t.runs)
    )
    trials = []
    for hosts, link, cpu, backend, (payload, size), pairs_given, rate, run in combos:
        senders = _senders(hosts, env.sender_hosts)
        pairs = pairs_given
        if env.pairs_per == "host_pair" and hosts > 1:
            pairs = pairs_given * senders * (hosts - senders)
        where = _env_label(hosts, link, cpu)
        trial_id = f"{backend}-{_rate_label(rate)}hz-{payload}-p{pairs}{where}-r{run}"
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
                hosts=hosts,
                link=link,
                cpu=cpu,
                topology=env.topology,
                sender_hosts=senders,
                profiles=profiles,
                verify_link=env.verify_link,
                subnet=env.subnet,
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
