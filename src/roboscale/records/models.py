"""The typed contents of a results folder: what `ResultsFolder` reads and writes.

Every model is frozen and strict (a string is no number). Fields the tool's readers use
are declared; more fields are kept (`extra="allow"`), so that results of a newer
workload or verdict stay readable and are written back whole. A summary entry is parsed
by its workload's own model (`ENTRY_MODELS`): a graph trial must carry its paths and
topics, a face-tracker trial its tracker figures, a one-way trial its per-node figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0)]
Number = float | None


class Record(BaseModel):
    """Frozen, strict types, unknown fields kept."""

    model_config = ConfigDict(extra="allow", strict=True, frozen=True)

    def to_dict(self) -> dict[str, object]:
        """As JSON holds it (the fields of the file, unknown ones included)."""
        return self.model_dump()


class HostFacts(Record):
    """The machine a run or a trial ran on (env/hostfacts.py; a real machine's own). A
    trial across several real machines joins their facts as text ("4+8" cores)."""

    hostname: str = "?"
    cpu_model: str = "?"
    cores: int | str | None = None
    cpu_affinity: int | str | None = None
    mem_total_kb: int | str | None = None
    kernel: str = "?"
    os: str = "?"
    python: str = "?"
    cpu_quota: str | float | None = None
    link_profile: str = "?"
    event_loop: str = "?"


class RunInfo(Record):
    """run.json: what was run, where, with which versions. An interrupted or hand-made
    run may lack some fields; the report shows what is there."""

    format_version: int
    tool_version: str = "?"
    spec_name: str = "?"
    spec_description: str = ""
    spec: str = ""  # the spec's text, as given
    command: str = ""  # the exact command line, quoted for a shell
    created_unix_s: float = 0.0
    host: HostFacts = HostFacts()
    backends: dict[str, str] = {}  # backend -> the version of its middleware
    # each Python package that decides what was measured -> its version
    packages: dict[str, str] = {}


class TrialParams(Record):
    """The parameters every trial records (spec/planner.py TrialPlan.params())."""

    trial: str = Field(min_length=1)
    backend: str
    workload: str
    rate_hz: float = Field(gt=0)
    payload: str
    payload_bytes: Count
    pairs: int = Field(ge=1)
    run: Count
    messages: Count
    warmup: Count
    ack: bool
    hosts: int = Field(1, ge=1)
    link: str = "loopback"
    cpu: float | None = None
    listeners: Count = 0
    chain_length: Count = 0
    drain_s: Seconds = 0.0
    graph: str = ""
    subject: str = ""
    replay: str = ""
    stack: str = ""
    workers: Count = 0
    deque_len: Count = 0
    kills: Count = 0
    kill_method: str = ""
    dispatch: str = ""
    burst: bool = False  # a replayed recording sent back to back: it claims no rate

    @property
    def params(self) -> dict[str, object]:
        """The parameters alone (for an entry: without its figures)."""
        names = set(TrialParams.model_fields) | set(self.model_extra or {})
        return {k: v for k, v in self.to_dict().items() if k in names and k not in _FIGURE_KEYS}


class Distribution(Record):
    """Percentiles and moments of a latency in µs; null when nothing arrived, a percentile
    null too where the sample does not support it (analysis/stats.py). `n` and the 95 %
    intervals of p50 and p99 are absent from results written before they were kept."""

    p50: Number
    p90: Number
    p99: Number
    p999: Number
    max: Number
    mean: Number
    std: Number
    ci80_low: Number
    ci80_high: Number
    p50_low: Number = None
    p50_high: Number = None
    p99_low: Number = None
    p99_high: Number = None
    n: Count | None = None


class Usage(Record):
    """CPU and memory of a trial's processes (lab/trial.py node_usage)."""

    cpu_s_total: float | None = None
    cpu_s_after_ready: float | None = None
    processes: Count = 0
    peak_rss_kb_max: Count = 0
    malformed: Count = 0
    duplicates: Count = 0
    # The machine while the trial's nodes ran (lab/trial.py host_cpu): CPU seconds spent
    # outside the trial's processes (other tenants, kernel threads, the lab's own
    # controller and, when the trial asks for it, its background load) and seconds the
    # hypervisor took from the virtual CPUs (steal), over `host_window_s`. A trial's late
    # round trips can be theirs (docs/runtime.md, "Where the 1 kHz stalls come from").
    # None: not measured (older results, or nodes on other machines).
    host_window_s: float | None = None
    host_other_cpu_s: float | None = None
    host_steal_s: float | None = None


class ClockBound(Record):
    """How far a trial's one-way figures can be off across real machines' clocks."""

    bound_us: float
    valid: bool
    max_bound_us: float


class RuleRecord(Record):
    """One rule of the verdict: whether it held, whether it was judged, its figure in
    words and the measured value against its limit (analysis/verdict.py's Rule)."""

    rule: str
    ok: bool
    judged: bool
    figure: str
    value: float | None = None
    limit: float | None = None


class VerdictRecord(Record):
    """Why a trial is (not) sustained; analysis/verdict.py owns the rules and their names.
    A verdict of the format before the rules has no `rules` (its rate_ok, loss_ok, ...
    are kept as extra fields, and read by analysis/verdict.py)."""

    sustained: bool | None = None
    rate_ratio: float = 1.0
    loss: float = 0.0
    rules: list[RuleRecord] | None = None
    trend: dict[str, float] | None = None


class FailedEntry(TrialParams):
    """A trial that ended with an error: its parameters and the error."""

    error: str
    sustained: Literal[False] = False


# The fields only some workloads' entries have: found in another's, the entry is damaged.
WORKLOAD_FIELDS = frozenset({"per_node", "e2e_us", "paths", "topics", "facetrack"})


class MeasuredEntry(TrialParams):
    """A finished trial: what every workload's entry holds."""

    @model_validator(mode="before")
    @classmethod
    def _no_foreign_figures(cls, data: object) -> object:
        if isinstance(data, dict):
            for key in sorted(WORKLOAD_FIELDS & set(data) - set(cls.model_fields)):
                workload = data.get("workload")
                raise ValueError(f"{key!r} is not a field of workload {workload!r}'s entries")
        return data

    error: None = None
    sent: Count
    received: Count
    lost: int
    loss: float = Field(ge=0, le=1)
    achieved_rate_hz: float | None = Field(ge=0)
    achieved_rate_min_hz: float | None = Field(ge=0)
    rtt_us: Distribution
    one_way_us: Distribution
    send_lag_us: Distribution
    sustained: bool
    verdict: VerdictRecord
    thresholds: dict[str, float | None] | None = None
    usage: Usage = Usage()
    clock: ClockBound | None = None


class EchoEntry(MeasuredEntry):
    """Round trips (workload echo): `rtt_us` is the headline."""


class NodeFigures(Record):
    node: str
    received: Count
    one_way_us: Distribution
    rtt_us: Distribution
    hop_us: Distribution | None = None


class FlowFigures(Record):
    """workloads/oneway_figures.py: the share of box-plot outliers per listener or hop,
    how far apart one message reaches its listeners, and the acks' way back."""

    outlier_share: list[float | None]
    outlier_share_of: Literal["hop", "one_way"]
    arrival_spread_us: Distribution | None = None
    ack_return_us: Distribution | None = None


class OneWayEntry(MeasuredEntry):
    """fanout, ping, chain: `one_way_us` is the headline, each listener or hop apart."""

    per_node: list[NodeFigures] = []
    flow: FlowFigures | None = None


class PathFigures(Record):
    path: str
    sources: Count
    followed: Count
    e2e_us: Distribution
    rate_hz: float | None


class TopicFigures(Record):
    topic: str
    publisher: str
    subscriber: str
    sent: Count
    arrived: Count
    rate_hz: float | None
    latency_us: Distribution


class GraphEntry(MeasuredEntry):
    """A node graph: end to end per path (the first one's is `e2e_us`), each topic."""

    e2e_us: Distribution
    paths: list[PathFigures]
    topics: list[TopicFigures]


class FacetrackSummary(Record):
    """facetrack/records.py summarize(): one tracker run's figures."""

    frames: Count
    frames_lost: Count
    frames_late: Count = 0
    mean_jaccard: float | None
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    latency_mean_ms: float | None = None
    restart_p50_ms: float | None = None
    restart_max_ms: float | None = None
    restart_init_p50_ms: float | None = None
    pss_total_mb: float | None = None
    pss_per_worker_mb: float | None = None
    alive_workers: int | None = None


class KillFigures(Record):
    worker: int
    method: str
    kill_ns: int
    restarted_ns: int | None
    frames_lost: Count = 0
    frames_late: Count = 0
    initialized_ns: int | None = None


class FacetrackFigures(Record):
    """What the tracker's node reports: its summary, kills and per-frame series."""

    stack: str
    summary: FacetrackSummary
    kills: list[KillFigures]
    processes: list[dict[str, object]] = []
    counters: dict[str, int] = {}
    kill_at: int = 0
    jaccard: list[float | None] = []
    tracking_error: list[float | None] = []
    worker: list[int] = []


class FacetrackEntry(MeasuredEntry):
    """The face tracker: capture-to-command round trips and the tracker's figures (null
    when the tracker reported none)."""

    facetrack: FacetrackFigures | None


SummaryEntry = FailedEntry | EchoEntry | OneWayEntry | GraphEntry | FacetrackEntry
ENTRY_MODELS: dict[str, type[MeasuredEntry]] = {
    "echo": EchoEntry,
    "fanout": OneWayEntry,
    "ping": OneWayEntry,
    "chain": OneWayEntry,
    "graph": GraphEntry,
    "facetrack": FacetrackEntry,
}
_FIGURE_KEYS = frozenset(
    set(MeasuredEntry.model_fields).union(*(m.model_fields for m in ENTRY_MODELS.values()))
    - set(TrialParams.model_fields)
) | {"error"}


class Summary(Record):
    """summary.json: one entry per finished trial and the verdict's thresholds."""

    format_version: int
    thresholds: dict[str, float | None] | None = None
    trials: list[SummaryEntry] = []

    def entry(self, trial: str) -> SummaryEntry | None:
        return next((e for e in self.trials if e.trial == trial), None)


class WallClock(Record):
    unix_s: float
    monotonic_ns: int


class ProcessTimes(Record):
    cpu_user_s: float
    cpu_sys_s: float
    max_rss_kb: int = 0


class NodeCounters(Record):
    received: Count = 0
    duplicates: Count = 0
    out_of_range: Count = 0
    probes: Count = 0
    extra: dict[str, int] = {}


class NodeHeader(Record):
    """What a node agent wrote at the end of a trial (workloads/agent.py), with the
    workload's own fields (a pair, the face tracker's figures) kept as extra fields."""

    node: str
    role: str = ""
    host: str = ""
    pid: int
    counters: NodeCounters = NodeCounters()
    usage: ProcessTimes
    usage_ready: ProcessTimes
    malformed: Count = 0


def node_headers(heads: Iterable[Mapping[str, object]]) -> list[NodeHeader]:
    """Nodes' raw headers (written by agents in another process), checked: one that is not
    as agents write it is a ValidationError (a ValueError), which fails the trial."""
    return [NodeHeader.model_validate(dict(h)) for h in heads]


class ClockOffset(Record):
    """One estimate of a host's clock offset (env/clock.py)."""

    offset_ns: int
    bound_ns: int
    delay_ns: int
    exchanges: Count


class HostClock(Record):
    start: ClockOffset  # measured before the trial
    end: ClockOffset  # and after it
    offset_ns: int  # applied to the host's timestamps
    bound_ns: int


class TrialClocks(Record):
    """Real machines: each host's clock offset before and after the trial, and the bound
    this puts on one-way figures (lab/runner.py to_local_clock)."""

    hosts: dict[str, HostClock]
    one_way: ClockBound


class TrialMetadata(Record):
    """trials/<id>/metadata.json: everything needed to rerun and judge one trial."""

    format_version: int
    tool_version: str = "?"
    backend: str = ""
    backend_version: str = ""
    params: TrialParams
    host: HostFacts
    warmup_discarded: Count = 0
    start: WallClock | None = None
    end: WallClock | None = None
    env: dict[str, object] = {}  # where it ran: emulated hosts, links, real machines
    clocks: TrialClocks | None = None
    nodes: list[NodeHeader] = []
    usage: Usage | None = None
    replayed: ReplayedData | None = None
    error: str | None = None


class ReplayedData(Record):
    """The data a trial replayed, by content: the same hash, the same messages."""

    source: str  # `stata`, or the bag's path as the spec gave it
    sha256: str  # of the file, or of a folder's files in name order
    bytes: Count


TrialMetadata.model_rebuild()
