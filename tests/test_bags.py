"""Bags as replay sources: small bags of each format built with rosbags at test time,
turned into stream files and read back; bad bags are clear errors naming the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from rosbags.rosbag1 import Writer as Writer1
from rosbags.rosbag2 import StoragePlugin
from rosbags.rosbag2 import Writer as Writer2
from rosbags.typesys import Stores, get_typestore

from roboscale.bags import replay_info
from roboscale.errors import UserError
from roboscale.workloads.replay import read_stream_file

ROS1 = get_typestore(Stores.ROS1_NOETIC)
ROS2 = get_typestore(Stores.LATEST)
START = 1_700_000_000_000_000_000
# /chatter at 10 Hz and /count at 4 Hz for one second: (topic, type, time, value)
MESSAGES = sorted(
    [("/chatter", "std_msgs/msg/String", START + k * 100_000_000, f"hello {k}") for k in range(10)]
    + [("/count", "std_msgs/msg/Int32", START + k * 250_000_000, k) for k in range(4)],
    key=lambda m: (m[2], m[0]),
)


def _message(store: object, msgtype: str, value: object) -> object:
    cls = store.types[msgtype]  # type: ignore[attr-defined]
    return cls(data=value)


def write_bag(path: Path, fmt: str) -> Path:
    """A bag of MESSAGES: `ros1` (.bag), `sqlite3` or `mcap` (rosbag2 folders)."""
    if fmt == "ros1":
        with Writer1(path) as w1:
            conns = {t: w1.add_connection(t, ty, typestore=ROS1) for t, ty in _topics()}
            for topic, msgtype, stamp, value in MESSAGES:
                raw = ROS1.serialize_ros1(_message(ROS1, msgtype, value), msgtype)
                w1.write(conns[topic], stamp, raw)
        return path
    plugin = StoragePlugin.SQLITE3 if fmt == "sqlite3" else StoragePlugin.MCAP
    with Writer2(path, version=9, storage_plugin=plugin) as w2:
        conns = {t: w2.add_connection(t, ty, typestore=ROS2) for t, ty in _topics()}
        for topic, msgtype, stamp, value in MESSAGES:
            w2.write(
                conns[topic], stamp, ROS2.serialize_cdr(_message(ROS2, msgtype, value), msgtype)
            )
    return path


def _topics() -> list[tuple[str, str]]:
    return sorted({(m[0], m[1]) for m in MESSAGES})


@pytest.mark.parametrize(("fmt", "name"), [("ros1", "x.bag"), ("sqlite3", "x2"), ("mcap", "x3")])
def test_bag_round_trip(tmp_path: Path, fmt: str, name: str) -> None:
    """Topics, types, bytes and recorded timing survive: bag -> stream file -> frames."""
    bag = write_bag(tmp_path / name, fmt)
    info = replay_info(str(bag))
    assert [t.name for t in info.topics] == ["/chatter", "/count"]
    assert [t.msgtype for t in info.topics] == ["std_msgs/msg/String", "std_msgs/msg/Int32"]
    assert {t.encoding for t in info.topics} == {"ros1" if fmt == "ros1" else "cdr"}
    stream = read_stream_file(Path(info.source))
    assert stream.offsets == [m[2] - START for m in MESSAGES]
    assert [stream.topics[i].name for i in stream.topic_of] == [m[0] for m in MESSAGES]
    decode = ROS1.deserialize_ros1 if fmt == "ros1" else ROS2.deserialize_cdr
    values = [decode(stream.body(i), m[1]).data for i, m in enumerate(MESSAGES)]  # type: ignore[attr-defined]
    assert values == [m[3] for m in MESSAGES]
    assert info.messages == 14 and info.label == bag.stem


def test_a_db3_or_mcap_file_stands_for_its_rosbag2_folder(tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "x", "mcap")
    inner = next(bag.glob("*.mcap"))
    assert replay_info(str(inner)).messages == 14


def test_truncated_bags_are_refused_naming_the_file(tmp_path: Path) -> None:
    bag = write_bag(tmp_path / "t.bag", "ros1")
    bag.write_bytes(bag.read_bytes()[:300])
    with pytest.raises(UserError, match=r"t\.bag: cannot read the bag"):
        replay_info(str(bag))
    folder = write_bag(tmp_path / "t2", "mcap")
    mcap = next(folder.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[:400])
    with pytest.raises(UserError, match=r"t2: cannot read the bag"):
        replay_info(str(folder))


def test_unknown_formats_are_refused(tmp_path: Path) -> None:
    other = tmp_path / "data.csv"
    other.write_text("a,b\n")
    with pytest.raises(UserError, match=r"data\.csv: unknown bag format '\.csv'"):
        replay_info(str(other))
    with pytest.raises(UserError, match=r"without metadata\.yaml is not a rosbag2"):
        replay_info(str(tmp_path))
    with pytest.raises(UserError, match="no such bag"):
        replay_info(str(tmp_path / "missing.bag"))
    fake = tmp_path / "fake.bag"
    fake.write_bytes(b"#ROSBAG V1.2\n" + b"\xff" * 64)
    with pytest.raises(UserError, match=r"fake\.bag: cannot read the bag"):
        replay_info(str(fake))


def test_a_type_without_definition_is_refused(tmp_path: Path) -> None:
    bag = tmp_path / "u.bag"
    with Writer1(bag) as w:
        conn = w.add_connection(
            "/x", "my_pkg/msg/Foo", msgdef="my_pkg/Missing m\n", md5sum="0" * 32
        )
        w.write(conn, START, b"\0\0\0\0")
    with pytest.raises(UserError, match=r"u\.bag: no topic of the bag can be replayed"):
        replay_info(str(bag))


E5 = Path(__file__).parents[1] / "experiments" / "thesis-e5.yaml"


def e5_with(tmp_path: Path, replay: str) -> Path:
    spec = tmp_path / "e5.yaml"
    spec.write_text(E5.read_text().replace("replay: stata", f"replay: {replay}"))
    return spec


def test_thesis_e5_replays_a_bag_built_here(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped spec with `replay: my.bag` (relative to the spec), quick, on native:
    every replayed message comes back, looping over the bag's 14 messages."""
    from roboscale.cli import main
    from roboscale.results import load

    write_bag(tmp_path / "my.bag", "ros1")
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as done:
        main(["bench", str(e5_with(tmp_path, "my.bag")), "--quick", "--backend", "native",
              "--out", str(out)])  # fmt: skip
    assert done.value.code in (0, None), capsys.readouterr().err
    entries = [e.to_dict() for e in load(out).entries]
    assert [e["payload"] for e in entries] == ["my", "my"]
    assert [e["received"] for e in entries] == [150, 150]
    assert [e["rate_factor"] for e in entries] == pytest.approx([1.0, 2.0])
    assert [e["stream_topics"] for e in entries] == [["/chatter", "/count"]] * 2


