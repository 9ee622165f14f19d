"""The experiment spec schema. Scalars on sweep axes are accepted as one-element lists."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from roboscale.backends import qos
from roboscale.spec.payloads import parse_payload
from roboscale.workloads.base import DEFAULT_WORKLOAD, known_workloads

BACKEND_NAMES = ("native", "native-proc", "zenoh", "ros1", "dds")
MAX_RATE_HZ = 1_000_000.0
WORKLOADS = tuple(known_workloads())  # registered in workloads/base.py
MAX_LISTENERS = 32
MAX_CHAIN = 16


def _as_list(value: Any) -> Any:
    return value if isinstance(value, list) else [value]


def either(names: list[str], quote: str = "") -> str:
    quoted = [f"{quote}{n}{quote}" for n in names]
    return ", ".join(quoted[:-1]) + " or " + quoted[-1] if len(quoted) > 1 else quoted[0]


def _path_text(value: str) -> str:
    """A file's path as a spec gives it: a NUL byte is no path (the system refuses it)."""
    if "\0" in value or not value:
        raise PydanticCustomError("path", "a file's path, relative to the spec (not empty, no NUL)")
    return value


# A path a spec names, relative to it.
PathText = Annotated[str, AfterValidator(_path_text), Field(max_length=4096)]


def _workload(name: str) -> str:
    if name not in WORKLOADS:
        expected = either(list(WORKLOADS), "'")
        raise PydanticCustomError("literal_error", f"Input should be {expected}")
    return name


def _payload(value: Any) -> tuple[str, int]:
    if isinstance(value, tuple):
        return value
    return parse_payload(value)


def _qos(axis: str) -> Any:
    """The check of one QoS setting: null (the backend's own behaviour) or one of the
    axis's settings."""

    def check(value: str | None) -> str | None:
        if value is None:
            return None
        try:
            return qos.check_value(axis, value)
        except ValueError as e:
            raise PydanticCustomError("qos", str(e)) from None

    return check


QosAxis = Annotated[list[str | None], BeforeValidator(_as_list), Field(min_length=1)]
Reliability = Annotated[QosAxis, AfterValidator(lambda v: [_qos("reliability")(x) for x in v])]
History = Annotated[QosAxis, AfterValidator(lambda v: [_qos("history")(x) for x in v])]
Durability = Annotated[QosAxis, AfterValidator(lambda v: [_qos("durability")(x) for x in v])]
Payload = Annotated[tuple[str, int], BeforeValidator(_payload)]
Rate = Annotated[float, Field(gt=0, le=MAX_RATE_HZ)]
RateFactor = Annotated[float, Field(gt=0, le=1000)]
Pairs = Annotated[int, Field(ge=1, le=1024)]
Hosts = Annotated[int, Field(ge=1, le=64)]
Quota = Annotated[float, Field(gt=0, le=64)]
Listeners = Annotated[int, Field(ge=1, le=MAX_LISTENERS)]
ChainLength = Annotated[int, Field(ge=2, le=MAX_CHAIN)]
Workers = Annotated[int, Field(ge=1, le=5000)]
DequeLen = Annotated[int, Field(ge=1, le=1000)]
Kills = Annotated[int, Field(ge=0, le=50_000)]
KillInterval = Annotated[float, Field(ge=0, le=1000)]
LINK_NAME = r"^[A-Za-z][A-Za-z0-9_.-]*$"
CORES = r"^[0-9]{1,4}(-[0-9]{1,4})?(,[0-9]{1,4}(-[0-9]{1,4})?){0,63}$"
# Levels of the background-load axes (the lab report's none, normal and heavy extra work):
# a busy-loop duty cycle on every host, and Mbit/s of UDP from the first host to the last
# (heavy: the report's 15 Mbit/s download).
CPU_LOAD_LEVELS = {"none": 0.0, "normal": 0.25, "heavy": 0.75}
TRAFFIC_LEVELS_MBIT = {"none": 0.0, "normal": 5.0, "heavy": 15.0}
Level = Literal["none", "normal", "heavy"]
LOOPBACK = "loopback"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


