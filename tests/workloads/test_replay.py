"""Replayed streams: the generated Stata-like sensors, stream files, the schedule, and a
sender that replays over an in-memory loopback session. Nothing here asserts on time."""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rosbags.typesys import Stores, get_typestore
from tests.workloads.test_echo import Loop, config

from roboscale.workloads.echo import Echoer, Sender
from roboscale.workloads.replay import (
    IMAGE_TOPIC,
    SCAN_TOPIC,
    StataStream,
    StreamError,
    StreamTopic,
    pace_stream,
    read_stream_file,
    write_stream_file,
)

ROS1 = get_typestore(Stores.ROS1_NOETIC)


def test_stata_streams_have_the_bags_topics_rates_and_sizes() -> None:
    stream = StataStream()
    assert [t.name for t in stream.topics] == [SCAN_TOPIC, IMAGE_TOPIC]
    assert len(stream) == 60 * 20 + 60 * 30 and stream.span_ns == 60_000_000_000
    assert stream.offsets == sorted(stream.offsets)
    scan = next(i for i in range(len(stream)) if stream.topic_of[i] == 0)
    image = next(i for i in range(len(stream)) if stream.topic_of[i] == 1)
    assert 4200 <= len(stream.body(scan)) <= 4300  # the thesis's ~4.25 KB
    assert 307_200 < len(stream.body(image)) < 308_000  # ~308 KB


def test_generated_scans_vary_smoothly_with_noise_and_images_change() -> None:
    """Real ROS 1 messages (rosbags reads them) whose content changes like sensors'."""
    stream = StataStream()
    scans = [i for i in range(40) if stream.topic_of[i] == 0][:3]
    images = [i for i in range(40) if stream.topic_of[i] == 1][:3]
    msgs = [ROS1.deserialize_ros1(stream.body(i), "sensor_msgs/msg/LaserScan") for i in scans]
    ranges = [np.asarray(m.ranges) for m in msgs]
    assert len(ranges[0]) == 1047 and ranges[0].min() > 0.5
    assert np.abs(np.diff(ranges[0])).max() < 0.2  # neighbouring beams: a smooth wall
    assert 0 < np.abs(ranges[1] - ranges[0]).mean() < 0.2  # a little further on, noisy
    pics = [ROS1.deserialize_ros1(stream.body(i), "sensor_msgs/msg/Image") for i in images]
    assert (pics[0].width, pics[0].height, pics[0].encoding) == (640, 480, "mono8")
    assert len(pics[0].data) == 640 * 480
    assert not np.array_equal(pics[0].data, pics[1].data)
    assert not np.array_equal(pics[1].data, pics[2].data)


def test_generated_streams_in_cdr_are_ros2s_messages() -> None:
    """The same scans and images as ROS 2's CDR (what dds and zenoh carry): rosbags reads
    them and writes the same bytes back, with the ROS 1 stream's content."""
    ros2 = get_typestore(Stores.LATEST)
    cdr, ros1 = StataStream(encoding="cdr"), StataStream(encoding="ros1")
    assert {t.encoding for t in cdr.topics} == {"cdr"}
    for i in range(4):
        msgtype = cdr.topics[cdr.topic_of[i]].msgtype
        body = cdr.body(i)
        msg: Any = ros2.deserialize_cdr(body, msgtype)
        assert bytes(ros2.serialize_cdr(msg, msgtype)) == body
        same: Any = ROS1.deserialize_ros1(ros1.body(i), msgtype)
        assert msg.header.frame_id == same.header.frame_id
        if msgtype.endswith("Image"):
            assert (msg.width, msg.step, msg.encoding) == (640, 640, "mono8")
            assert np.array_equal(msg.data, same.data)
        else:
            assert len(msg.ranges) == len(same.ranges) == 1047
    with pytest.raises(StreamError, match="unknown encoding 'json'"):
        StataStream(encoding="json")


