"""The workload protocol and registry, and the agent's configuration.

Stdlib only: the agent half of a workload runs inside node agents, and ros1 agents
run in Debian's system Python. A workload is one module, registered by name in
REGISTRY (`module` or `module:ATTRIBUTE`) and imported only when chosen. It has:

- spec options: `axes`, the sweep fields it uses (the spec loader refuses an axis no
  listed workload uses) and `variants(sweep)`, the trial fields each run of it fixes;
- a plan: `measured_nodes`, `host_of`, `processes` (its nodes, their topics, roles and
  hosts, grouped in processes) and `drive` (how the lab drives them: AgentProtocol);
- agent programs: `read_program` (its typed node config) and `start` (what a node
  role runs inside the agent: a Program);
- collection, summary and report: `collect` (raw files -> record tables and the nodes'
  headers), `summarize` (records, and those headers for figures that are not per
  message, -> summary entry), `figures`, `tables` and `log_words`.

The driver half imports numpy, pyarrow and the analysis lazily, inside its methods.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from roboscale.backends.base import Session
from roboscale.registry import load_registered

if TYPE_CHECKING:
    import pyarrow as pa

    from roboscale.analysis.verdict import Thresholds
    from roboscale.records.models import NodeHeader, SummaryEntry, TrialParams
    from roboscale.spec.planner import TrialPlan
    from roboscale.spec.schema import Sweep
    from roboscale.workloads.stream import Counters

AGENT_CONFIG_VERSION = 2  # 2: MessageKind may carry a TypedPayload


class ProgramConfig(Protocol):
    """A node role's typed settings (a frozen dataclass of the workload's)."""

    def to_dict(self) -> dict[str, object]: ...


class Program(Protocol):
    """What one node runs inside an agent. The pacer (at most one per agent) matches its
    path, then runs the stream on GO; the others run from their callbacks until STOP."""

    counters: Counters
    paces: bool

    def wait_for_match(self) -> bool: ...

    def no_match(self) -> str: ...

    def run(self) -> None: ...

    def finish(self) -> None: ...

    def header(self) -> dict[str, object]: ...

    def columns(self) -> dict[str, array[int]]: ...


@dataclass(frozen=True)
class NodePlan:
    """One node of a trial: its name, role, host, and its endpoint for backends that
    connect nodes explicitly (zenoh): `key` names it among the trial's nodes, it listens
    when `listens`, and connects to the nodes whose keys are in `connects`."""

    name: str
    role: str
    host: int
    key: int
    program: ProgramConfig
    listens: bool = False
    connects: tuple[int, ...] = ()


@dataclass(frozen=True)
class ProcessPlan:
    """One agent process: its nodes, opened in order, on the first node's host."""

    name: str
    role: str
    nodes: tuple[NodePlan, ...]

    @property
    def host(self) -> int:
        return self.nodes[0].host


@dataclass(frozen=True)
class AgentProtocol:
    """How a workload's agents are driven: which roles pace (GO, then DONE) and which
    are stopped after them (STOP, then DONE), with the bounds of each wait."""

    pacers: tuple[str, ...]
    stopped: tuple[str, ...]
    done_timeout_s: float
    stop_timeout_s: float
    close: bool = False  # a final CLOSE, so that every node drains before any closes


@dataclass(frozen=True)
class FigureSpec:
    """A report figure: `draw(entries, records_of)` (or `draw(entries)` without records)
    returns a matplotlib Figure or None. Workloads naming the same title share it."""

    title: str
    caption: str
    draw: Callable[..., Any]
    needs_records: bool = True


@dataclass(frozen=True)
class TableSpec:
    """A report table: `build(entries)` returns (head, rows) or None; `lead` tables come
    before the figures; `caption` says what its figures measure."""

    title: str
    build: Callable[[Sequence[SummaryEntry]], tuple[list[str], list[list[str]]] | None]
    lead: bool = False
    caption: str = ""  # what its figures measure, shown under its title


class VariantFields(TypedDict, total=False):
    """The trial fields (spec/planner.py TrialPlan's) a workload's variant may fix."""

    listeners: int
    chain_length: int
    ack: bool
    graph: str
    stack: str
    workers: int
    deque_len: int
    kills: int
    kill_method: str
    kill_target: str
    kill_interval_ms: float
    dispatch: str


