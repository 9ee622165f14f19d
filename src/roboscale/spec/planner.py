"""Expand a spec into the full cross product of trials."""

from __future__ import annotations

import itertools
import math
import random
from dataclasses import asdict, dataclass, replace
from typing import Any

from roboscale.backends.base import MessageKind
from roboscale.backends.qos import AXES as QOS_AXES
from roboscale.backends.qos import label as qos_label
from roboscale.spec.payloads import payload_kind
from roboscale.spec.schema import CPU_LOAD_LEVELS, TRAFFIC_LEVELS_MBIT, Spec, Sweep
from roboscale.workloads.base import DEFAULT_WORKLOAD, Variant, Workload, get_workload
from roboscale.workloads.stream import StreamFields


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
    zenoh_routers: bool = False  # zenoh-based nodes are clients of a router per host
    load_cpu: float = 0.0  # background busy-loop duty cycle on every host
    load_net_mbit: float = 0.0  # background UDP from the first to the last host
    priority: str = "normal"  # fifo: every node process under SCHED_FIFO (env/sched.py)
    pin: str | None = None  # the cores every node process runs on
    cpu_load: str = ""  # the level load_cpu came from (sweep.cpu_load), "" for env.load_cpu
    traffic: str = ""  # the level load_net_mbit came from (sweep.traffic)
    workload: str = DEFAULT_WORKLOAD
    listeners: int = 0  # fanout and ping: listeners on the topic
    chain_length: int = 0  # chain: nodes A -> B -> ..., the first one publishing
    ack: bool = False  # one-way workloads: every measuring node acknowledges (ping-pong)
    # QoS (backends/qos.py); None: the backend's own behaviour
    reliability: str | None = None
    history: str | None = None
    durability: str | None = None
    stack: str = ""  # facetrack: the stack that runs the tracker
    workers: int = 0  # facetrack: detector workers
    deque_len: int = 0  # facetrack: faces the aggregator averages
    kills: int = 0  # facetrack: workers killed at once during the run
    kill_method: str = ""  # facetrack: sigterm, sigkill or crash
    kill_target: str = ""  # facetrack: worker, or one main process (aggregator, supervisors)
    kill_interval_ms: float = 0.0  # facetrack: between two kills (0: all at once)
    dispatch: str = ""  # facetrack: how frames are given to workers
    graph: str = ""  # graph: the graph file's absolute path
    subject: str = ""  # what it runs as its id names it: the payload, or the variant (graph)
    inventory: str | None = None  # real machines: the inventory file (absolute)
    machines: tuple[str, ...] = ()  # its hosts that play hosts 0, 1, ... of the trial
    clock_max_bound_us: float = 1000.0  # one-way figures across them valid up to this
    # replay (workloads/replay.py): `stata` or a bag's path, its topics, speed-up and loop
    replay: str = ""
    stream_topics: tuple[str, ...] = ()
    replay_topics: tuple[str, ...] = ()  # the spec's choice of the bag's topics (): all
    burst: bool = False  # a recorded burst, sent back to back: `rate_hz` is no target
    rate_factor: float = 1.0
    loop: bool = False
    record: str = ""  # --record: the folder where echoers write what they received
    message_types: tuple[str, ...] = ()  # .msg files and folders (absolute) payloads name

    def params(self) -> dict[str, object]:
        """As JSON holds them: tuples (machines, stream topics) are lists there."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}

    def stream_settings(self) -> StreamFields:
        """The paced stream's settings, as every workload's node config holds them."""
        return StreamFields(
            kind=self.message_kind(),
            rate_hz=self.rate_hz,
            messages=self.messages,
            warmup=self.warmup,
            drain_s=self.drain_s,
            publisher_queue=self.publisher_queue,
            subscriber_queue=self.subscriber_queue,
            wait_for_match=self.mode != "thesis_compat",
            match_timeout_s=self.match_timeout_s,
        )

    def message_kind(self) -> MessageKind:
        """The payload's message kind as node configs hold it; a type of the user's is
        loaded from `message_types` (lab side: rosbags) and carried whole."""
        kind = payload_kind(self.payload)
        if kind != "custom":
            return MessageKind(kind, self.payload_bytes)
        from roboscale.msgtypes import message_kind

        return message_kind(self.message_types, self.payload)

    @property
    def remote(self) -> bool:
        """Whether the trial runs on real machines of an inventory, over SSH."""
        return self.inventory is not None

    @property
    def emulated(self) -> bool:
        """Whether the trial runs on emulated hosts (namespaces, links, CPU quotas)."""
        if self.remote:
            return False
        return self.hosts > 1 or self.link != "loopback" or self.cpu is not None

    @property
    def host_link(self) -> str:
        """The profile that joins emulated hosts: ethernet when no link is named."""
        return "ethernet" if self.link == "loopback" else self.link

    @property
    def link_crossed(self) -> str:
        """The link messages cross: none (loopback) on one host, the real one between
        real machines, else `host_link`."""
        if self.hosts <= 1:
            return "loopback"
        return "real" if self.remote else self.host_link

    @property
    def env_key(self) -> tuple[Any, ...]:
        """Trials with the same key can share one set of emulated hosts."""
        return (
            self.hosts, self.link, self.cpu, self.topology, self.profiles, self.subnet,
            self.zenoh_routers, self.inventory, self.machines,
        )  # fmt: skip

    def host_of(self, role: str, pair: int) -> int:
        """The host index of a pair's sender or echoer: each sender host talks to every
        echoer host, pairs spread round-robin over them."""
        if self.hosts == 1:
            return 0
        s, e = self.sender_hosts, self.hosts - self.sender_hosts
        return pair % s if role == "sender" else s + (pair // s) % e

    @property
    def measured_nodes(self) -> int:
        """Nodes that record arrivals (senders, listeners, hops), as the workload says."""
        return get_workload(self.workload).measured_nodes(self)

    def flow_host(self, node: int) -> int:
        """The host of the workload's node whose endpoint key is `node`."""
        return get_workload(self.workload).host_of(self, node)

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


