"""Property-based tests of the bag reader (roboscale.bags): generated bags (ROS 1, rosbag2
in sqlite3 and MCAP) with any timestamps (shared, 1 ns apart, out of order), intact or
damaged, are read to the same messages or refused with a clear one-line error naming the
bag; never a traceback, a hang or a division by zero."""

from __future__ import annotations

import math
import shutil
import tempfile
from collections import Counter
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tests.conftest import require_module

require_module("rosbags", "the data extra")

from rosbags.rosbag1 import Writer as Writer1  # noqa: E402
from rosbags.rosbag2 import StoragePlugin  # noqa: E402
from rosbags.rosbag2 import Writer as Writer2  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402

from roboscale.bags import MIN_GAP_NS, replay_info  # noqa: E402
from roboscale.errors import UserError  # noqa: E402
from roboscale.workloads.replay import read_stream_file  # noqa: E402

ROS1, ROS2 = get_typestore(Stores.ROS1_NOETIC), get_typestore(Stores.LATEST)
INT32 = "std_msgs/msg/Int32"
TOPICS = ["/a", "/b/c", "/robot_1/odom"]
MESSAGES = st.lists(
    st.tuples(
        st.sampled_from(TOPICS),
        st.one_of(st.integers(0, 5), st.integers(0, 10**12)),  # shared, 1 ns apart, spread
        st.integers(-(2**31), 2**31 - 1),
    ),
    min_size=1,
    max_size=30,
)
FORMATS = st.sampled_from(["ros1", "sqlite3", "mcap"])


def write(root: Path, fmt: str, messages: list[tuple[str, int, int]]) -> tuple[Path, list[bytes]]:
    """The bag, and each message's bytes as written."""
    store = ROS1 if fmt == "ros1" else ROS2
    bodies = []
    for _, _, value in messages:
        msg = store.types[INT32](data=value)
        raw = store.serialize_ros1(msg, INT32) if fmt == "ros1" else store.serialize_cdr(msg, INT32)
        bodies.append(bytes(raw))
    start = 1_600_000_000_000_000_000
    if fmt == "ros1":
        path = root / "x.bag"
        with Writer1(path) as w1:
            conns = {t: w1.add_connection(t, INT32, typestore=ROS1) for t in TOPICS}
            for (topic, stamp, _), body in zip(messages, bodies, strict=True):
                w1.write(conns[topic], start + stamp, body)
        return path, bodies
    path = root / "x"
    plugin = StoragePlugin.SQLITE3 if fmt == "sqlite3" else StoragePlugin.MCAP
    with Writer2(path, version=9, storage_plugin=plugin) as w2:
        conns2 = {t: w2.add_connection(t, INT32, typestore=ROS2) for t in TOPICS}
        for (topic, stamp, _), body in zip(messages, bodies, strict=True):
            w2.write(conns2[topic], start + stamp, body)
    return path, bodies


def storage_file(bag: Path) -> Path:
    return bag if bag.is_file() else next(p for p in bag.iterdir() if p.suffix in (".db3", ".mcap"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FORMATS, MESSAGES)
def test_a_bag_is_read_to_the_same_messages(fmt: str, messages: list[tuple[str, int, int]]) -> None:
    root = Path(tempfile.mkdtemp(prefix="bagfuzz-"))
    try:
        bag, bodies = write(root, fmt, messages)
        info = replay_info(str(bag))
        assert info.messages == len(messages)
        assert math.isfinite(info.rate_hz) and 0 < info.rate_hz <= max(1e9 / MIN_GAP_NS, 1e3)
        used = sorted(TOPICS)  # every recorded topic, those without messages too
        assert [t.name for t in info.topics] == used
        counts = Counter(t for t, _, _ in messages)
        assert list(info.topic_messages) == [counts[t] for t in used]
        stream = read_stream_file(Path(info.source))
        got = Counter((used[stream.topic_of[i]], stream.body(i)) for i in range(len(stream)))
        assert got == Counter((t, b) for (t, _, _), b in zip(messages, bodies, strict=True))
        assert stream.offsets == sorted(stream.offsets) and stream.offsets[0] == 0
    finally:
        shutil.rmtree(root)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FORMATS, MESSAGES, st.data())
def test_a_damaged_bag_is_refused_cleanly_or_read(
    fmt: str, messages: list[tuple[str, int, int]], data: st.DataObject
) -> None:
    root = Path(tempfile.mkdtemp(prefix="bagfuzz-"))
    try:
        bag, _ = write(root, fmt, messages)
        file = storage_file(bag)
        raw = bytearray(file.read_bytes())
        how = data.draw(st.sampled_from(["truncate", "flip", "zero"]))
        at = data.draw(st.integers(0, len(raw) - 1))
        if how == "truncate":
            del raw[at:]
        elif how == "flip":
            raw[at] ^= 1 << data.draw(st.integers(0, 7))
        else:
            raw[at : at + data.draw(st.integers(1, 64))] = bytes(min(64, len(raw) - at))[
                : len(raw[at : at + 64])
            ]
        file.write_bytes(bytes(raw))
        try:
            info = replay_info(str(bag))
        except UserError as e:
            event("refused")
            assert str(bag) in str(e) or str(file) in str(e)
            assert "\n" not in str(e).split("\n  hint:")[0], str(e)
            return
        event("read")
        assert info.messages > 0 and math.isfinite(info.rate_hz) and info.rate_hz > 0
    finally:
        shutil.rmtree(root)