def test_schedule_stops_at_the_end_or_loops() -> None:
    stream = StataStream()
    n = len(stream)
    assert len(list(stream.schedule(n + 5, loop=False))) == n
    looped = list(stream.schedule(n + 2, loop=True))
    assert looped[n] == (stream.span_ns, 0) and looped[n + 1][1] == 1


def test_stream_file_round_trip_and_truncation(tmp_path: Path) -> None:
    topics = [StreamTopic("/a", "std_msgs/msg/String", "cdr"), StreamTopic("/b", "x/msg/Y", "ros1")]
    frames = [(0, 0, b"one"), (5_000_000, 1, b"two" * 100), (9_000_000, 0, b"")]
    path = tmp_path / "s.stream"
    write_stream_file(path, topics, frames)
    stream = read_stream_file(path)
    assert stream.topics == tuple(topics) and stream.offsets == [0, 5_000_000, 9_000_000]
    assert [stream.body(i) for i in range(3)] == [f[2] for f in frames]
    path.write_bytes(path.read_bytes()[:-200])
    with pytest.raises(StreamError, match="bad frame"):
        read_stream_file(path)
    path.write_bytes(b"PK\x03\x04")
    with pytest.raises(StreamError, match="not a roboscale stream"):
        read_stream_file(path)


def test_pace_stream_sends_each_frame_on_its_topic_in_order() -> None:
    stream = StataStream()
    sent: list[tuple[int, int, int]] = []
    total = 12
    t_int, t_sent = array("q", [0] * total), array("q", [0] * total)
    schedule = list(stream.schedule(total, loop=False))
    pace_stream(lambda s, _t, topic, b: sent.append((s, topic, len(b))), schedule, stream,
                1000.0, t_int, t_sent, 0)  # fmt: skip
    assert [s for s, _, _ in sent] == list(range(total))
    assert [topic for _, topic, _ in sent] == stream.topic_of[:total]
    assert list(t_int) == [int(o / 1000.0) for o, _ in schedule]


class BodyLoop(Loop):
    """The loopback session, whose publishers also carry replayed bodies."""

    def publisher(self, topic: str, kind: object, queue: int) -> BodyPublisher:  # type: ignore[override]
        return BodyPublisher(self, topic)


class BodyPublisher:
    def __init__(self, loop: Loop, topic: str) -> None:
        self.loop, self.topic, self.bodies = loop, topic, 0

    def send(self, seq: int, stamp_ns: int) -> None:
        self.forward(seq)

    def send_body(self, seq: int, stamp_ns: int, body: bytes) -> None:
        assert len(body) > 4000
        self.forward(seq)

    def forward(self, msg: object) -> None:
        for cb in self.loop.subs.get(self.topic, []):
            cb(msg, msg)  # type: ignore[arg-type]


def test_echo_replays_the_stata_streams_one_topic_pair_each() -> None:
    loop = BodyLoop()
    topics = (SCAN_TOPIC, IMAGE_TOPIC)
    cfg = config(replay="stata", stream_topics=topics, rate_factor=1000.0)
    Echoer(loop, cfg)  # type: ignore[arg-type]
    sender = Sender(loop, cfg)  # type: ignore[arg-type]
    assert sorted(loop.subs) == sorted([f"out{t}" for t in topics] + [f"back{t}" for t in topics])
    assert sender.wait_for_match()
    sender.run()
    assert sender.counters.received == cfg.total
    assert all(sender.columns()["t_received"])


def test_prepared_scans_are_the_scans_sent() -> None:
    """Scans built ahead (before GO) are returned as they are; images are built on the way."""
    stream = StataStream()
    scans = [i for i in range(20) if stream.topic_of[i] == 0]
    stream.prepare(range(20))
    first = stream.body(scans[0])
    assert stream.body(scans[0]) is first  # built once, before the trial
    msg = ROS1.deserialize_ros1(first, "sensor_msgs/msg/LaserScan")
    assert len(msg.ranges) == 1047
