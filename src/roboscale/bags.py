"""What a replaying sender sends, prepared in the lab: the generated Stata-like streams, or
a bag (ROS 1, rosbag2 in sqlite3 or MCAP) read with rosbags' readers and turned into a
stream file (`workloads/replay.py`) that a stdlib agent reads.

Nothing from a bag is unpickled or imported, and no definition becomes code: the bag
is read by `roboscale.bagread` (regular files, definitions parsed one connection at a
time and proven data, topics that cannot be replayed skipped with one line, the first
message of every topic deserialized), so a bag that is truncated, of an unknown format,
or holds a definition that is not data is refused (a UserError naming the file) before
any trial runs. A recording faster than 1e9 / MIN_GAP_NS messages/s on average is a
burst, sent back to back. Agents get serialized bytes, never rosbags objects. The
`data` extra has rosbags.

A replayed topic travels as its recorded type on the backends that carry types
(`replay_kinds`: the type's ROS 1 definition, its ROS 2 fields and its first message),
in the serialization the trial's backend carries (`Backend.replay_encoding`): a bag is
converted once here, before any trial, when its recorded serialization is not that one
(ROS 1 <-> CDR with rosbags, as `rosbags-convert` does: the ROS 1 header's `seq` is
dropped for ROS 2, and is 0 the other way). Senders then send the bytes as they are,
as `rosbag play` does.
"""

from __future__ import annotations

import atexit
import base64
import functools
import json
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roboscale.backends.base import MessageKind, TypedPayload
from roboscale.bagread import BagTypes, read_bag
from roboscale.errors import UserError
from roboscale.safewrite import open_stream
from roboscale.workloads.replay import (
    STATA,
    FileStream,
    StataStream,
    Stream,
    StreamTopic,
    read_stream_file,
    stata_topics,
    write_stream_file,
)

MIN_GAP_NS = 10_000  # a recording faster than 100,000 messages/s on average is a burst
INSTALL_HINT = "pip install 'roboscale[data]' (rosbags and mcap)"


@dataclass(frozen=True)
class ReplayInfo:
    """A replay source as the planner needs it."""

    source: str  # what the agents open: `stata` or a stream file
    label: str  # the trial's payload name
    topics: tuple[StreamTopic, ...]
    messages: int  # in one pass
    mean_bytes: int
    rate_hz: float  # messages per second of recorded time, all topics together
    topic_messages: tuple[int, ...] = ()  # per topic (as `topics`), in one pass
    topic_bytes: tuple[int, ...] = ()  # per topic, its messages' mean size
    # Recorded faster than MIN_GAP_NS apart on average: sent back to back whatever the
    # rate_factor, its trial named `burst`; `rate_hz` is then a bound, not a rate.
    burst: bool = False

    def topic_rate_hz(self, topic: int) -> float:
        """One topic's messages per second of recorded time."""
        return self.topic_messages[topic] * self.rate_hz / self.messages


def info_of(stream: Stream, source: str, label: str, sizes: list[int]) -> ReplayInfo:
    counts = [0] * len(stream.topics)
    totals = [0] * len(stream.topics)
    for topic, size in zip(stream.topic_of, sizes, strict=True):
        counts[topic] += 1
        totals[topic] += size
    return ReplayInfo(
        source=source,
        label=label,
        topics=stream.topics,
        messages=len(stream),
        mean_bytes=max(1, round(sum(sizes) / len(sizes))),
        rate_hz=len(stream) * 1e9 / max(stream.span_ns, len(stream) * MIN_GAP_NS),
        burst=stream.span_ns < len(stream) * MIN_GAP_NS,
        topic_messages=tuple(counts),
        topic_bytes=tuple(
            max(1, round(t / c)) if c else 1 for t, c in zip(totals, counts, strict=True)
        ),
    )


def replay_info(source: str, chosen: tuple[str, ...] = ()) -> ReplayInfo:
    """`stata`, or the path of a bag (converted once per process), of its `chosen` topics
    only when some are (the spec's `replay_topics`)."""
    return _replay_info(source, chosen)  # one cache entry, however the call names them


@functools.cache
def _replay_info(source: str, chosen: tuple[str, ...]) -> ReplayInfo:
    if source == STATA:
        stream = StataStream()
        first = {stream.topic_of[i]: len(stream.body(i)) for i in range(4)}
        return info_of(stream, STATA, STATA, [first[t] for t in stream.topic_of])
    return _bag_info(Path(source), chosen)