def variants(sw: Sweep) -> list[tuple[Workload, Variant]]:
    """The workloads of a sweep, each crossed only with the axes it uses."""
    return [(wl, v) for wl in map(get_workload, sw.workload) for v in wl.variants(sw)]


def _has_pairs(var: tuple[Workload, Variant]) -> bool:
    """Whether the pairs axis multiplies this variant's trials."""
    return "pairs" in var[0].axes


def count_trials(spec: Spec, backends: list[str] | None = None) -> int:
    """len(plan(spec, backends)) from the lengths of the axes alone: a huge sweep is
    counted, and refused, before a single trial is built."""
    sw = spec.sweep
    per_variant = sum(
        (len(sw.pairs) if _has_pairs(v) else 1) * (len(sw.payload) if v[1].names_payload else 1)
        for v in variants(sw)
    )
    axes = (
        sw.hosts,
        sw.link,
        sw.cpu,
        backends or sw.backend,
        sw.rate_hz,
        *qos_axes(sw),
        *lab_axes(sw),
    )
    return math.prod(len(a) for a in axes) * per_variant * spec.trial.runs


def rate_samples(spec: Spec, backends: list[str] | None = None) -> list[tuple[TrialPlan, int]]:
    """One trial of each rate, and how many trials of the sweep run at that rate: every
    other axis varies as much at each rate, so the sweep's duration follows without
    building it."""
    sw = spec.sweep
    each = count_trials(spec, backends) // len(sw.rate_hz)
    first = (sw.hosts[0], sw.link[0], sw.cpu[0])
    chosen = (backends or sw.backend)[0]
    var = variants(sw)[0]
    return [
        (_trial(spec, chosen, var, sw.payload[0], first, sw.pairs[0], rate), each)
        for rate in sw.rate_hz
    ]


def lab_axes(sw: Sweep) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """The axes the lab applies around a trial: priority, pinning, load levels."""
    return sw.priority, sw.pin, sw.cpu_load, sw.traffic


def qos_axes(sw: Sweep) -> tuple[list[str | None], list[str | None], list[str | None]]:
    return sw.reliability, sw.history, sw.durability


def _senders(hosts: int, fraction: float) -> int:
    return 0 if hosts == 1 else min(hosts - 1, max(1, int(hosts * fraction)))


def plan(
    spec: Spec, backends: list[str] | None = None, profiles: str | None = None
) -> list[TrialPlan]:
    """Trials in sweep order (hosts, link, cpu, backend, workload, payload, pairs, rate, run),
    or shuffled by seed. Emulated-host axes come first so that trials sharing hosts run
    together and the hosts come up once.

    Runs of one configuration are interleaved with other configurations only when
    `order: shuffled`; the default keeps the thesis's order for comparability.
    """
    chosen = backends if backends else spec.sweep.backend
    t, sw = spec.trial, spec.sweep
    combos = itertools.product(
        sw.hosts, sw.link, sw.cpu, chosen, variants(sw), sw.payload, sw.pairs, sw.rate_hz,
        itertools.product(*qos_axes(sw)), itertools.product(*lab_axes(sw)),
    )  # fmt: skip
    trials = []
    for hosts, link, cpu, backend, var, (payload, size), pairs_given, rate, qos, lab in combos:
        if not _has_pairs(var) and pairs_given != sw.pairs[0]:
            continue  # one publisher per trial when the workload has no pairs axis
        if not var[1].names_payload and (payload, size) != sw.payload[0]:
            continue  # its nodes have their own payloads: sweep.payload does not apply
        for run in range(t.runs):
            one = _trial(spec, backend, var, (payload, size), (hosts, link, cpu), pairs_given, rate)
            trials.append(_with_lab(_with_qos(one, qos), lab))
            trials[-1] = replace(
                trials[-1], run=run, trial=trials[-1].trial + f"-r{run}", profiles=profiles
            )
    if t.order == "shuffled":
        # Shuffled within each set of emulated hosts, so that each set still comes up once.
        random.Random(spec.seed).shuffle(trials)
        first = {key: i for i, key in reversed(list(enumerate(tr.env_key for tr in trials)))}
        trials.sort(key=lambda tr: first[tr.env_key])
    return [_with_index(tr, i) for i, tr in enumerate(trials)]


