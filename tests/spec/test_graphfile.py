"""Graph files: the shipped examples load; each broken graph is refused with its file,
line, field and what is allowed (the nearest name for an unknown node or topic)."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale import msgtypes
from roboscale.errors import SpecError, SpecErrors
from roboscale.spec.graphfile import read_graph

EXAMPLES = Path(__file__).parents[2] / "examples" / "graphs"
SMALL = """\
version: 1
nodes:
  lidar:
    publish: {topic: scan, rate_hz: 20, payload: laserscan}
  filter:
    host: 1
    relay: {input: scan, output: points, payload: 4KB, work_ms: 5, work: busy}
  sink:
    subscribe: [points]
paths:
  scan_path: [lidar, filter, sink]
"""


def errors_of(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "g.yaml"
    path.write_text(text)
    with pytest.raises((SpecError, SpecErrors)) as info:
        read_graph(path)
    err = info.value
    found = err.errors if isinstance(err, SpecErrors) else [err]
    return [e.message.replace(str(path), "g.yaml") for e in found]


def test_examples_load() -> None:
    auto = read_graph(EXAMPLES / "autoware-reference.yaml")
    assert len(auto.nodes) == 22 and len(auto.publishers()) == 21
    hot = {p.name: p for p in auto.paths}["front_lidar_to_dbw"]
    assert hot.nodes[0] == "FrontLidarDriver" and hot.nodes[-1] == "VehicleDBWSystem"
    assert hot.topics[-1] == "VehicleInterface"
    robot = read_graph(EXAMPLES / "mobile-robot.yaml")
    assert robot.hosts == 2


def test_small_graph(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(SMALL)
    g = read_graph(path)
    relay = g.nodes[1].outputs[0]
    assert (relay.stage, relay.inputs, relay.work, relay.work_ms) == ("relay", ("scan",), "busy", 5)
    assert relay.payload_bytes == 4096 and g.nodes[1].host == 1
    assert g.paths[0].topics == ("scan", "points")
    assert g.topics() == {"scan": "laserscan", "points": "4KB"}


def test_several_publishers_on_one_topic(tmp_path: Path) -> None:
    text = SMALL.replace(
        "  sink:\n",
        "  odom:\n    publish: {topic: scan, rate_hz: 5, payload: laserscan}\n  sink:\n",
    )
    path = tmp_path / "g.yaml"
    path.write_text(text)
    g = read_graph(path)
    on_scan = [n.name for n, o in g.publishers() if o.topic == "scan"]
    assert on_scan == ["lidar", "odom"]


BROKEN = [
    (
        SMALL.replace("payload: 4KB", "payload: 4XB"),
        "g.yaml:7: nodes.filter.relay[0].payload: '4XB' is not a payload; allowed: one of text, "
        "laserscan, image, a size from 1 B to 4 MB such as 256, '256B', '4KB', '4MB', or a "
        "message type of message_types (package/msg/Type, or {type: package/msg/Type, size: "
        "64KB})",
    ),
    (
        SMALL.replace("input: scan", "input: scna"),
        "g.yaml:7: nodes.filter.relay[0].input: topic 'scna' has no publisher in the graph; "
        "did you mean 'scan'?",
    ),
    (
        SMALL.replace("[lidar, filter, sink]", "[lidar, filtr, sink]"),
        "g.yaml:11: paths.scan_path[1]: unknown node 'filtr'; did you mean 'filter'?",
    ),
    (
        SMALL.replace("[lidar, filter, sink]", "[lidar, sink]"),
        "g.yaml:11: paths.scan_path[1]: no such path: 'sink' reads no topic that 'lidar' "
        "publishes ('lidar' publishes scan)",
    ),
    (
        SMALL.replace("rate_hz: 20", "rate_hz: 0"),
        "g.yaml:4: nodes.lidar.publish[0].rate_hz: messages per second, a number from 0.1 to "
        "10000; got 0",
    ),
    (
        SMALL.replace("work: busy", "work: spin"),
        "g.yaml:7: nodes.filter.relay[0].work: one of sleep, busy; got 'spin'",
    ),
    (
        SMALL.replace("host: 1", "host: -1"),
        "g.yaml:6: nodes.filter.host: a host index from 0 to 63; got -1",
    ),
    (
        SMALL.replace("    host: 1\n", "    hots: 1\n"),
        "g.yaml:6: nodes.filter.hots: unknown field; did you mean 'host'? allowed: host, "
        "publish, relay, fusion, timer, subscribe",
    ),
    (
        SMALL.replace(", work_ms: 5", "").replace("output: points, ", ""),
        "g.yaml:7: nodes.filter.relay[0]: missing output (a relay has input, output, payload, "
        "work_ms, work)",
    ),
    (
        SMALL.replace("version: 1", "version: 2"),
        "g.yaml:1: version: this roboscale reads graph version 1; got 2",
    ),
    (
        SMALL.replace("payload: 4KB", "payload: text").replace(
            "  sink:\n",
            "  other:\n    publish: {topic: points, rate_hz: 1, payload: image}\n  sink:\n",
        ),
        "g.yaml:9: nodes.other.publish[0].payload: topic 'points' is published as text (11 B) "
        "elsewhere; its publishers share one payload",
    ),
    (
        "nodes: []\n",
        "g.yaml:1: nodes: a mapping of node names to their host, publish, relay, fusion, timer "
        "and subscribe entries",
    ),
    (
        SMALL.replace("  sink:\n    subscribe: [points]\n", "  sink: {}\n"),
        "g.yaml:8: nodes.sink: a node publishes, relays, fuses, runs a timer or subscribes",
    ),
    (
        SMALL.replace(
            "  sink:\n",
            "  fuse:\n    fusion: {inputs: [scan], output: fused, payload: text}\n  sink:\n",
        ),
        "g.yaml:9: nodes.fuse.fusion[0].inputs: a list of at least 2 topic name(s); got ['scan']",
    ),
    (
        SMALL.replace("paths:\n  scan_path: [lidar, filter, sink]\n", "paths: [a, b]\n"),
        "g.yaml:10: paths: a mapping of path names to lists of node names; got ['a', 'b']",
    ),
]


@pytest.mark.parametrize(("text", "message"), BROKEN)
def test_broken_graph_is_refused_with_its_line(tmp_path: Path, text: str, message: str) -> None:
    assert message in errors_of(tmp_path, text)


def test_relay_cycle_without_timer_is_refused(tmp_path: Path) -> None:
    text = SMALL.replace(
        "  sink:\n",
        "  back:\n    relay: {input: points, output: scan, payload: laserscan}\n  sink:\n",
    )
    assert errors_of(tmp_path, text) == [
        "g.yaml:2: nodes: a cycle of relays/fusions with no timer: scan -> points -> scan; "
        "a timer must break it (it publishes at its rate with the latest input)"
    ]


def test_cycle_broken_by_a_timer_is_allowed(tmp_path: Path) -> None:
    text = SMALL.replace(
        "  sink:\n",
        "  back:\n    timer: {rate_hz: 5, inputs: [points], output: scan, payload: laserscan}\n"
        "  sink:\n",
    )
    path = tmp_path / "g.yaml"
    path.write_text(text)
    assert [o.stage for n, o in read_graph(path).publishers()] == ["publish", "relay", "timer"]


def test_nonexistent_path_is_refused(tmp_path: Path) -> None:
    text = SMALL.replace("[lidar, filter, sink]", "[sink, filter]")
    assert errors_of(tmp_path, text) == [
        "g.yaml:11: paths.scan_path[1]: no such path: 'filter' reads no topic that 'sink' "
        "publishes ('sink' publishes nothing)"
    ]


def test_every_error_is_reported_together(tmp_path: Path) -> None:
    text = SMALL.replace("rate_hz: 20", "rate_hz: fast").replace("work: busy", "work: x")
    assert len(errors_of(tmp_path, text)) == 2


REPLAYED = """\
nodes:
  player:
    publish: {topic: chatter, replay: {bag: x.bag, topic: /chatter, rate_factor: 2}}
  sink:
    subscribe: [chatter]