def _bag_info(path: Path, chosen: tuple[str, ...]) -> ReplayInfo:
    try:
        import rosbags  # noqa: F401
    except ImportError:
        raise UserError("replaying a bag needs rosbags", hint=INSTALL_HINT) from None
    frames, topics, stores = read_bag(path, chosen)
    if not frames:
        raise UserError(f"{path}: the bag has no messages on a topic it can replay")
    out = _new_stream_file()
    write_stream_file(out, list(topics), frames)
    _STORES[str(out)] = stores
    stream = FileStream(topics, frames)
    info = info_of(stream, str(out), path.stem, [len(f[2]) for f in frames])
    if info.burst:
        print(f"roboscale: {path}: {len(stream)} messages recorded within "
              f"{stream.offsets[-1]} ns: a burst, sent back to back in one trial named "
              "burst (rate_factor does not apply; no rate is claimed)",
              file=sys.stderr)  # fmt: skip
    return info


def _new_stream_file() -> Path:
    return stream_dir() / f"{len(list(stream_dir().iterdir()))}.stream"


_STORES: dict[str, BagTypes] = {}  # per stream file of a bag, filled as it is read


@functools.cache
def stream_dir() -> Path:
    """This process's own folder (mode 0700) for stream files, removed at exit."""
    path = Path(tempfile.mkdtemp(prefix="roboscale-streams-"))
    atexit.register(shutil.rmtree, path, True)
    return path


def replay_stream(
    source: str, encoding: str = "", chosen: tuple[str, ...] = ()
) -> tuple[str, tuple[StreamTopic, ...]]:
    """What agents open to replay `source` (its `chosen` topics, when some are) in
    `encoding` (`ros1`, `cdr`; "": as recorded), and its topics with their definitions in
    that encoding. A bag recorded in the other serialization is converted here, once per
    process: never during a trial."""
    return _replay_stream(source, encoding, chosen)


@functools.cache
def _replay_stream(
    source: str, encoding: str, chosen: tuple[str, ...]
) -> tuple[str, tuple[StreamTopic, ...]]:
    info = replay_info(source, chosen)
    recorded = info.topics[0].encoding
    if source == STATA:
        return STATA, stata_topics(encoding or recorded)
    if encoding in ("", recorded) and not _big_endian(info.source):
        return info.source, info.topics
    types = _STORES[info.source]
    stream = read_stream_file(Path(info.source))
    frames = [
        (offset, k, _convert(types, stream.topics[k], stream.body(i), encoding))
        for i, (offset, k) in enumerate(zip(stream.offsets, stream.topic_of, strict=True))
    ]
    topics = tuple(_topic_in(types, t, encoding) for t in stream.topics)
    out = _new_stream_file()
    write_stream_file(out, list(topics), frames)
    return str(out), topics


def _big_endian(stream_file: str) -> bool:
    """Whether a rosbag2 holds CDR in big endian (byte 1 of the encapsulation header 0),
    which ROS 2 on a little-endian machine never sends: converted to little endian."""
    stream = read_stream_file(Path(stream_file))
    cdr = stream.topics[0].encoding == "cdr"
    return cdr and any(stream.body(i)[1:2] == b"\0" for i in range(len(stream)))


def _convert(types: BagTypes, topic: StreamTopic, body: bytes, encoding: str) -> bytes:
    store, name = types.ros2, topic.msgtype
    if encoding == topic.encoding:  # big-endian CDR, to little endian
        return bytes(store.serialize_cdr(store.deserialize_cdr(body, name), name))
    if encoding == "cdr":
        return bytes(store.ros1_to_cdr(body, name))
    return bytes(store.cdr_to_ros1(body, name))


def _topic_in(types: BagTypes, topic: StreamTopic, encoding: str) -> StreamTopic:
    ros1 = encoding == "ros1"
    store = types.ros1 if ros1 else types.ros2
    definition = store.generate_msgdef(topic.msgtype, ros_version=1 if ros1 else 2)[0]
    return StreamTopic(topic.name, topic.msgtype, encoding, definition)


