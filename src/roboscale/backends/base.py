"""The backend protocol and registry.

Stdlib only: the node half of a backend runs inside node agents, and ros1 agents
run in Debian's system Python. A backend has two halves:

- the driver half, used by the lab in its own interpreter: `check()`, `version()`,
  `start_infrastructure()`, `node_config()` and `python` (which interpreter runs
  its nodes);
- the node half, used inside an agent: `open(ctx)` returns a `Session` whose
  publishers build the backend's own message type and whose subscriptions call
  back with `(seq, msg)`, where `msg` is the backend's message, to be forwarded
  unchanged by an echoer.
"""

from __future__ import annotations

import base64
import socket
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from roboscale.backends.qos import Capability
from roboscale.jsonfields import Fields
from roboscale.registry import load_registered

# Message ids below zero are probes that establish the echo path before counting.
PROBE_SEQ_BASE = -1

# (id, message): the message is the backend's own object, for its session's `body_of`
# and its publishers' `forward` during the callback; dds releases it when it returns.
Callback = Callable[[int, object], None]


@dataclass(frozen=True)
class TypedPayload:
    """A message type of the user's (.msg files, roboscale/msgtypes.py) as agents carry
    it: the ROS 1 full definition of `msgtype` (its text, then each dependency after
    genpy's separator) and one sample message, base64, serialized for ROS 1 and as CDR
    (little endian, with its 4-byte encapsulation header, as ROS 2 sends it)."""

    msgtype: str  # package/msg/Type
    ros1_definition: str
    ros1_sample: str
    cdr_sample: str
    # JSON: the ROS 2 field definitions of `msgtype` and of every type it uses, as
    # rosbags' store holds them ({name: [[field, [nodetype, detail]], ...]}): what a
    # backend that declares types (dds) builds them from.
    ros2_fields: str = "{}"

    @classmethod
    def read(cls, f: Fields) -> TypedPayload:
        return cls(
            msgtype=f.text("msgtype"),
            ros1_definition=f.text("ros1_definition"),
            ros1_sample=f.text("ros1_sample"),
            cdr_sample=f.text("cdr_sample"),
            ros2_fields=f.text("ros2_fields", "{}"),
        )

    def sample(self, encoding: str) -> bytes:
        """The sample message, `ros1` or `cdr`."""
        return base64.b64decode(self.ros1_sample if encoding == "ros1" else self.cdr_sample)

    @property
    def package(self) -> str:
        return self.msgtype.split("/")[0]

    @property
    def type_name(self) -> str:
        return self.msgtype.split("/")[-1]


@dataclass(frozen=True)
class MessageKind:
    """What a publisher sends: a named kind (text, laserscan, image), raw bytes, or
    `custom`: a type of the user's, described by `typed`."""

    kind: str
    size: int
    typed: TypedPayload | None = None

    @property
    def sensor_or_typed(self) -> bool:
        """Whether its payload part is a message type that a replayed message of that type
        fills as recorded (sensor_msgs LaserScan or Image, or a type of `typed`), rather
        than text or a byte array."""
        return self.typed is not None or self.kind in ("laserscan", "image")

    @classmethod
    def from_dict(cls, d: object) -> MessageKind:
        """A kind as a node config holds it (JSON), each field checked."""
        return cls.read(Fields(d, "kind"))

    @classmethod
    def read(cls, f: Fields) -> MessageKind:
        typed = f.optional_nested("typed")
        return cls(f.text("kind"), f.whole("size"), TypedPayload.read(typed) if typed else None)


@dataclass(frozen=True)
class NodeSetting:
    """What a backend configures one node of a trial by: the trial, its mode, hosts and QoS
    axes, how many nodes it has, and this node's address, whether it listens and whom it
    connects to (endpoint key -> address), for backends that connect nodes explicitly."""

    trial: str
    mode: str = "standard"
    hosts: int = 1
    zenoh_routers: bool = False
    reliability: str | None = None
    history: str | None = None
    durability: str | None = None
    trial_nodes: int = 2
    node_address: str = "127.0.0.1"
    listen: bool = False
    links: Mapping[str, str] = field(default_factory=dict)


@dataclass
class NodeContext:
    name: str
    host: str
    config: dict[str, object] = field(default_factory=dict)  # node_config's, as JSON


class Publisher(Protocol):
    def send(self, seq: int, stamp_ns: int) -> None: ...

    def send_body(self, seq: int, stamp_ns: int, body: bytes) -> None:
        """Send `body`, a replayed message serialized as the backend carries it
        (`Backend.replay_encoding`), as this message's payload: its bytes as they are, as
        `rosbag play` sends them, inside the stamped message of the publisher's kind (the
        recorded type on the backends that carry types)."""
        ...

    def forward(self, msg: object) -> None: ...


class Session(Protocol):
    def publisher(self, topic: str, kind: MessageKind, queue: int) -> Publisher: ...

    def subscribe(self, topic: str, kind: MessageKind, callback: Callback, queue: int) -> None: ...

    def body_of(self, msg: object, kind: MessageKind) -> bytes:
        """The payload of a received message of `kind`: what `send_body` sent."""
        ...

    def close(self) -> None: ...


class Where(Protocol):
    """The hosts of a trial (lab.envs.Placement): host i runs `prefixes[i] + argv`
    with `envs[i]` and is reached at `addresses[i]`. One host, prefix [], is this machine."""

    prefixes: list[list[str]]
    envs: list[dict[str, str]]
    addresses: list[str]
    zenoh_routers: bool  # Zenoh-based backends run a router per host, nodes are its clients
    infrastructure_host: int  # where a trial's one master (roscore) runs: host 0 but by role


class Infrastructure(Protocol):
    """Whatever a backend runs beside its nodes (roscore, a router), and the node env."""

    env: dict[str, str]

    def stop(self) -> None: ...


class NoInfrastructure:
    def __init__(self) -> None:
        self.env: dict[str, str] = {}

    def stop(self) -> None:
        return None


class Backend(Protocol):
    name: str
    # "node": one OS process per node (as ROS 1 runs them); "pair": a sender and its
    # echoer share one process (the native runtime's in-process delivery).
    placement: str
    # The QoS settings it honours, per axis (backends/qos.py); a trial asking for another
    # is refused before anything runs.
    qos: Capability
    # The serialization a replayed message travels in: `ros1`, `cdr` (what a ROS 2 node
    # reads), or "" for the bytes as recorded (a backend with no wire format of its own).
    replay_encoding: str

    @property
    def python(self) -> str: ...

    def check(self) -> None: ...

    def version(self) -> str: ...

    def start_infrastructure(self, workdir: Path, where: Where) -> Infrastructure: ...

    def node_config(self, role: str, key: int, node: NodeSetting) -> dict[str, object]: ...

    def open(self, ctx: NodeContext) -> Session: ...


REGISTRY: dict[str, str] = {
    "native": "roboscale.backends.native",
    "native-proc": "roboscale.backends.native:PROC_BACKEND",
    "zenoh": "roboscale.backends.zenoh",
    "ros1": "roboscale.backends.ros1",
    "dds": "roboscale.backends.dds",
}


def known_backends() -> list[str]:
    return list(REGISTRY)


def get_backend(name: str) -> Backend:
    """Import a backend module only when it is chosen, so a missing one breaks no other."""
    backend: Backend = load_registered(REGISTRY, name, "backend", "BACKEND")
    return backend


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def current_python() -> str:
    return sys.executable