@dataclass(frozen=True)
class Variant:
    """One run of a workload: the trial fields it fixes and its part of the trial id."""

    fields: VariantFields = field(default_factory=lambda: VariantFields())
    label: str = ""
    # Whether the trial is named by sweep.payload (and pairs): false when the workload's
    # nodes have their own payloads (a graph file's), so the label alone says what runs.
    names_payload: bool = True


class Workload(Protocol):
    name: str
    axes: tuple[str, ...]  # sweep fields it uses beyond the common ones
    emulated_hosts: bool  # whether it runs across emulated hosts
    log_words: tuple[str, str, str]  # summary key of its latency, "arrived" word, its name
    replays: bool  # whether its senders replay a stream (spec `replay`, workloads/replay.py)

    def variants(self, sweep: Sweep) -> list[Variant]: ...

    def measured_nodes(self, t: TrialPlan) -> int: ...

    def host_of(self, t: TrialPlan, key: int) -> int: ...

    def processes(self, t: TrialPlan, together: bool) -> list[list[ProcessPlan]]: ...

    def drive(self, t: TrialPlan) -> AgentProtocol: ...

    def read_program(self, role: str, data: object) -> ProgramConfig: ...

    def start(self, role: str, session: Session, cfg: ProgramConfig) -> Program: ...

    def collect(
        self, t: TrialPlan, raw: Path, hosts: list[str]
    ) -> tuple[list[pa.Table], list[NodeHeader]]: ...

    def summarize(
        self,
        table: pa.Table,
        params: TrialParams,
        th: Thresholds,
        nodes: Sequence[NodeHeader] = (),
    ) -> SummaryEntry: ...

    def figures(self) -> list[FigureSpec]: ...

    def tables(self) -> list[TableSpec]: ...


REGISTRY: dict[str, str] = {
    "echo": "roboscale.workloads.echo",
    "fanout": "roboscale.workloads.oneway:FANOUT",
    "ping": "roboscale.workloads.oneway:PING",
    "chain": "roboscale.workloads.oneway:CHAIN",
    "facetrack": "roboscale.workloads.facetrack",
    "graph": "roboscale.workloads.graph",
}
# Results written before workloads existed hold round trips of the first one.
DEFAULT_WORKLOAD = next(iter(REGISTRY))


def known_workloads() -> list[str]:
    return list(REGISTRY)


def get_workload(name: str) -> Workload:
    """Import a workload module only when it is chosen."""
    workload: Workload = load_registered(REGISTRY, name, "workload", "WORKLOAD")
    return workload


def name_of(entry: TrialParams) -> str:
    """The workload of a summary entry or of a trial's parameters."""
    return entry.workload


def workload_of(entry: TrialParams) -> Workload:
    return get_workload(name_of(entry))


@dataclass(frozen=True)
class NodeSpec:
    """One node as its agent runs it: the backend's settings and the workload's program."""

    name: str
    role: str
    output: str
    backend_config: dict[str, object]
    program: ProgramConfig


class AgentConfigError(ValueError):
    """An agent configuration this roboscale cannot read."""


@dataclass(frozen=True)
class AgentConfig:
    """What the lab writes and an agent reads: one process and its nodes."""

    backend: str
    workload: str
    name: str
    role: str  # what the lab drives it as (AgentProtocol.pacers / stopped)
    host: str
    host_index: int
    nodes: tuple[NodeSpec, ...]
    close: bool  # wait for CLOSE after DONE before closing the sessions
    version: int = AGENT_CONFIG_VERSION

    def to_json(self) -> str:
        data = asdict(self)
        data["nodes"] = [{**asdict(n), "program": n.program.to_dict()} for n in self.nodes]
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> AgentConfig:
        data = json.loads(text)
        version = data.get("version") if isinstance(data, dict) else None
        if version != AGENT_CONFIG_VERSION:
            raise AgentConfigError(
                f"agent configuration version {version!r}; this roboscale reads version "
                f"{AGENT_CONFIG_VERSION} only (lab and agent from different roboscale versions?)"
            )
        workload = get_workload(data["workload"])
        nodes = tuple(
            NodeSpec(
                name=n["name"],
                role=n["role"],
                output=n["output"],
                backend_config=n["backend_config"],
                program=workload.read_program(n["role"], n["program"]),
            )
            for n in data["nodes"]
        )
        return cls(**{**data, "nodes": nodes})