def _trial(
    spec: Spec,
    backend: str,
    var: tuple[Workload, Variant],
    payload: tuple[str, int],
    where: tuple[int, str, float | None],
    pairs_given: int,
    rate: float,
) -> TrialPlan:
    """One trial of run 0, its id without the run suffix."""
    t, env = spec.trial, spec.env
    hosts, link, cpu = where
    senders = _senders(hosts, env.sender_hosts)
    workload, variant = var
    paired = _has_pairs(var)
    pairs = pairs_given if paired else 1
    if env.pairs_per == "host_pair" and hosts > 1 and paired:
        pairs = pairs_given * senders * (hosts - senders)
    label = "".join(f"{p}-" for p in (backend, variant.label) if p)
    shown = payload[0].replace("/msg/", ".")  # a type of the user's: package.Type
    pace = "burst" if _replay_burst(spec) else f"{_rate_label(rate)}hz"  # burst: no rate
    label += pace + (f"-{shown}-p{pairs}" if variant.names_payload else "")
    subject = payload[0] if variant.names_payload else variant.label
    trial = TrialPlan(
        index=0,
        trial=label + _env_label(hosts, link, cpu),
        backend=backend,
        rate_hz=rate,
        payload=payload[0],
        payload_bytes=payload[1],
        pairs=pairs,
        subject=subject,
        run=0,
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
        verify_link=env.verify_link,
        subnet=env.subnet,
        zenoh_routers=env.zenoh_routers,
        load_cpu=env.load_cpu,
        load_net_mbit=env.load_net_mbit,
        workload=workload.name,
        inventory=env.inventory,
        machines=tuple(env.machines[:hosts]),
        clock_max_bound_us=env.clock_max_bound_us,
        message_types=tuple(spec.message_types),
    )
    return _with_replay(replace(trial, **variant.fields), spec, rate)


def _replay_burst(spec: Spec) -> bool:
    """Whether the spec replays a recorded burst (sent back to back)."""
    if spec.replay is None:
        return False
    from roboscale.bags import replay_info

    return replay_info(spec.replay, tuple(spec.replay_topics or ())).burst


def _with_replay(trial: TrialPlan, spec: Spec, rate: float) -> TrialPlan:
    """The trial with its replay's source, topics and speed-up; messages default to one
    pass of the stream and, without `loop`, never go past its end."""
    if spec.replay is None:
        return trial
    warmup = trial.warmup
    from roboscale.bags import replay_info

    chosen = tuple(spec.replay_topics or ())
    info, t = replay_info(spec.replay, chosen), spec.trial
    given = t.messages is not None or t.duration_s is not None
    messages = t.message_count(rate) if given else info.messages - warmup
    if not t.loop:
        messages = min(messages, info.messages - warmup)
    return replace(
        trial,
        replay=spec.replay,
        stream_topics=tuple(topic.name for topic in info.topics),
        replay_topics=chosen,
        burst=info.burst,
        rate_factor=rate / info.rate_hz,
        loop=t.loop,
        messages=max(1, messages),
    )


def _with_qos(trial: TrialPlan, settings: tuple[str | None, ...]) -> TrialPlan:
    """The trial with its QoS settings, named in its id."""
    reliability, history, durability = settings
    chosen = dict(zip(QOS_AXES, settings, strict=True))
    suffix = "".join(f"-{qos_label(a, v)}" for a, v in chosen.items() if v is not None)
    return replace(
        trial,
        trial=trial.trial + suffix,
        reliability=reliability,
        history=history,
        durability=durability,
    )


def _with_lab(trial: TrialPlan, settings: tuple[Any, ...]) -> TrialPlan:
    """The trial with the lab's axes (priority, pinning, load levels), named in its id."""
    priority, pin, cpu_load, traffic = settings
    suffix = "-fifo" if priority == "fifo" else ""
    suffix += f"-pin{pin.replace(',', '_')}" if pin is not None else ""
    trial = replace(trial, priority=priority, pin=pin)
    if cpu_load is not None:
        trial = replace(trial, cpu_load=cpu_load, load_cpu=CPU_LOAD_LEVELS[cpu_load])
        suffix += f"-load{cpu_load}"
    if traffic is not None:
        trial = replace(trial, traffic=traffic, load_net_mbit=TRAFFIC_LEVELS_MBIT[traffic])
        suffix += f"-traffic{traffic}"
    return replace(trial, trial=trial.trial + suffix)


def _with_index(trial: TrialPlan, index: int) -> TrialPlan:
    return replace(trial, index=index, trial=f"t{index:04d}-{trial.trial}")