"""


def test_a_publisher_replays_a_bag_topic_beside_the_graph(tmp_path: Path) -> None:
    from tests.test_bags import write_bag

    from roboscale.bags import replay_info

    bag = write_bag(tmp_path / "x.bag", "ros1")
    path = tmp_path / "g.yaml"
    path.write_text(REPLAYED)
    player = read_graph(path).publishers()[0][1]
    assert player.replay is not None
    assert (player.replay.bag, player.replay.topic) == (str(bag.resolve()), "/chatter")
    assert (player.replay.rate_factor, player.replay.loop) == (2.0, False)
    info = replay_info(str(bag.resolve()))
    # The bag's own rate of the topic (10 in its span) and the recorded size, not a payload.
    assert player.rate_hz == pytest.approx(2 * 10 * info.rate_hz / info.messages)
    assert player.payload == "replay of /chatter (std_msgs/msg/String)"
    assert player.payload_bytes == info.topic_bytes[0]
    kind = read_graph(path).kinds()["chatter"]  # the recorded type, on every backend
    assert kind.typed is not None and kind.typed.msgtype == "std_msgs/msg/String"


def test_stata_topics_replay_without_a_bag(tmp_path: Path) -> None:
    path = tmp_path / "g.yaml"
    path.write_text(REPLAYED.replace("bag: x.bag, topic: /chatter", "bag: stata, topic: /base_scan")
                    .replace("rate_factor: 2", "loop: true"))  # fmt: skip
    player = read_graph(path).publishers()[0][1]
    assert player.rate_hz == pytest.approx(20.0) and player.replay is not None
    assert player.replay.loop and player.payload_bytes > 4000


BROKEN_REPLAYS = [
    (
        REPLAYED.replace("/chatter,", "/chater,"),
        [
            "g.yaml:3: nodes.player.publish[0].replay.topic: the bag has no topic '/chater'; did "
            "you mean '/chatter'? its topics: /chatter, /count"
        ],
    ),
    (
        REPLAYED.replace("rate_factor: 2", "speed: 2"),
        [
            "g.yaml:3: nodes.player.publish[0].replay.speed: unknown field; allowed: bag, topic, "
            "rate_factor, loop"
        ],
    ),
    (
        REPLAYED.replace("rate_factor: 2", "rate_factor: 0, loop: 3"),
        [
            "g.yaml:3: nodes.player.publish[0].replay.rate_factor: a speed-up of the recorded "
            "timing, a number from 0.001 to 1000; got 0",
            "g.yaml:3: nodes.player.publish[0].replay.loop: true or false: start the bag again at "
            "its end; got 3",
        ],
    ),
    (
        REPLAYED.replace("topic: chatter, replay", "topic: chatter, rate_hz: 5, replay"),
        [
            "g.yaml:3: nodes.player.publish[0].rate_hz: a replayed publisher sends the bag's "
            "messages at their recorded times; remove rate_hz and payload (replay.rate_factor "
            "speeds it up)"
        ],
    ),
    (
        REPLAYED.replace("bag: x.bag, ", ""),
        [
            "g.yaml:3: nodes.player.publish[0].replay: missing bag (a replay has bag: stata or a "
            "bag file relative to the graph file, topic: one of its topics, and rate_factor, loop)"
        ],
    ),
    (
        REPLAYED.replace("x.bag", "x.csv"),
        [
            "g.yaml:3: nodes.player.publish[0].replay.bag: {dir}/x.csv: unknown bag format "
            "'.csv'; expected a ROS 1 bag (.bag), or a rosbag2 folder (sqlite3 or MCAP) or its "
            ".db3/.mcap file"
        ],
    ),
]


@pytest.mark.parametrize(("text", "messages"), BROKEN_REPLAYS)
def test_broken_replays_are_refused_with_their_line(
    tmp_path: Path, text: str, messages: list[str]
) -> None:
    from tests.test_bags import write_bag

    write_bag(tmp_path / "x.bag", "ros1")
    (tmp_path / "x.csv").write_text("a,b\n")
    expected = [m.replace("{dir}", str(tmp_path.resolve())) for m in messages]
    assert errors_of(tmp_path, text) == expected


def test_a_truncated_bag_is_refused_at_its_replay(tmp_path: Path) -> None:
    from tests.test_bags import write_bag

    bag = write_bag(tmp_path / "x.bag", "ros1")
    bag.write_bytes(bag.read_bytes()[:300])
    (message,) = errors_of(tmp_path, REPLAYED)
    assert message.startswith(
        f"g.yaml:3: nodes.player.publish[0].replay.bag: {bag.resolve()}: cannot read the bag: "
    )


MSGS = Path(__file__).parents[2] / "examples" / "msgs"
TYPED = "nodes:\n  a: {publish: {topic: t, rate_hz: 5, payload: robot_msgs/WheelStat}}\n"


def test_a_graph_names_its_message_types(tmp_path: Path) -> None:
    pytest.importorskip("rosbags")  # the data extra, which make test installs
    assert errors_of(tmp_path, TYPED) == [
        "g.yaml:2: nodes.a.publish[0].payload: names a message type, but the graph loads "
        "none; add message_types: [.msg files or folders beside it]"
    ]
    (msgs,) = errors_of(tmp_path, f"message_types: [{MSGS}]\n" + TYPED)
    assert msgs.startswith(
        "g.yaml:3: nodes.a.publish[0].payload: no loaded .msg file defines "
        "'robot_msgs/msg/WheelStat'; did you mean 'robot_msgs/msg/WheelState'?"
    )
    broken = tmp_path / "msgs" / "robot_msgs" / "msg" / "WheelStat.msg"
    broken.parent.mkdir(parents=True)
    broken.write_text("float64 x\nfloat64 y z\n")
    (msgs,) = errors_of(tmp_path, "message_types: msgs\n" + TYPED)
    assert msgs == (
        f"g.yaml:1: message_types: {broken}:2: y: default value 'z' does not fit float64; "
        "allowed: " + msgtypes.ALLOWED_LINE
    )
    broken.write_text("float64 x\nfloat32[] y\n")
    path = tmp_path / "g.yaml"
    graph = read_graph(path)
    assert graph.message_types == (str(tmp_path / "msgs"),)
    assert graph.nodes[0].outputs[0].payload_bytes == graph.kinds()["t"].size > 4 * 16


def test_the_typed_example_graph_loads() -> None:
    pytest.importorskip("rosbags")  # the data extra, which make test installs
    graph = read_graph(EXAMPLES / "wheel-odometry.yaml")
    assert graph.message_types == (str(MSGS.resolve()),)
    kinds = graph.kinds()
    assert kinds["wheel_state"].typed is not None and kinds["wheel_state"].size >= 4096 - 64
    assert kinds["pose"].typed is not None and kinds["imu"].kind == "bytes"
