"""Where a trial runs: this machine, or a set of emulated hosts shared by consecutive trials.

Emulated hosts are costly to bring up (namespaces, links, a measured link
check), so trials with the same hosts, link, CPU quota and topology share one
set; the planner orders them together. A backend's infrastructure (roscore)
belongs to the hosts it runs on and stops with them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roboscale.backends.base import Backend, Infrastructure
from roboscale.env.clock import OffsetEstimate
from roboscale.errors import UserError
from roboscale.lab.nodes import NodeProcess, await_line, spawn
from roboscale.spec.planner import TrialPlan
from roboscale.workloads.base import AgentConfig, AgentProtocol, get_workload

LOCAL_ADDRESS = "127.0.0.1"


@dataclass
class Placement:
    """Hosts of one environment: argv prefix, environment and address of each."""

    prefixes: list[list[str]] = field(default_factory=lambda: [[]])
    envs: list[dict[str, str]] = field(default_factory=lambda: [{}])
    addresses: list[str] = field(default_factory=lambda: [LOCAL_ADDRESS])
    names: list[str] = field(default_factory=lambda: ["local"])
    facts: dict[str, object] = field(default_factory=lambda: {"link_profile": "loopback"})
    zenoh_routers: bool = False
    infrastructure_host: int = 0
    machine: dict[str, object] | None = None  # the real machines' facts; None: this machine
    sched: list[str] = field(default_factory=list)  # the trial's priority and pinning wrapper

    @classmethod
    def of(cls, hostset: Any) -> Placement:
        hosts = hostset.hosts
        return cls(
            prefixes=[h.argv_prefix() for h in hosts],
            envs=[h.env() for h in hosts],
            addresses=[h.address for h in hosts],
            names=[h.name for h in hosts],
            facts=hostset.facts(),
        )

    @classmethod
    def of_remote(cls, remote: Any) -> Placement:
        """Real machines (lab.remote.RemoteHosts): each reached through its sshexec prefix."""
        return cls(
            prefixes=remote.prefixes,
            envs=remote.envs,
            addresses=remote.addresses,
            names=remote.names,
            facts=remote.facts(),
            infrastructure_host=remote.infrastructure_host,
            machine=remote.machine_facts(),
        )


def spawn_node(
    backend: Backend, infra: Infrastructure, cfg: AgentConfig, raw: Path, where: Placement
) -> NodeProcess:
    """Start one agent on the host its config names."""
    host = cfg.host_index
    env = {**infra.env, **where.envs[host]}
    return spawn(backend.python, cfg, raw, env, [*where.prefixes[host], *where.sched])


def run_stages(
    backend: Backend,
    infra: Infrastructure,
    stages: list[list[AgentConfig]],
    raw: Path,
    where: Placement,
    ready_timeout_s: float,
    protocol: AgentProtocol,
) -> None:
    """Start each stage's agents and wait for READY, then GO, DONE, STOP: every wait is
    bounded, and any failure kills every agent."""
    nodes: list[NodeProcess] = []
    try:
        for configs in stages:
            group = [spawn_node(backend, infra, cfg, raw, where) for cfg in configs]
            nodes += group
            await_line(group, "READY", ready_timeout_s)
        pacers = [n for n in nodes if n.role in protocol.pacers]
        stopped = [n for n in nodes if n.role in protocol.stopped]
        for n in pacers:
            n.send("GO")
        await_line(pacers, "DONE", protocol.done_timeout_s)
        for n in stopped:
            n.send("STOP")
        await_line(stopped, "DONE", protocol.stop_timeout_s)
        # Only agents that wait for it: one that exited after DONE leaves a closed pipe.
        waiting = {cfg.name for configs in stages for cfg in configs if cfg.close}
        for n in nodes:
            if n.name in waiting:
                n.send("CLOSE")
        for n in nodes:
            with contextlib.suppress(Exception):
                n.proc.wait(10)
    finally:
        for n in nodes:
            n.kill()


def check_placement(backend: Backend, t: TrialPlan) -> None:
    if t.emulated and not get_workload(t.workload).emulated_hosts:
        raise UserError(
            f"workload {t.workload!r} runs on this machine only for now (trial {t.trial} asks "
            f"for {t.hosts} hosts, link {t.link}, cpu {t.cpu})",
            hint=f"use hosts: 1, link: loopback and cpu: null with {t.workload}",
        )
    _check_lab_axes(t)
    if backend.placement == "pair" and t.hosts > 1:
        raise UserError(
            f"backend {backend.name!r} runs each sender with its echoer in one process, so "
            f"it cannot spread a pair over {t.hosts} hosts",
            hint="use hosts: 1 with this backend, or a backend that crosses hosts (zenoh, ros1)",
        )


def _check_lab_axes(t: TrialPlan) -> None:
    """Priority, pinning and load levels: refused where they cannot apply."""
    from roboscale.env import sched

    if (t.priority != "normal" or t.pin is not None or t.cpu_load or t.traffic) and t.remote:
        raise UserError(
            f"trial {t.trial}: priority, pin, cpu_load and traffic apply on this machine and "
            "its emulated hosts only; real machines over SSH cannot set them yet",
            hint="drop these axes from a spec with env.inventory",
        )
    if t.traffic and t.traffic != "none" and t.hosts < 2:
        raise UserError(
            f"trial {t.trial}: traffic {t.traffic} flows between two hosts; it has {t.hosts}",
            hint="use hosts: 2 or more with the traffic axis",
        )
    sched.check(t.priority, t.pin)


class Environments:
    """The current environment and its infrastructures; the previous ones are torn down."""

    def __init__(self, run_dir: Path, backends: dict[str, Backend]) -> None:
        self.run_dir = run_dir
        self.backends = backends
        self._key: tuple[Any, ...] | None = None
        self._hostset: Any = None
        self._remote: Any = None  # lab.remote.RemoteHosts of real machines
        self._placement = Placement()
        self._infra: dict[str, Infrastructure] = {}
        self._started = 0

    def placement(self, t: TrialPlan) -> Placement:
        if self._key != t.env_key:
            self._teardown()
            if t.emulated:
                self._hostset = _bring_up(t)
                self._placement = Placement.of(self._hostset)
            elif t.remote:
                from roboscale.lab.remote import connect

                assert t.inventory is not None
                self._remote = connect(Path(t.inventory), list(t.machines), self.run_dir)
                self._placement = Placement.of_remote(self._remote)
            self._placement.zenoh_routers = t.zenoh_routers
            self._key = t.env_key
        from roboscale.env.sched import prefix

        self._placement.sched = prefix(t.priority, t.pin)
        return self._placement

    def infrastructure(self, t: TrialPlan) -> Infrastructure:
        where = self.placement(t)
        if t.backend not in self._infra:
            self._started += 1
            work = self.run_dir / "infra" / f"{t.backend}-{self._started}"
            work.mkdir(parents=True, exist_ok=True)
            self._infra[t.backend] = self.backends[t.backend].start_infrastructure(work, where)
        return self._infra[t.backend]

    @contextlib.contextmanager
    def background_load(self, t: TrialPlan) -> Iterator[None]:
        """The lab report's extra workload during one trial: busy loops on every host (or
        this machine) and a UDP stream from the first host to the last. Each load also
        ends by itself after a bound, should the trial outlive it."""
        if not (t.load_cpu or t.load_net_mbit):
            yield
            return
        from roboscale.env.load import cpu_load, net_load

        bound_s = t.intended_duration_s * 3 + t.drain_s + 60
        hosts: list[Any] = list(self._hostset.hosts) if self._hostset is not None else []
        with contextlib.ExitStack() as loads:
            for host in (hosts or [None]) if t.load_cpu else []:
                loads.enter_context(cpu_load(host, t.load_cpu, bound_s))
            if t.load_net_mbit:  # the spec loader ensured two hosts or more
                loads.enter_context(net_load(hosts[0], hosts[-1], t.load_net_mbit, bound_s))
            yield

    def _teardown(self) -> None:
        infra, self._infra = self._infra, {}
        try:
            for one in infra.values():
                with contextlib.suppress(Exception):
                    one.stop()
        finally:
            if self._hostset is not None:
                hostset, self._hostset = self._hostset, None
                hostset.down()
            if self._remote is not None:
                remote, self._remote = self._remote, None
                remote.close()
            self._placement = Placement()
            self._key = None

    def clocks(self) -> dict[str, OffsetEstimate]:
        """Each real machine's clock against this one's, measured now; none elsewhere
        (emulated hosts share this machine's CLOCK_MONOTONIC)."""
        return self._remote.clocks() if self._remote is not None else {}

    def __enter__(self) -> Environments:
        return self

    def __exit__(self, *_: object) -> None:
        self._teardown()


def _bring_up(t: TrialPlan) -> Any:
    # Imported only for emulated trials: single-host runs never touch namespaces.
    from roboscale.env.cpu import CpuLimit
    from roboscale.env.hosts import HostSet
    from roboscale.env.links import BUILTIN, load_profiles, resolve

    profiles = load_profiles(Path(t.profiles)) if t.profiles else dict(BUILTIN)
    hostset = HostSet(
        count=t.hosts,
        profile=resolve(t.host_link, profiles),
        topology=t.topology,
        subnet=t.subnet,
        cpu=CpuLimit(quota=t.cpu) if t.cpu is not None else None,
        seed=t.seed,
        verify_link=t.verify_link and t.hosts > 1,
    )
    return hostset.up()
