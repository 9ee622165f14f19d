"""Short real trials on each backend: real roscore/rospy and real Zenoh on loopback."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from tests.conftest import REPO

from roboscale.backends.base import get_backend
from roboscale.lab.envs import Placement
from roboscale.spec.planner import TrialPlan

RunTrial = Callable[[TrialPlan], Any]  # the run_trial fixture of tests/conftest.py


def trial(backend: str, payload: str, size: int, pairs: int, mode: str = "standard") -> TrialPlan:
    return TrialPlan(
        index=7,
        trial=f"t0007-{backend}",
        backend=backend,
        rate_hz=200.0,
        payload=payload,
        payload_bytes=size,
        pairs=pairs,
        run=0,
        messages=200,
        warmup=10 if mode == "standard" else 0,
        drain_s=2.0,
        pause_s=0.0,
        publisher_queue=1000,
        subscriber_queue=0,
        mode=mode,
        match_timeout_s=20.0,
        seed=0,
    )


def run(
    run_trial: RunTrial, t: TrialPlan
) -> tuple[list[dict[str, list[int | None]]], list[dict[str, object]]]:
    tables, nodes = run_trial(t)
    return [tb.to_pydict() for tb in tables], nodes


def check_complete(rows: dict[str, list[int | None]], n: int) -> None:
    assert rows["seq"] == list(range(n))
    sent = np.array(rows["t_sent"], dtype=np.int64)
    echoed = np.array(rows["t_echoed"], dtype=np.float64)
    received = np.array(rows["t_received"], dtype=np.float64)
    assert np.all(sent >= np.array(rows["t_intended"]))
    # Every message came back, and times are causal: sent < echoed < received.
    assert not np.isnan(received).any()
    assert np.all(sent < echoed) and np.all(echoed < received)


@pytest.mark.zenoh
@pytest.mark.parametrize(("payload", "size"), [("text", 11), ("image", 307200)])
def test_zenoh_echo(run_trial: RunTrial, zenoh: None, payload: str, size: int) -> None:
    tables, nodes = run(run_trial, trial("zenoh", payload, size, pairs=2))
    assert len(tables) == 2
    for rows in tables:
        check_complete(rows, 200)
    assert all(n["usage"]["max_rss_kb"] > 0 for n in nodes)  # type: ignore[index]


@pytest.mark.ros1
@pytest.mark.parametrize(("payload", "size"), [("text", 11), ("laserscan", 4250), ("4KB", 4096)])
def test_ros1_echo(run_trial: RunTrial, ros1: None, payload: str, size: int) -> None:
    tables, _ = run(run_trial, trial("ros1", payload, size, pairs=2))
    for rows in tables:
        check_complete(rows, 200)


CUSTOM = [("robot_msgs/msg/WheelState@4KB", 4096), ("legacy_msgs/msg/Odometry2D", 153)]


def custom_trial(backend: str, payload: str, size: int) -> TrialPlan:
    """A type of examples/msgs (roboscale/msgtypes.py) as the payload."""
    from dataclasses import replace

    pytest.importorskip("rosbags")  # the data extra, which make test installs
    msgs = str(REPO / "examples" / "msgs")
    return replace(trial(backend, payload, size, pairs=1), message_types=(msgs,))


def require_backend(request: pytest.FixtureRequest, backend: str) -> None:
    """The backend's middleware is installed (a skip outside CI, a failure in it)."""
    fixture = {"ros1": "ros1", "zenoh": "zenoh", "native-proc": "zenoh", "dds": "dds"}
    if backend in fixture:
        request.getfixturevalue(fixture[backend])


EVERY_BACKEND = [
    pytest.param("ros1", marks=pytest.mark.ros1),
    pytest.param("zenoh", marks=pytest.mark.zenoh),
    "native",
    pytest.param("native-proc", marks=pytest.mark.zenoh),
    pytest.param("dds", marks=pytest.mark.dds),
]


@pytest.mark.parametrize("backend", EVERY_BACKEND)
@pytest.mark.parametrize(("payload", "size"), CUSTOM)
def test_a_custom_type_is_echoed(
    run_trial: RunTrial, request: pytest.FixtureRequest, backend: str, payload: str, size: int
) -> None:
    """Every message back. zenoh carries the type's CDR; ros1 is a real typed topic: genpy
    classes generated from the .msg files, deserialized by rospy; dds a typed DDS topic
    declared from the type's ROS 2 fields; native and native-proc carry the CDR."""
    require_backend(request, backend)
    tables, _ = run(run_trial, custom_trial(backend, payload, size))
    check_complete(tables[0], 200)