class Sweep(Strict):
    """Axes whose lists expand into the cross product of trials."""

    backend: Annotated[list[str], BeforeValidator(_as_list), Field(min_length=1)] = ["native"]
    # Required unless the spec replays a stream (`replay`), whose rate is recorded.
    rate_hz: Annotated[list[Rate], BeforeValidator(_as_list), Field(min_length=1)] = []
    rate_factor: Annotated[list[RateFactor], BeforeValidator(_as_list), Field(min_length=1)] = [1.0]
    payload: Annotated[list[Payload], BeforeValidator(_as_list), Field(min_length=1)] = [
        ("text", 11)
    ]
    pairs: Annotated[list[Pairs], BeforeValidator(_as_list), Field(min_length=1)] = [1]
    hosts: Annotated[list[Hosts], BeforeValidator(_as_list), Field(min_length=1)] = [1]
    link: Annotated[
        list[Annotated[str, Field(pattern=LINK_NAME)]],
        BeforeValidator(_as_list),
        Field(min_length=1),
    ] = [LOOPBACK]
    cpu: Annotated[list[Quota | None], BeforeValidator(_as_list), Field(min_length=1)] = [None]
    workload: Annotated[
        list[Annotated[str, AfterValidator(_workload)]],
        BeforeValidator(_as_list),
        Field(min_length=1),
    ] = [DEFAULT_WORKLOAD]
    listeners: Annotated[list[Listeners], BeforeValidator(_as_list), Field(min_length=1)] = [1]
    chain_length: Annotated[list[ChainLength], BeforeValidator(_as_list), Field(min_length=1)] = [5]
    ack: Annotated[list[bool], BeforeValidator(_as_list), Field(min_length=1)] = [False]
    reliability: Reliability = [None]
    history: History = [None]
    durability: Durability = [None]
    # The face tracker (workload facetrack): its stacks and the paper's variables.
    stack: Annotated[list[str], BeforeValidator(_as_list), Field(min_length=1)] = ["runtime"]
    workers: Annotated[list[Workers], BeforeValidator(_as_list), Field(min_length=1)] = [4]
    deque_len: Annotated[list[DequeLen], BeforeValidator(_as_list), Field(min_length=1)] = [5]
    kills: Annotated[list[Kills], BeforeValidator(_as_list), Field(min_length=1)] = [0]
    kill_method: Annotated[
        list[Literal["sigterm", "sigkill", "crash"]], BeforeValidator(_as_list), Field(min_length=1)
    ] = ["sigkill"]
    kill_target: Annotated[
        list[Literal["worker", "aggregator", "face_supervisor", "aggregator_supervisor"]],
        BeforeValidator(_as_list),
        Field(min_length=1),
    ] = ["worker"]
    kill_interval_ms: Annotated[
        list[KillInterval], BeforeValidator(_as_list), Field(min_length=1)
    ] = [0.0]
    dispatch: Annotated[
        list[Literal["random", "round_robin", "least_loaded"]],
        BeforeValidator(_as_list),
        Field(min_length=1),
    ] = ["random"]
    # The lab report's Q5/Q6 knobs: real-time priority (SCHED_FIFO) and core pinning of
    # every node process, and background load levels (null: env.load_cpu/load_net_mbit).
    priority: Annotated[
        list[Literal["normal", "fifo"]], BeforeValidator(_as_list), Field(min_length=1)
    ] = ["normal"]
    pin: Annotated[
        list[Annotated[str, Field(pattern=CORES)] | None],
        BeforeValidator(_as_list),
        Field(min_length=1),
    ] = [None]
    cpu_load: Annotated[list[Level | None], BeforeValidator(_as_list), Field(min_length=1)] = [None]
    traffic: Annotated[list[Level | None], BeforeValidator(_as_list), Field(min_length=1)] = [None]
    # Graph files (workload graph), relative to the spec; absolute once loaded.
    graph: Annotated[list[str], BeforeValidator(_as_list)] = []

    @field_validator("stack")
    @classmethod
    def _known_stacks(cls, names: list[str]) -> list[str]:
        from roboscale.facetrack.stack import known_stacks

        for name in names:
            if name not in known_stacks():
                raise ValueError(f"unknown stack {name!r}; known: {', '.join(known_stacks())}")
        return names

    @field_validator("backend")
    @classmethod
    def _known_backends(cls, names: list[str]) -> list[str]:
        for name in names:
            if name not in BACKEND_NAMES:
                raise ValueError(f"unknown backend {name!r}")
        return names


