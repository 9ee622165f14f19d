"""The dds backend: Eclipse Cyclone DDS (PyPI `cyclonedds`, pinned) in ROS 2's wire format.

Topics are `rt/<name>` and types `<pkg>::msg::dds_::<Type>_`, as rmw_cyclonedds
names them; a message is the thesis's stamped message in ROS 2 form (`int32 id`,
`builtin_interfaces/Time t`, then a real std_msgs/String, sensor_msgs/LaserScan,
sensor_msgs/Image or `uint8[]`; see `dds_types`), or a replayed topic's recorded type,
whose recorded CDR is written after the id and stamp as it is. The id and the stamp sit at
fixed offsets (bytes 4-16 after the 4-byte encapsulation header) of every stamped
type, so a publisher serializes its message once with the library and patches
them per send, a subscriber reads them without decoding the payload, and an
echoer forwards the received CDR unchanged: the Python work per message is the
same few struct calls at every size, as for zenoh's attachment.

Every participant is confined to one interface (`lo` on this machine, the host's
own address on an emulated host), multicast off, peers named, and each trial
leases a domain id of its own (`lease_domain`, dds_domain.py), so concurrent runs never meet.
A reader's samples are taken in its `on_data_available` listener, on the Cyclone thread
that delivers them (as ddsperf does; $ROBOSCALE_DDS_TAKE=waitset: a thread per reader woken
from a WaitSet, as rclpy does), as references to Cyclone's serialized data (`dds_cdr`), so
a received message is read in place and an echoer forwards it without a copy; the take,
the header check and the forward run in C (`_dds_take`) where it was built
($ROBOSCALE_DDS_PATH=ctypes: through ctypes, as where it was not).
The driver half is stdlib only; the node half imports cyclonedds (venv nodes).
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roboscale.backends.base import (
    Callback,
    Infrastructure,
    MessageKind,
    NodeContext,
    NodeSetting,
    Where,
    current_python,
)
from roboscale.backends.dds_cdr import (
    PinnedSampleWriter,
    ReaderListener,
    Sample,
    SampleWriter,
    Taking,
    cyclone,
    forwarder,
    taker,
)
from roboscale.backends.dds_domain import (
    MAX_PARTICIPANT_INDEX,
    DomainLease,
    cyclone_xml,
    lease_domain,
)
from roboscale.backends.qos import EVERY_SETTING, split_history
from roboscale.errors import BackendUnavailable, UserError
from roboscale.jsonfields import Fields

if TYPE_CHECKING:
    from cyclonedds.topic import Topic

PINNED = "11.0.1"
INSTALL_HINT = "pip install 'roboscale[dds]' (Cyclone DDS's Python binding, cyclonedds==11.0.1)"
STAMP = struct.Struct("<iiI")  # id, t.sec, t.nanosec after the encapsulation header
OCTETS_LEN = struct.Struct("<I")  # StampedBytes: the length of `data`, after the stamp
CDR_HEADER = 4
HEAD = CDR_HEADER + STAMP.size  # the encapsulation header, id and stamp: 16 bytes
CDR_LE = b"\0\1\0\0"  # the encapsulation header: plain CDR, little endian
PADDING = (b"", b"\0", b"\0\0", b"\0\0\0")
TAKE_BATCH = 64
WAKE_S = 1.0  # a drain thread's longest sleep: it also checks whether its session closed

TAKE_ENV, TAKE_MODES = "ROBOSCALE_DDS_TAKE", ("listener", "waitset")
PATH_ENV, PATHS = "ROBOSCALE_DDS_PATH", ("c", "ctypes")
DEFAULT_QOS = {"reliability": "reliable", "history": "keep_last", "depth": 0}
DURABILITIES = ("volatile", "transient_local")

# The domain's lease and Cyclone configuration live in dds_domain.py; the driver and the
# benchmarks name them here too.
__all__ = ["BACKEND", "DdsBackend", "DomainLease", "cyclone_xml", "lease_domain"]


def loopback_endpoints(domain: int, topic: str) -> tuple[Any, Any, Any]:
    """A participant of its own on loopback (in `domain`, leased by the caller) with a
    reader and a writer of one StampedBytes topic, for the sample paths without a
    trial: (domain, reader, writer). Keep the domain referenced while using them."""
    from cyclonedds.domain import Domain, DomainParticipant
    from cyclonedds.pub import DataWriter
    from cyclonedds.sub import DataReader
    from cyclonedds.topic import Topic

    from roboscale.backends.dds_types import StampedBytes

    configured = Domain(domain, cyclone_xml(domain, "lo", ["127.0.0.1"], 4))
    participant = DomainParticipant(domain)
    stamped = Topic(participant, topic, StampedBytes)
    return configured, DataReader(participant, stamped), DataWriter(participant, stamped)


class DdsPublisher:
    def __init__(self, writer: Any, kind: MessageKind, in_c: bool) -> None:
        from roboscale.backends.dds_types import build_message, payload_offset

        self._writer = writer  # the binding deletes the entity when this is collected
        self._write = SampleWriter(writer._ref)
        self._forward = forwarder(writer._ref, in_c)
        cdr = build_message(kind).serialize()  # XCDR1, little endian, as ROS 2 sends
        self._cdr = bytearray(cdr.ljust(-(-len(cdr) // 4) * 4, b"\0"))
        self._write_own = PinnedSampleWriter(writer._ref, self._cdr)
        self.failed = 0
        # What goes before a replayed body: all but the payload part (None: StampedBytes).
        typed = kind.sensor_or_typed
        self._head = bytearray(self._cdr[: payload_offset(kind)]) if typed else None
        if self._head is not None:
            self._head[2:4] = b"\0\0"

    def send(self, seq: int, stamp_ns: int) -> None:
        sec, nanosec = divmod(stamp_ns, 1_000_000_000)
        STAMP.pack_into(self._cdr, CDR_HEADER, seq, sec, nanosec)
        if self._write_own() < 0:
            self.failed += 1

    def send_body(self, seq: int, stamp_ns: int, body: bytes) -> None:
        """StampedBytes around the body; a typed kind's message with the body, the CDR of
        the recorded type (little endian), as its payload part, as recorded."""
        if self._head is None:
            from roboscale.backends.dds_types import StampedBytes, stamp_time

            octets = StampedBytes(id=seq, t=stamp_time(stamp_ns), data=body).serialize()
            self.send_cdr(octets.ljust(-(-len(octets) // 4) * 4, b"\0"))
            return
        if body[:2] != CDR_LE[:2]:
            raise ValueError("a replayed body is not little-endian CDR")
        pad = -(len(self._head) + len(body) - CDR_HEADER) % 4
        cdr = self._head + memoryview(body)[CDR_HEADER:] + PADDING[pad]
        cdr[3] = pad  # the encapsulation options: how many bytes of padding end it
        sec, nanosec = divmod(stamp_ns, 1_000_000_000)
        STAMP.pack_into(cdr, CDR_HEADER, seq, sec, nanosec)
        self.send_cdr(cdr)

    def send_cdr(self, cdr: bytes | bytearray) -> None:
        if self._write(cdr) < 0:
            self.failed += 1

    def forward(self, msg: object) -> None:
        """Write a received message unchanged: a `Sample` by reference (no copy), bytes
        through `dds_write`."""
        if type(msg) is Sample:
            status = self._forward(msg)
        else:
            assert isinstance(msg, bytes)
            status = self._write(msg)
        if status < 0:
            self.failed += 1


def env_choice(name: str, allowed: tuple[str, ...]) -> str:
    """$name if set (one of `allowed`), else the first of them."""
    chosen = os.environ.get(name, "") or allowed[0]
    if chosen not in allowed:
        raise UserError(f"${name} is {chosen!r}; allowed: {', '.join(allowed)}")
    return chosen


def take_mode() -> str:
    """Where readers take their samples: `listener` (the default: on Cyclone's receive
    thread, as ddsperf does) or `waitset` (a thread per reader woken from a WaitSet, as
    rclpy's executor and ddsperf's waitset mode do), from $ROBOSCALE_DDS_TAKE."""
    return env_choice(TAKE_ENV, TAKE_MODES)


def message_path() -> str:
    """What takes, checks and forwards each message: `c` (the default: the C part, where
    it was built) or `ctypes` (dds_cdr's Python classes), from $ROBOSCALE_DDS_PATH."""
    return env_choice(PATH_ENV, PATHS)


def qos_policies(qos: Mapping[str, object], queue: int) -> Any:
    """A Cyclone Qos of the trial's settings; `depth` 0 takes the node's queue length,
    and a queue of 0 (unbounded) keeps all."""
    from cyclonedds.core import Policy, Qos
    from cyclonedds.util import duration

    reliable = qos["reliability"] == "reliable"
    reliability = (
        Policy.Reliability.Reliable(duration(seconds=1))
        if reliable
        else Policy.Reliability.BestEffort
    )
    asked = qos.get("depth")
    depth = asked if isinstance(asked, int) and asked else queue
    keep_all = qos["history"] == "keep_all" or depth == 0
    history = Policy.History.KeepAll if keep_all else Policy.History.KeepLast(depth)
    durability = (
        Policy.Durability.TransientLocal
        if qos.get("durability") == "transient_local"
        else Policy.Durability.Volatile
    )
    return Qos(reliability, history, durability)


def trial_qos(node: NodeSetting) -> dict[str, str | int]:
    """The trial's QoS axes that are set, as the session reads them."""
    qos: dict[str, str | int] = {}
    if node.reliability:
        qos["reliability"] = node.reliability
    if node.durability:
        qos["durability"] = node.durability
    if node.history:
        qos["history"], qos["depth"] = split_history(node.history)
    return qos


class DdsSession:
    def __init__(self, ctx: NodeContext) -> None:
        from cyclonedds.domain import Domain, DomainParticipant

        cfg = Fields(ctx.config, "dds config")
        self._domain_id = cfg.whole("domain")
        self._domain: Any = Domain(self._domain_id, cfg.text("xml"))
        self._participant: Any = DomainParticipant(self._domain_id)
        qos = cfg.optional_nested("qos")
        self._qos: dict[str, object] = {**DEFAULT_QOS, **(qos.mapping() if qos else {})}
        self._take_on = cfg.text("take", TAKE_MODES[0])
        self._in_c = cfg.text("path", PATHS[0]) == "c"
        self._topics: dict[str, Topic[Any]] = {}
        self._closed = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pubs: list[DdsPublisher] = []
        self._readers: list[Any] = []
        self._listeners: list[ReaderListener] = []
        self._takers: list[Taking] = []

    @property
    def malformed(self) -> int:
        """Samples dropped by this node's readers: not CDR little endian, or too short."""
        return sum(taking.malformed for taking in self._takers)

    def _topic(self, topic: str, kind: MessageKind) -> Any:
        from cyclonedds.topic import Topic

        from roboscale.backends.dds_types import type_of

        name = ros2_topic(topic)
        if name not in self._topics:
            self._topics[name] = Topic(self._participant, name, type_of(kind))
        return self._topics[name]

    def publisher(self, topic: str, kind: MessageKind, queue: int) -> DdsPublisher:
        from cyclonedds.pub import DataWriter

        writer = DataWriter(
            self._participant, self._topic(topic, kind), qos=qos_policies(self._qos, queue)
        )
        self._pubs.append(DdsPublisher(writer, kind, self._in_c))
        return self._pubs[-1]

    def subscribe(self, topic: str, kind: MessageKind, callback: Callback, queue: int) -> None:
        from cyclonedds.core import InstanceState, SampleState, ViewState
        from cyclonedds.sub import DataReader

        reader = DataReader(
            self._participant, self._topic(topic, kind), qos=qos_policies(self._qos, queue)
        )
        mask = SampleState.Any | ViewState.Any | InstanceState.Any
        taking = taker(reader._ref, mask, TAKE_BATCH, callback, self._in_c)
        self._takers.append(taking)
        if self._take_on == "waitset":
            thread = threading.Thread(target=self._drain, args=(reader, taking), daemon=True)
            self._threads.append(thread)
            thread.start()
            return
        self._readers.append(reader)  # the listener must not outlive its reader's Python object
        self._listeners.append(ReaderListener(reader._ref, taking))

    def _drain(self, reader: Any, taking: Taking) -> None:
        """Take on a thread of the reader's own, woken from a WaitSet (the `waitset` mode)."""
        from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState, WaitSet

        any_state = SampleState.Any | ViewState.Any | InstanceState.Any
        waitset = WaitSet(self._participant)
        waitset.attach(ReadCondition(reader, any_state))
        wait, waitset_ref, timeout_ns = cyclone().waitset_wait, waitset._ref, int(WAKE_S * 1e9)
        while not self._closed.is_set():
            wait(waitset_ref, None, 0, timeout_ns)  # through ctypes: the GIL is let go
            if taking.take() < 0:
                return  # the reader was deleted with the session

    def body_of(self, msg: object, kind: MessageKind) -> bytes:
        """StampedBytes' `data`: its length right after the stamp, then the bytes; of a
        typed kind, its payload part as a CDR message of its own."""
        data: Any = msg
        sample = isinstance(msg, Sample)
        if kind.sensor_or_typed:
            from roboscale.backends.dds_types import payload_offset

            offset = payload_offset(kind)
            part = data.read(offset, len(data) - offset) if sample else data[offset:]
            return CDR_LE + bytes(part)
        start = HEAD + OCTETS_LEN.size
        if sample:
            (size,) = OCTETS_LEN.unpack(data.read(HEAD, OCTETS_LEN.size))
            return bytes(data.read(start, size))
        (size,) = OCTETS_LEN.unpack_from(data, HEAD)
        return bytes(data[start : start + size])

    def close(self) -> None:
        self._closed.set()
        for listener in self._listeners:
            listener.close()
        for thread in self._threads:
            thread.join(WAKE_S * 2)
        self._participant = None
        self._domain = None  # the binding deletes entities when they are collected


def ros2_topic(topic: str) -> str:
    """ROS 2's DDS topic name of a ROS name: `/t0001/chatter` -> `rt/t0001/chatter`."""
    return "rt/" + topic.strip("/")


class DomainInfrastructure:
    """The backend's part of a run: no process, but the domain lease of the current trial."""

    def __init__(self, backend: DdsBackend) -> None:
        self.env: dict[str, str] = {}
        self._backend = backend

    def stop(self) -> None:
        self._backend.release()


class DdsBackend:
    name = "dds"
    placement = "node"
    replay_encoding = "cdr"
    qos = EVERY_SETTING

    def __init__(self) -> None:
        self._addresses: list[str] = ["127.0.0.1"]
        self._trial = ""
        self._lease: DomainLease | None = None

    @property
    def python(self) -> str:
        return current_python()

    def check(self) -> None:
        from importlib.metadata import PackageNotFoundError, version

        take_mode()  # a wrong $ROBOSCALE_DDS_TAKE or _PATH stops here, before anything runs
        message_path()

        try:
            import cyclonedds  # noqa: F401

            found = version("cyclonedds")
        except (ImportError, PackageNotFoundError):
            raise BackendUnavailable(
                "backend 'dds' is not installed: the Python package cyclonedds is missing",
                hint=INSTALL_HINT,
            ) from None
        if found != PINNED:
            raise BackendUnavailable(
                f"backend 'dds' needs cyclonedds {PINNED} (its octet fast path is built on "
                f"that version's serializer), found {found}",
                hint=INSTALL_HINT,
            )

    def version(self) -> str:
        from importlib.metadata import PackageNotFoundError, version

        try:
            found = version("cyclonedds")
        except PackageNotFoundError:
            return "cyclonedds (not installed)"
        from roboscale.backends.dds_cdr import take_path

        chosen = os.environ.get(PATH_ENV, "") or PATHS[0]
        path = take_path() if chosen == "c" else f"per-message path in ctypes (${PATH_ENV})"
        return f"cyclonedds {found} (Eclipse Cyclone DDS), {path}"

    def start_infrastructure(self, workdir: Path, where: Where) -> Infrastructure:
        self._addresses = list(where.addresses)
        return DomainInfrastructure(self)

    def release(self) -> None:
        if self._lease is not None:
            self._lease.release()
            self._lease = None
        self._trial = ""

    def domain_for(self, trial: str) -> int:
        """The domain of a trial: a new lease when a new trial starts (trials run in turn)."""
        if self._lease is None or trial != self._trial:
            self.release()
            self._lease = lease_domain()
            self._trial = trial
        return self._lease.domain

    def node_config(self, role: str, pair: int, node: NodeSetting) -> dict[str, object]:
        own = node.node_address
        local = len(self._addresses) == 1
        participants = node.trial_nodes + 2
        domain = self.domain_for(node.trial)
        xml = cyclone_xml(
            domain,
            "lo" if local else own,
            ["127.0.0.1"] if local else self._addresses,
            min(MAX_PARTICIPANT_INDEX, participants),
        )
        return {
            "domain": domain,
            "xml": xml,
            "qos": trial_qos(node),
            "take": take_mode(),
            "path": message_path(),
        }

    def open(self, ctx: NodeContext) -> DdsSession:
        return DdsSession(ctx)


BACKEND = DdsBackend()