def test_a_bad_bag_in_a_spec_exits_2_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from roboscale.cli import main

    bag = write_bag(tmp_path / "my.bag", "ros1")
    bag.write_bytes(bag.read_bytes()[:200])
    with pytest.raises(SystemExit) as done:
        main(["bench", str(e5_with(tmp_path, "my.bag")), "--quick", "--backend", "native"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "Traceback" not in err
    assert f"e5.yaml:18: replay: {bag}: cannot read the bag" in err


@pytest.mark.parametrize(
    ("source", "backend"),
    [
        ("stata", "native"),
        ("bag.mcap", "native"),
        pytest.param("bag.mcap", "ros1", marks=pytest.mark.ros1),
        pytest.param("stata", "dds", marks=pytest.mark.dds),
    ],
)
def test_record_writes_an_mcap_that_the_mcap_reader_reads_back(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    request: pytest.FixtureRequest,
    source: str,
    backend: str,
) -> None:
    """`--record`: every message an echoer received, with its receive time and its type's
    schema in the serialization the backend carried (native: as recorded, ROS 1 for the
    generated streams and ROS 2 CDR for a rosbag2; ros1: ROS 1, the rosbag2 converted;
    dds: CDR), readable by mcap and decodable by rosbags from the recorded schema alone."""
    from mcap.reader import make_reader
    from tests.backends.test_trials import require_backend

    from roboscale.cli import main

    require_backend(request, backend)
    ros1_expected = backend == "ros1" or (backend == "native" and source == "stata")

    if source != "stata":
        write_bag(tmp_path / "bag", "mcap")
        source = "bag/" + next((tmp_path / "bag").glob("*.mcap")).name
    record = tmp_path / "trial.mcap"
    argv = ["bench", str(e5_with(tmp_path, source)), "--quick", "--backend", backend,
            "--out", str(tmp_path / "out"), "--record", str(record)]  # fmt: skip
    with pytest.raises(SystemExit) as done:
        main(argv)
    out = capsys.readouterr().out
    assert done.value.code in (0, None) and "recorded:" in out and "(320 messages)" in out
    with record.open("rb") as f:
        reader = make_reader(f)
        rows = list(reader.iter_messages(log_time_order=True))
        profile = reader.get_header().profile
    assert len(rows) == 320  # 2 trials of 10 warm-up + 150 messages
    times = [m.log_time for _, _, m in rows]
    assert times == sorted(times) and times[0] > 1_600_000_000 * 10**9  # wall clock, ns
    for schema, channel, message in rows[:3]:  # decoded with the recorded schema alone
        store = _store_of(schema.name, schema.data.decode())
        ros1 = schema.encoding == "ros1msg"
        decode = store.deserialize_ros1 if ros1 else store.deserialize_cdr
        msg = decode(message.data, _ros2(schema.name))
        assert channel.message_encoding == ("ros1" if ros1 else "cdr")
        assert profile == ("ros1" if ros1 else "ros2") and ros1 == ros1_expected
        if schema.name.endswith("LaserScan"):
            assert len(msg.ranges) == 1047  # type: ignore[attr-defined]
        elif schema.name.endswith("Image"):
            assert (msg.width, msg.height) == (640, 480)  # type: ignore[attr-defined]
        else:
            assert str(msg.data).startswith("hello") or isinstance(msg.data, int)  # type: ignore[attr-defined]
    names = {c.topic.rsplit("/", 1)[-1] for _, c, _ in rows}
    assert names == ({"base_scan", "image_raw"} if source == "stata" else {"chatter", "count"})


def _ros2(name: str) -> str:
    return name if "/msg/" in name else name.replace("/", "/msg/")


def _store_of(name: str, text: str) -> Any:
    """A type store of a recorded schema: the type, then each `MSG: pkg/Type` it uses."""
    from rosbags.typesys import get_types_from_msg

    store = get_typestore(Stores.EMPTY)
    parts = text.split("=" * 80 + "\n")
    types = get_types_from_msg(parts[0], _ros2(name))
    for part in parts[1:]:
        head, body = part.split("\n", 1)
        types.update(get_types_from_msg(body, _ros2(head.removeprefix("MSG: ").strip())))
    store.register(types)
    return store


def test_record_needs_a_replay(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from roboscale.cli import main

    spec = tmp_path / "s.yaml"
    spec.write_text("name: x\nsweep:\n  backend: native\n  rate_hz: 10\n")
    with pytest.raises(SystemExit) as done:
        main(["bench", str(spec), "--record", str(tmp_path / "x.mcap")])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "--record records a replayed stream" in err


# A sensor bag: a LaserScan at 20 Hz (4-byte fields), an Odometry at 10 Hz (float64: its
# CDR is 8-aligned) and a String at 5 Hz, for half a second, with values that change.
SENSOR_TOPICS = [
    ("/chatter", "std_msgs/msg/String"),
    ("/odom", "nav_msgs/msg/Odometry"),
    ("/scan", "sensor_msgs/msg/LaserScan"),
]


def sensor_message(store: Any, msgtype: str, k: int) -> Any:
    """Message k of a topic of SENSOR_TOPICS, in `store` (ROS 1 or ROS 2)."""
    import numpy as np

    t = store.types
    ros1 = "seq" in dict(store.fielddefs["std_msgs/msg/Header"][1])
    stamp = t["builtin_interfaces/msg/Time"](sec=100 + k, nanosec=1000 * k)
    extra = {"seq": 3 + k} if ros1 else {}
    header = t["std_msgs/msg/Header"](**extra, stamp=stamp, frame_id=f"f{k}")
    if msgtype == "std_msgs/msg/String":
        return t[msgtype](data=f"hello {k}")
    if msgtype == "sensor_msgs/msg/LaserScan":
        ranges = np.linspace(1.0, 2.0, 360, dtype=np.float32) + k
        return t[msgtype](header, -1.5, 1.5, 3 / 360, 0.0, 0.05, 0.1, 30.0, ranges,
                          np.zeros(0, dtype=np.float32))  # fmt: skip
    g = "geometry_msgs/msg/"
    pose = t[g + "Pose"](t[g + "Point"](1.5 + k, -2.25, 0.125), t[g + "Quaternion"](0, 0, 0, 1))
    twist = t[g + "Twist"](t[g + "Vector3"](0.5, 0, 0), t[g + "Vector3"](0, 0, 0.1 * k))
    covariance = np.arange(36, dtype=np.float64) * k
    return t[msgtype](header, "base", t[g + "PoseWithCovariance"](pose, covariance),
                      t[g + "TwistWithCovariance"](twist, covariance))  # fmt: skip


def sensor_messages() -> list[tuple[int, str, str, int]]:
    """(time, topic, type, k) of the sensor bag, in time order."""
    rates = {"/chatter": 5, "/odom": 10, "/scan": 20}
    rows = [
        (START + k * 1_000_000_000 // rates[topic], topic, msgtype, k)
        for topic, msgtype in SENSOR_TOPICS
        for k in range(rates[topic] // 2)
    ]
    return sorted(rows)


def write_sensor_bag(path: Path, fmt: str) -> Path:
    """The sensor bag: `ros1` (.bag) or `mcap` (a rosbag2 folder)."""
    store = ROS1 if fmt == "ros1" else ROS2
    writer: Any = (
        Writer1(path)
        if fmt == "ros1"
        else Writer2(path, version=9, storage_plugin=StoragePlugin.MCAP)
    )
    serialize = store.serialize_ros1 if fmt == "ros1" else store.serialize_cdr
    with writer as w:
        conns = {t: w.add_connection(t, ty, typestore=store) for t, ty in SENSOR_TOPICS}
        for stamp, topic, msgtype, k in sensor_messages():
            raw = serialize(sensor_message(store, msgtype, k), msgtype)
            w.write(conns[topic], stamp, bytes(raw))
    return path


@pytest.mark.parametrize("fmt", ["ros1", "mcap"])
def test_a_bag_converts_once_to_the_other_serialization(tmp_path: Path, fmt: str) -> None:
    """The stream of a bag in each serialization: the recorded bytes as they are in their
    own, the same messages in the other (ROS 1's header `seq` dropped, or 0), with the
    definitions of that ROS version."""
    from roboscale.bags import replay_stream

    bag = str(write_sensor_bag(tmp_path / ("s.bag" if fmt == "ros1" else "s"), fmt))
    recorded = "ros1" if fmt == "ros1" else "cdr"
    assert replay_stream(bag, "")[0] == replay_stream(bag, recorded)[0] == replay_info(bag).source
    rows = sensor_messages()
    for encoding, store in (("ros1", ROS1), ("cdr", ROS2)):
        path, topics = replay_stream(bag, encoding)
        stream = read_stream_file(Path(path))
        assert stream.topics == topics and {t.encoding for t in topics} == {encoding}
        assert ("uint32 seq" in topics[1].definition) == (encoding == "ros1")
        decode = store.deserialize_ros1 if encoding == "ros1" else store.deserialize_cdr
        for i, (_, _, msgtype, k) in enumerate(rows):
            msg: Any = decode(stream.body(i), msgtype)
            if msgtype == "std_msgs/msg/String":
                assert msg.data == f"hello {k}"
                continue
            assert (msg.header.stamp.sec, msg.header.frame_id) == (100 + k, f"f{k}")
            if encoding == "ros1":
                assert msg.header.seq == (3 + k if fmt == "ros1" else 0)
            if msgtype == "nav_msgs/msg/Odometry":
                assert msg.pose.pose.position.x == 1.5 + k and msg.pose.covariance[35] == 35 * k
            else:
                assert len(msg.ranges) == 360 and msg.ranges[0] == pytest.approx(1.0 + k)


def test_replayed_topics_carry_their_recorded_types(tmp_path: Path) -> None:
    """Each topic's kind: its type, ROS 1 definition (sensor_msgs' own md5 on ros1), ROS 2
    fields and its first message in both serializations."""
    import base64
    import json

    from roboscale.bags import replay_kinds
    from roboscale.msgtypes import normalize

    bag = str(write_sensor_bag(tmp_path / "s.bag", "ros1"))
    kinds = replay_kinds(bag)
    assert [k.typed.msgtype for k in kinds if k.typed] == [t for _, t in SENSOR_TOPICS]
    scan = kinds[2].typed
    assert scan is not None and scan.ros1_definition.startswith("std_msgs/Header header\n")
    assert "sensor_msgs/msg/LaserScan" in json.loads(scan.ros2_fields)
    first = ROS2.deserialize_cdr(base64.b64decode(scan.cdr_sample), scan.msgtype)
    assert first.ranges[0] == pytest.approx(1.0)  # type: ignore[attr-defined]
    assert normalize("sensor_msgs/LaserScan") == scan.msgtype
    assert [k.kind for k in replay_kinds("stata")] == ["laserscan", "image"]