# Runs per trial when the spec does not say: three in a full spec, so that every figure
# has a spread across runs (one run's interval says nothing of how much the next would
# differ), one with --quick (spec/loader.py applies it).
FULL_RUNS = 3
QUICK_RUNS = 1


class TrialSettings(Strict):
    """How each trial runs."""

    runs: int = Field(FULL_RUNS, ge=1, le=1000)
    messages: int | None = Field(None, ge=1, le=10_000_000)
    duration_s: float | None = Field(None, gt=0, le=3600)
    warmup: int = Field(50, ge=0, le=100_000)
    drain_s: float = Field(2.0, ge=0, le=600)
    pause_s: float = Field(0.0, ge=0, le=3600)
    publisher_queue: int = Field(1000, ge=0, le=1_000_000)
    subscriber_queue: int = Field(0, ge=0, le=1_000_000)
    mode: Literal["standard", "thesis_compat"] = "standard"
    order: Literal["sequential", "shuffled"] = "sequential"
    match_timeout_s: float = Field(20.0, gt=0, le=600)
    loop: bool = False  # replay: start the stream again when it ends, until `messages`

    def message_count(self, rate_hz: float) -> int:
        """Messages per stream: `messages`, or `duration_s` worth at the rate (default 1000)."""
        if self.messages is not None:
            return self.messages
        if self.duration_s is not None:
            return max(1, round(rate_hz * self.duration_s))
        return 1000


class EnvSettings(Strict):
    """Where nodes run when a trial uses emulated hosts, links or CPU quotas."""

    topology: Literal["star", "mesh"] = "star"
    profiles: PathText | None = None  # a YAML file of custom link profiles, relative to the spec
    sender_hosts: float = Field(0.5, gt=0, lt=1)
    pairs_per: Literal["trial", "host_pair"] = "trial"
    verify_link: bool = True
    subnet: str = "10.231.0.0/24"
    zenoh_routers: bool = False
    load_cpu: float = Field(0.0, ge=0, le=1)
    load_net_mbit: float = Field(0.0, ge=0, le=10_000)
    # Real machines: an inventory file (relative to the spec) and the hosts of it that
    # play hosts 0, 1, ... of each trial, in that order (docs/hosts.md).
    inventory: PathText | None = None
    machines: list[Annotated[str, Field(pattern=LINK_NAME)]] = []
    # One-way figures across real machines are valid while the clocks' error bound
    # stays below this.
    clock_max_bound_us: float = Field(1000.0, gt=0)


class VerdictSettings(Strict):
    min_rate_ratio: float = Field(0.95, gt=0, le=1)
    max_loss: float = Field(0.01, ge=0, le=1)
    # Late and too-late messages after ros2-performance (analysis/verdict.py says why).
    late_share: float = Field(0.2, gt=0, le=1)
    late_cap_ms: float = Field(5.0, gt=0)
    too_late_cap_ms: float = Field(50.0, gt=0)
    max_late: float = Field(0.10, ge=0, le=1)
    max_too_late: float = Field(0.01, ge=0, le=1)
    growth_factor: float = Field(2.0, ge=1)
    growth_floor_us: float = Field(200.0, ge=0)
    max_send_lag_periods: float = Field(1.0, gt=0)
    max_p99_us: float | None = Field(None, gt=0)


class Spec(Strict):
    name: str = Field(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9_.-]+$")
    description: str = ""
    sweep: Sweep
    trial: TrialSettings = TrialSettings()
    seed: int = Field(0, ge=0)
    replay: PathText | None = None
    # The bag's topics to replay (all it can when absent); checked against it on loading.
    replay_topics: (
        Annotated[list[Annotated[str, Field(max_length=256)]], Field(min_length=1)] | None
    ) = None
    # .msg files or folders (relative to the spec; absolute once loaded) whose types
    # payloads may name (roboscale/msgtypes.py).
    message_types: Annotated[list[PathText], BeforeValidator(_as_list)] = []
    verdict: VerdictSettings = VerdictSettings()
    env: EnvSettings = EnvSettings()