@pytest.mark.ros1
def test_ros1_roscore_is_stopped(tmp_path: Path, ros1: None) -> None:
    backend = get_backend("ros1")
    infra = backend.start_infrastructure(tmp_path, Placement())
    proc = infra._proc  # type: ignore[attr-defined]
    port = infra.uri.rsplit(":", 1)[1].strip("/")  # type: ignore[attr-defined]
    infra.stop()
    assert proc.poll() is not None
    # rosmaster and rosout (process groups of their own) are gone too
    left = subprocess.run(["pgrep", "-f", f"-p {port}"], capture_output=True, check=False)
    assert left.stdout == b""


@pytest.mark.ros1
def test_ros1_messages_have_thesis_sizes(ros1: None) -> None:
    import subprocess

    code = (
        "import io, sys; sys.path.insert(0, sys.argv[1]);"
        "from roboscale.backends.ros1 import build_message;"
        "from roboscale.backends.base import MessageKind;"
        "out = []\n"
        "for k, s in (('text', 11), ('laserscan', 4250), ('image', 307200), ('bytes', 256)):\n"
        "    b = io.BytesIO(); build_message(MessageKind(k, s)).serialize(b)\n"
        "    out.append(len(b.getvalue()))\n"
        "print(*out)"
    )
    from roboscale.lab.nodes import package_path

    res = subprocess.run(
        ["/usr/bin/python3", "-c", code, str(package_path())],
        capture_output=True,
        text=True,
        check=True,
    )
    sizes = [int(x) for x in res.stdout.split()]
    head = 12  # int32 id + time
    assert sizes[0] == head + 4 + 11
    assert abs(sizes[1] - head - 4250) <= 8
    assert 307200 < sizes[2] - head < 307200 + 100
    assert sizes[3] == head + 4 + 256


@pytest.mark.parametrize(("payload", "size"), [("text", 11), ("image", 307200)])
def test_native_echo_in_process(run_trial: RunTrial, payload: str, size: int) -> None:
    """Sender and echoer share one process; the message tuple arrives whole (not unpacked)."""
    tables, nodes = run(run_trial, trial("native", payload, size, pairs=2))
    assert len(tables) == 2
    for rows in tables:
        check_complete(rows, 200)
    by_pair = {(n["pair"], n["role"]): n["pid"] for n in nodes}
    assert by_pair[(0, "sender")] == by_pair[(0, "echoer")] != by_pair[(1, "sender")]
    assert all(n["malformed"] == 0 for n in nodes)


@pytest.mark.zenoh
@pytest.mark.parametrize(("payload", "size"), [("text", 11), ("image", 307200)])
def test_native_across_processes(run_trial: RunTrial, zenoh: None, payload: str, size: int) -> None:
    """One process per node; the runtime's Zenoh bridge carries the topics between them."""
    tables, nodes = run(run_trial, trial("native-proc", payload, size, pairs=2))
    for rows in tables:
        check_complete(rows, 200)
    assert len({n["pid"] for n in nodes}) == 4
    assert all(n["malformed"] == 0 for n in nodes)


@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_stata_replay_round_trips_on_every_backend(
    run_trial: RunTrial, backend: str, request: pytest.FixtureRequest
) -> None:
    """The generated Stata streams (scans and images on their own topics) sent with
    `send_body` and echoed back on each stream's topic, every message."""
    from dataclasses import replace

    from roboscale.workloads.replay import IMAGE_TOPIC, SCAN_TOPIC

    require_backend(request, backend)
    t = replace(
        trial(backend, "stata", 124_000, pairs=1),
        messages=100,
        rate_hz=200.0,
        replay="stata",
        stream_topics=(SCAN_TOPIC, IMAGE_TOPIC),
        rate_factor=4.0,
    )
    (rows,), _ = run(run_trial, t)
    check_complete(rows, 100)