def replay_kinds(source: str, chosen: tuple[str, ...] = ()) -> tuple[MessageKind, ...]:
    """Each topic's message kind: the Stata streams' sensor_msgs LaserScan and Image (the
    backends' own `laserscan` and `image`), a bag's topics (its `chosen` ones, when some
    are) as their recorded types (a `custom` kind: the type's definitions and first
    message, both serializations)."""
    return _replay_kinds(source, chosen)


@functools.cache
def _replay_kinds(source: str, chosen: tuple[str, ...]) -> tuple[MessageKind, ...]:
    info = replay_info(source, chosen)
    topics = info.topics
    if source == STATA:
        names = ("laserscan", "image")
        return tuple(MessageKind(n, s) for n, s in zip(names, info.topic_bytes, strict=True))
    from roboscale.msgtypes import ros1_text, ros2_fields

    types = _STORES[info.source]
    stream = read_stream_file(Path(info.source))
    recorded = [stream.body(stream.topic_of.index(k)) for k in range(len(topics))]
    firsts = {  # each topic's first message, in each serialization (converted alone)
        encoding: [
            _convert(types, topic, body, encoding) if encoding != topic.encoding else body
            for topic, body in zip(topics, recorded, strict=True)
        ]
        for encoding in ("ros1", "cdr")
    }
    return tuple(
        MessageKind(
            "custom",
            size,
            TypedPayload(
                msgtype=topic.msgtype,
                ros1_definition=ros1_text(types.ros1, topic.msgtype),
                ros1_sample=base64.b64encode(firsts["ros1"][k]).decode(),
                cdr_sample=base64.b64encode(firsts["cdr"][k]).decode(),
                ros2_fields=json.dumps(ros2_fields(types.ros2, topic.msgtype)),
            ),
        )
        for k, (topic, size) in enumerate(zip(topics, info.topic_bytes, strict=True))
    )


def write_mcap(path: Path, captures: list[Path], source: str, chosen: tuple[str, ...] = ()) -> int:
    """What the echoers received (their capture files: `workloads/echo.Echoer.finish`) as
    one MCAP file, each message stamped with its receive time, under the topic it arrived
    on, with the replayed type's schema in the serialization the echoer received
    (`Echoer.finish` notes it; that of the trial's backend): ROS 1 (`ros1msg`/`ros1`) or
    ROS 2 (`ros2msg`/`cdr`), as Foxglove and `ros2 bag` read them. Returns the number of
    messages."""
    from mcap.writer import Writer

    frames: list[tuple[int, str, StreamTopic, bytes]] = []
    for capture in sorted(captures):
        stream = read_stream_file(capture)
        topics = replay_stream(source, stream.topics[0].encoding, chosen)[1]
        for i, offset in enumerate(stream.offsets):
            k = stream.topic_of[i]
            frames.append((offset, stream.topics[k].name, topics[k], stream.body(i)))
    frames.sort(key=lambda f: f[0])
    ros1 = all(f[2].encoding == "ros1" for f in frames)
    with os.fdopen(open_stream(path), "wb") as f:  # never through a link at `path`
        writer: Any = Writer(f)
        writer.start(profile="ros1" if ros1 else "ros2", library="roboscale")
        schemas: dict[tuple[str, str], int] = {}
        channels: dict[str, int] = {}
        for stamp, name, topic, body in frames:
            if name not in channels:
                key = (topic.msgtype, topic.encoding)
                if key not in schemas:
                    schemas[key] = _schema(writer, topic)
                encoding = "ros1" if topic.encoding == "ros1" else "cdr"
                channels[name] = writer.register_channel(name, encoding, schemas[key])
            writer.add_message(channels[name], log_time=stamp, data=body, publish_time=stamp)
        writer.finish()
    return len(frames)


def _schema(writer: Any, topic: StreamTopic) -> int:
    """A topic's schema: its definition as the bag held it, or rosbags' (the generated
    Stata streams are ROS 1 sensor_msgs)."""
    from rosbags.typesys import Stores, get_typestore

    ros1 = topic.encoding == "ros1"
    definition = topic.definition
    if not definition:
        store = get_typestore(Stores.ROS1_NOETIC if ros1 else Stores.LATEST)
        definition = store.generate_msgdef(topic.msgtype, ros_version=1 if ros1 else 2)[0]
    name = topic.msgtype.replace("/msg/", "/") if ros1 else topic.msgtype
    encoding = "ros1msg" if ros1 else "ros2msg"
    return int(writer.register_schema(name, encoding, definition.encode()))