# What each field allows, worded for people; used in validation messages.
ALLOWED: dict[str, str] = {
    "name": "a short name of letters, digits, '.', '_' or '-'",
    "description": "free text",
    "sweep": "a mapping with backend, rate_hz, rate_factor, payload, pairs, hosts, link, cpu, "
    "workload, listeners, chain_length, ack, reliability, history, durability, stack, workers, "
    "deque_len, kills, kill_method, kill_target, kill_interval_ms, dispatch, priority, pin, "
    "cpu_load, traffic, graph",
    "sweep.backend": f"one of {', '.join(BACKEND_NAMES)}, or a list of them",
    "sweep.rate_hz": "a rate in Hz above 0 and at most 1,000,000, or a list of them",
    "sweep.rate_factor": "with replay: a speed-up of the recorded timing, above 0 and at most "
    "1000 (1: as recorded, 2: twice as fast), or a list of them",
    "replay": "stata (generated MIT Stata Center streams: LaserScan 20 Hz, Image 30 Hz) or a "
    "bag to replay, relative to the spec: a ROS 1 .bag, or a rosbag2 folder (sqlite3 or MCAP)",
    "replay_topics": "with a bag as replay: a list of at least one of its topics "
    "(/name/name...) to replay; the others are skipped",
    "trial.loop": "true or false: with replay, start the stream again until trial.messages",
    "sweep.payload": "text, laserscan, image, a size from 1 B to 4 MB (256, '4KB'), a type of "
    "message_types (package/msg/Type, or {type: package/msg/Type, size: 64KB}), or a list",
    "message_types": ".msg files or folders of them (<package>/msg/<Type>.msg), relative to "
    "the spec, or a list of them",
    "sweep.pairs": "a number of sender/echoer pairs from 1 to 1024, or a list of them",
    "sweep.hosts": "a number of emulated hosts from 1 to 64 (1: this machine), or a list",
    "sweep.link": "loopback (no emulation), ethernet, wifi or a profile of env.profiles, or a list",
    "sweep.cpu": "a CPU quota per host in cores above 0 (1.0, 0.75, 0.5), null for none, or a list",
    "sweep.workload": f"{either(list(WORKLOADS))}, or a list of them",
    "sweep.listeners": f"listeners of a fanout, 1 to {MAX_LISTENERS}, or a list of them",
    "sweep.chain_length": f"nodes in a chain (A -> B -> ...), 2 to {MAX_CHAIN}, or a list",
    "sweep.graph": "a graph file (workload graph; see docs/usage.md, graph files), relative to the "
    "spec, or a list of them",
    "sweep.ack": "false (one-way) or true (each listener acknowledges: ping-pong), or a list",
    "sweep.reliability": "reliable or best_effort (null: the backend's own), or a list; "
    "only backends that honour it (dds honours both)",
    "sweep.history": "keep_all, keep_last (the queue length) or keep_last N (null: the "
    "backend's own), or a list; only backends that honour it (dds)",
    "sweep.durability": "volatile or transient_local (null: the backend's own), or a list; "
    "only backends that honour it (dds honours both)",
    "sweep.stack": "a face-tracker stack (runtime, runtime-proc, ros1, erlang: see "
    "`roboscale stacks`), or a list of them",
    "sweep.workers": "face-detector workers, 1 to 5000, or a list of them",
    "sweep.deque_len": "faces the aggregator averages, 1 to 1000 (the paper: 1, 5, 10), or a list",
    "sweep.kills": "workers killed at once during the run, 0 to 50,000, or a list of them",
    "sweep.kill_method": "sigterm, sigkill or crash (in-process workers), or a list of them",
    "sweep.kill_target": "worker (the paper's chaos monkey), or one main process killed once "
    "(kills: 1): aggregator (ros1, erlang), face_supervisor or aggregator_supervisor "
    "(erlang), or a list of them",
    "sweep.kill_interval_ms": "milliseconds between two kills, 0 (all at once, the paper's "
    "chaos runs) to 1000 (the paper's restart timing: 5, 200 kills a second), or a list",
    "sweep.dispatch": "random (the paper's), round_robin or least_loaded, or a list of them",
    "sweep.priority": "normal or fifo (every node process under SCHED_FIFO; needs root, not "
    "on real machines), or a list of them",
    "sweep.pin": "cores every node process runs on ('0', '0-1', '0,2'; null: any), or a list",
    "sweep.cpu_load": "none, normal or heavy background busy loops on every host (duty 0, "
    "0.25, 0.75; null: env.load_cpu), or a list of them",
    "sweep.traffic": "none, normal or heavy extra UDP from the first host to the last (0, 5, "
    "15 Mbit/s; 2 hosts or more; null: env.load_net_mbit), or a list of them",
    "env": "a mapping of emulated-host settings",
    "env.topology": "star (a switch) or mesh (a link per host pair)",
    "env.profiles": "a YAML file of custom link profiles, relative to the spec",
    "env.sender_hosts": "the fraction of hosts that run senders, above 0 and below 1",
    "env.pairs_per": "trial (pairs in total) or host_pair (pairs per sender host x echoer host)",
    "env.verify_link": "true or false: measure the link profile when hosts come up",
    "env.subnet": "an IPv4 subnet for the hosts' addresses, e.g. 10.231.0.0/24",
    "env.zenoh_routers": "true or false: zenoh and native-proc nodes are clients of a router "
    "on their host (routers connect to host 0's)",
    "env.load_cpu": "a busy-loop duty cycle from 0 to 1 on every host (or this machine)",
    "env.load_net_mbit": "Mbit/s of UDP from the first to the last host, 0 to 10000 (2+ hosts)",
    "env.inventory": "a host inventory (YAML) of real machines, relative to the spec",
    "env.machines": "names of inventory hosts, in the order of the trial's hosts 0, 1, ...",
    "env.clock_max_bound_us": "the largest clock error bound, in µs above 0, at which one-way "
    "figures across real machines are valid",
    "trial": "a mapping of trial settings",
    "trial.runs": "a whole number of repetitions from 1 to 1000",
    "trial.messages": "messages per stream, 1 to 10,000,000",
    "trial.duration_s": "seconds per stream, above 0 and at most 3600",
    "trial.warmup": "messages sent and discarded before measuring, 0 to 100,000",
    "trial.drain_s": "seconds to wait for late replies, 0 to 600",
    "trial.pause_s": "seconds between trials, 0 to 3600",
    "trial.publisher_queue": "publisher queue length, 0 (unbounded) to 1,000,000",
    "trial.subscriber_queue": "subscriber queue length, 0 (unbounded) to 1,000,000",
    "trial.mode": "standard or thesis_compat",
    "trial.order": "sequential or shuffled (by seed)",
    "trial.match_timeout_s": "seconds to wait for the echo path to connect, up to 600",
    "seed": "a whole number >= 0",
    "verdict": "a mapping of verdict thresholds",
    "verdict.min_rate_ratio": "a fraction above 0 and at most 1 (achieved/target rate)",
    "verdict.max_loss": "a fraction from 0 to 1",
    "verdict.late_share": "a fraction of the period above 0 and at most 1 (late beyond it)",
    "verdict.late_cap_ms": "milliseconds above 0 (the late bound at most this)",
    "verdict.too_late_cap_ms": "milliseconds above 0 (the too-late bound at most this)",
    "verdict.max_late": "a fraction from 0 to 1 (share of late messages allowed)",
    "verdict.max_too_late": "a fraction from 0 to 1 (share of too-late messages and sends "
    "lagging a period allowed)",
    "verdict.growth_factor": "a factor >= 1 (the latency trend adds at most factor - 1 times "
    "the starting latency, plus the floor)",
    "verdict.max_send_lag_periods": "periods above 0 (a send later than this is lagging)",
    "verdict.growth_floor_us": "microseconds >= 0",
    "verdict.max_p99_us": "microseconds above 0 (a ceiling on the p99 latency), or absent",
}