@pytest.mark.parametrize("fmt", ["ros1", "mcap"])
@pytest.mark.parametrize("backend", EVERY_BACKEND)
def test_a_replayed_bag_round_trips_on_every_backend(
    run_trial: RunTrial, backend: str, fmt: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A ROS 1 bag and a rosbag2 (MCAP) of LaserScan, Odometry (8-byte fields) and String
    topics, replayed as their recorded types (converted to the backend's serialization
    in the lab when needed): every message back, on each topic."""
    from dataclasses import replace

    from tests.test_bags import SENSOR_TOPICS, sensor_messages, write_sensor_bag

    require_backend(request, backend)
    bag = write_sensor_bag(tmp_path / ("s.bag" if fmt == "ros1" else "s"), fmt)
    n = len(sensor_messages())
    t = replace(
        trial(backend, "s", 1000, pairs=1),
        messages=n - 2,
        warmup=2,
        replay=str(bag),
        stream_topics=tuple(topic for topic, _ in SENSOR_TOPICS),
        rate_factor=4.0,
    )
    (rows,), nodes = run(run_trial, t)
    check_complete(rows, n - 2)
    assert all(node.get("malformed", 0) == 0 for node in nodes)


RECEIVE_ON_ROS1 = """
import base64, json, sys, threading, time
sys.path.insert(0, sys.argv[1])
import sensor_msgs.msg
from roboscale.backends.base import MessageKind, NodeContext
from roboscale.backends.ros1 import Ros1Session
kind = MessageKind.from_dict(json.loads(sys.argv[2]))
session = Ros1Session(NodeContext("typed_replay", "localhost", {}))
got, done = [], threading.Event()
session.subscribe("/typed", kind, lambda seq, msg: (got.append(msg), done.set()), 0)
pub = session.publisher("/typed", kind, 10)
deadline = time.monotonic() + 30
while not done.is_set() and time.monotonic() < deadline:
    pub.send_body(5, 7_000_000_123, base64.b64decode(sys.argv[3]))
    done.wait(0.1)
m = got[0]
print(json.dumps({
    "wrapper": m._type, "type": m.msg._type, "md5": m.msg._md5sum,
    "real_md5": sensor_msgs.msg.LaserScan._md5sum, "id": m.id, "t": [m.t.secs, m.t.nsecs],
    "seq": m.msg.header.seq, "frame": m.msg.header.frame_id, "ranges": list(m.msg.ranges),
    "angle_min": m.msg.angle_min, "body": base64.b64encode(session.body_of(m, kind)).decode(),
}))
session.close()
"""


@pytest.mark.ros1
@pytest.mark.parametrize("fmt", ["ros1", "mcap"])
def test_a_replayed_laserscan_is_a_real_laserscan_on_ros1(
    ros1: None, tmp_path: Path, fmt: str
) -> None:
    """A bag's LaserScan published by `send_body` (its recorded bytes, as rosbag play
    sends them) arrives on a rospy subscriber as sensor_msgs/LaserScan: genpy's class of
    that name and md5sum, deserialized, with the recorded fields."""
    import base64
    import json
    import os
    from dataclasses import asdict

    from tests.test_bags import write_sensor_bag

    from roboscale.bags import replay_kinds, replay_stream
    from roboscale.lab.nodes import package_path
    from roboscale.workloads.replay import read_stream_file

    bag = str(write_sensor_bag(tmp_path / ("s.bag" if fmt == "ros1" else "s"), fmt))
    kind = replay_kinds(bag)[2]
    stream = read_stream_file(Path(replay_stream(bag, "ros1")[0]))
    scan = stream.body(stream.topic_of.index(2, 3))  # the second scan
    infra = get_backend("ros1").start_infrastructure(tmp_path, Placement())
    try:
        res = subprocess.run(
            ["/usr/bin/python3", "-c", RECEIVE_ON_ROS1, str(package_path()),
             json.dumps(asdict(kind)), base64.b64encode(scan).decode()],
            capture_output=True, text=True, timeout=120, check=False,
            env={**os.environ, **infra.env},
        )  # fmt: skip
    finally:
        infra.stop()
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert (got["wrapper"], got["type"]) == (
        "roboscale_msgs/StampedLaserScan",
        "sensor_msgs/LaserScan",
    )
    assert got["md5"] == got["real_md5"]
    assert (got["id"], got["t"]) == (5, [7, 123])
    assert (got["seq"], got["frame"]) == ((4 if fmt == "ros1" else 0), "f1")
    assert got["ranges"] == pytest.approx(list(np.linspace(1.0, 2.0, 360) + 1), abs=1e-6)
    assert got["angle_min"] == pytest.approx(-1.5)
    assert base64.b64decode(got["body"]) == scan  # re-serialized by genpy: the same bytes
