"""The graph workload: its node programs over an in-memory bus, and real trials (native)
of a graph with two publishers on one topic, a relay, a fusion and a timer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from tests.workloads.test_oneway import Bus, Pub

from roboscale.analysis.graph import ARRIVAL, LINEAGE, SENT
from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.verdict import Thresholds
from roboscale.backends.base import MessageKind
from roboscale.errors import SpecError, SpecErrors
from roboscale.spec.loader import load_spec
from roboscale.spec.planner import TrialPlan, plan
from roboscale.workloads import graph as wl
from roboscale.workloads.graph import (
    ID_SLOTS,
    GraphNodeConfig,
    GraphNodeProgram,
    InputPlan,
    OutputPlan,
    message_id,
)

KIND = MessageKind("bytes", 8)
GRAPH = """\
nodes:
  lidar_a: {publish: {topic: scan, rate_hz: 50, payload: laserscan}}
  lidar_b: {host: 1, publish: {topic: scan, rate_hz: 20, payload: laserscan}}
  odom: {publish: {topic: odom, rate_hz: 50, payload: 64B}}
  filter: {relay: {input: scan, output: points, payload: 1KB, work_ms: 1}}
  fuse: {fusion: {inputs: [points, odom], output: pose, payload: 64B, when: all}}
  plan: {timer: {rate_hz: 20, inputs: [pose], output: cmd, payload: text}}
  base: {subscribe: [cmd, scan]}
paths:
  lidar_to_base: [lidar_a, filter, fuse, plan, base]
  odom_to_base: [odom, fuse, plan, base]
"""


@pytest.fixture(autouse=True)
def no_clocked_nodes() -> Iterator[None]:
    wl._CLOCKED.clear()
    yield
    wl._CLOCKED.clear()


def out(stage: str, pub: int, topic: int, **over: Any) -> OutputPlan:
    base: dict[str, Any] = {
        "stage": stage, "pub": pub, "topic": topic, "name": f"t{topic}", "kind": KIND,
        "rate_hz": 0.0, "messages": 0, "inputs": (), "when": "all", "work_ms": 0.0,
        "work": "sleep",
    }  # fmt: skip
    return OutputPlan(**{**base, **over})


def node(name: str, outputs: tuple[OutputPlan, ...], inputs: tuple[int, ...]) -> GraphNodeConfig:
    return GraphNodeConfig(
        node=name, outputs=outputs, inputs=tuple(InputPlan(i, f"t{i}", KIND) for i in inputs),
        drain_s=0.0, publisher_queue=0, subscriber_queue=0,
    )  # fmt: skip


def events(p: GraphNodeProgram, kind: int) -> list[tuple[int, int, int]]:
    cols = p.columns()
    rows = zip(cols["event"], cols["topic"], cols["msg"], cols["extra"], strict=True)
    return [(topic, msg, extra) for event, topic, msg, extra in rows if event == kind]


def test_config_round_trips_through_json() -> None:
    cfg = node("n", (out("fusion", 3, 2, inputs=(0, 1), when="any"),), (0, 1))
    assert GraphNodeConfig.from_dict(cfg.to_dict()) == cfg


def test_ids_carry_publisher_and_relays_keep_lineage() -> None:
    bus = Bus()
    sink = GraphNodeProgram(bus, node("sink", (), (1,)))
    relay = GraphNodeProgram(bus, node("relay", (out("relay", 2, 1, inputs=(0,)),), (0,)))
    pubs = [
        GraphNodeProgram(bus, node(f"p{k}", (out("publish", k, 0, rate_hz=1e4, messages=5),), ()))
        for k in (0, 1)
    ]
    pubs[0].run()  # the first clocked node runs every clocked output of its process
    for p in (relay, sink, *pubs):
        p.finish()
    sent = {msg for p in pubs for _, msg, _ in events(p, SENT)}
    assert sent == {message_id(s, k) for s in range(5) for k in (0, 1)}
    arrived_at_relay = {msg for _, msg, _ in events(relay, ARRIVAL)}
    assert arrived_at_relay == sent
    # Each relayed message names the message it was made from, and its own publisher (2).
    made = {parent: msg for _, msg, parent in events(relay, LINEAGE)}
    assert set(made) == sent and {m % ID_SLOTS for m in made.values()} == {2}
    assert {msg for _, msg, _ in events(sink, ARRIVAL)} == set(made.values())


def test_fusion_all_waits_for_every_input_and_any_does_not() -> None:
    bus = Bus()
    both = GraphNodeProgram(bus, node("all", (out("fusion", 2, 2, inputs=(0, 1)),), (0, 1)))
    either = GraphNodeProgram(
        bus, node("any", (out("fusion", 3, 3, inputs=(0, 1), when="any"),), (0, 1))
    )
    a = GraphNodeProgram(bus, node("a", (out("publish", 0, 0, rate_hz=1e4, messages=4),), ()))
    GraphNodeProgram(bus, node("b", (out("publish", 1, 1, rate_hz=1e4, messages=1),), ()))
    a.run()
    both.finish()
    either.finish()
    assert len(events(both, SENT)) == 1  # only once b's single message came
    assert len(events(either, SENT)) == 5


class BodyBus(Bus):
    """A bus whose publishers also send recorded bodies, kept in `bodies` in send order."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[bytes] = []

    def publisher(self, topic: str, kind: MessageKind, queue: int) -> Pub:
        return BodyPub(self, topic)


class BodyPub(Pub):
    bus: BodyBus

    def send_body(self, seq: int, stamp_ns: int, body: bytes) -> None:
        self.bus.bodies.append(body)
        self.forward(seq)


@pytest.mark.parametrize(
    ("fmt", "name", "loop"),
    [("ros1", "x.bag", True), ("ros1", "x.bag", False), ("sqlite3", "x2", True),
     ("mcap", "x3", True)],
)  # fmt: skip
def test_a_replayed_publisher_sends_the_bag_topic_at_its_recorded_times(
    tmp_path: Path, fmt: str, name: str, loop: bool
) -> None:
    from tests.test_bags import ROS1, ROS2, write_bag

    from roboscale.bags import replay_info
    from roboscale.workloads.replay import read_stream_file

    info = replay_info(str(write_bag(tmp_path / name, fmt)))
    count = [t.name for t in info.topics].index("/count")  # 4 messages: 0, 1, 2, 3
    bus = BodyBus()
    sink = GraphNodeProgram(bus, node("sink", (), (0,)))
    player = out("publish", 0, 0, messages=6, replay=info.source, stream_topic=count,
                 rate_factor=50.0, loop=loop)  # fmt: skip
    source = GraphNodeProgram(bus, node("player", (player,), ()))
    source.run()
    sink.finish()
    source.finish()
    decode = ROS1.deserialize_ros1 if fmt == "ros1" else ROS2.deserialize_cdr
    values = [decode(b, "std_msgs/msg/Int32").data for b in bus.bodies]
    assert values == ([0, 1, 2, 3, 0, 1] if loop else [0, 1, 2, 3])  # the recorded bytes
    # Each send is aimed at the start plus its recorded offset (a loop: plus the bag's
    # span) over rate_factor.
    stream = read_stream_file(Path(info.source))
    offsets = [o for o, _ in stream.schedule(6, loop, count)]
    deadlines = [d for _, _, d in events(source, SENT)]
    aimed = [d - deadlines[0] for d in deadlines]
    expected = [int(o / 50) - int(offsets[0] / 50) for o in offsets]
    assert all(abs(a - e) <= 1 for a, e in zip(aimed, expected, strict=True))
    assert len({msg for _, msg, _ in events(sink, ARRIVAL)}) == len(values)


BACKENDS = [
    "native",
    pytest.param("zenoh", marks=pytest.mark.zenoh),
    pytest.param("ros1", marks=pytest.mark.ros1),
]


def graph_trial(
    tmp_path: Path, run_trial: Any, request: pytest.FixtureRequest, backend: str, graph: str
) -> tuple[TrialPlan, pa.Table]:
    """One trial of `graph` on `backend` (the middleware is installed: CI never skips)."""
    if backend != "native":
        request.getfixturevalue(backend)
    path = write_spec(tmp_path, graph)
    path.write_text(path.read_text().replace("backend: native", f"backend: {backend}"))
    t = plan(load_spec(path))[0]
    tables, _ = run_trial(t)
    return t, pa.concat_tables(tables)


REPLAY_GRAPH = """\
nodes:
  player: {publish: {topic: chatter, replay: {bag: x.bag, topic: /chatter, loop: true}}}
  relay: {relay: {input: chatter, output: out, payload: 64B}}
  sink: {subscribe: [out, chatter]}
paths:
  replayed: [player, relay, sink]
"""


@pytest.mark.parametrize("backend", [*BACKENDS, pytest.param("dds", marks=pytest.mark.dds)])
def test_trial_replays_a_bag_topic_through_a_relay(
    tmp_path: Path, run_trial: Any, request: pytest.FixtureRequest, backend: str
) -> None:
    """A bag built here, one of its topics replayed in a loop into a relay (as its recorded
    type: std_msgs/String): every recorded message arrives at both subscribers, and the
    path is followed end to end."""
    from tests.test_bags import write_bag

    write_bag(tmp_path / "x.bag", "ros1")
    t, table = graph_trial(tmp_path, run_trial, request, backend, REPLAY_GRAPH)
    entry = summarize_trial(table, t.params(), Thresholds()).to_dict()
    chatter = [c for c in entry["topics"] if c["topic"] == "chatter"]
    assert {c["subscriber"] for c in chatter} == {"relay", "sink"}
    assert all(c["arrived"] == c["sent"] > 0 for c in chatter)
    (replayed,) = entry["paths"]
    assert replayed["followed"] == replayed["sources"] > 0
    sizes = set(table.filter(pa.compute.equal(table["node"], "topic|chatter|player|sink"))
                .column("bytes").to_pylist())  # fmt: skip
    assert sizes == {wl.WORKLOAD.graph(t).kinds()["chatter"].size}


def write_spec(tmp_path: Path, graph: str = GRAPH, **sweep: Any) -> Path:
    (tmp_path / "g.yaml").write_text(graph)
    extra = "".join(f"  {k}: {v}\n" for k, v in sweep.items())
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "name: g\nsweep:\n  backend: native\n  workload: graph\n  graph: g.yaml\n"
        f"  rate_hz: 10\n{extra}trial:\n  runs: 1\n  duration_s: 1.5\n  warmup: 3\n  drain_s: 0.5\n"
    )
    return spec


def test_spec_resolves_the_graph_beside_it(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path))
    assert spec.sweep.graph == [str((tmp_path / "g.yaml").resolve())]
    t = plan(spec)[0]
    assert wl.WORKLOAD.measured_nodes(t) == 7 and wl.WORKLOAD.host_of(t, 1) == 0


def spec_error(path: Path) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return str(info.value).replace(str(path.parent) + "/", "")


def test_spec_refuses_a_missing_graph_file(tmp_path: Path) -> None:
    path = write_spec(tmp_path)
    path.write_text(path.read_text().replace("graph: g.yaml", "graph: none.yaml"))
    assert spec_error(path) == (
        "spec.yaml:5: sweep.graph[0]: no graph file 'none.yaml' (relative to the spec)"
    )


def test_spec_refuses_too_few_hosts_for_the_graph(tmp_path: Path) -> None:
    path = write_spec(tmp_path, GRAPH.replace("host: 1", "host: 3"), hosts=3)
    assert spec_error(path) == (
        "spec.yaml:7: sweep.hosts: graph 'g.yaml' places nodes on hosts 0 to 3, so hosts is 1 "
        "(all on one) or at least 4; got 3"
    )


def test_spec_needs_a_graph_for_the_graph_workload(tmp_path: Path) -> None:
    path = write_spec(tmp_path)
    path.write_text(path.read_text().replace("  graph: g.yaml\n", ""))
    assert spec_error(path).startswith("spec.yaml:2: sweep.graph: workload graph needs a graph")


def test_graph_errors_name_the_graph_file(tmp_path: Path) -> None:
    with pytest.raises(SpecErrors) as info:
        load_spec(write_spec(tmp_path, GRAPH.replace("inputs: [pose]", "inputs: [poze]")))
    assert str(info.value) == (
        f"{(tmp_path / 'g.yaml').resolve()}:7: nodes.plan.timer[0].inputs[0]: topic 'poze' has "
        "no publisher in the graph; did you mean 'pose'?"
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_trial_follows_paths_and_shared_topics(
    tmp_path: Path, run_trial: Any, request: pytest.FixtureRequest, backend: str
) -> None:
    t, table = graph_trial(tmp_path, run_trial, request, backend, GRAPH)
    entry = summarize_trial(table, t.params(), Thresholds()).to_dict()
    scan = {(c["publisher"], c["subscriber"]): c for c in entry["topics"] if c["topic"] == "scan"}
    # One topic, two publishers at their own rates, told apart at each subscriber.
    assert set(scan) == {(p, s) for p in ("lidar_a", "lidar_b") for s in ("filter", "base")}
    assert scan["lidar_a", "base"]["rate_hz"] > 1.5 * scan["lidar_b", "base"]["rate_hz"]
    paths = {p["path"]: p for p in entry["paths"]}
    assert set(paths) == {"lidar_to_base", "odom_to_base"}
    for p in paths.values():
        assert p["sources"] > 0 and p["followed"] > 0
        assert p["e2e_us"]["p50"] > 0
    assert entry["received"] == entry["sent"] > 0
    # The fusion fires once per set of inputs, however many threads deliver them: no more
    # often than its scarcest input arrives. The counts are of messages sent after the
    # warm-up, so the first fire after it may complete a set with an input sent before
    # it (one in flight at the cut): one more is allowed, never the double fires of a race.
    into_fuse = [c["arrived"] for c in entry["topics"] if c["subscriber"] == "fuse"]
    (fused,) = [c["sent"] for c in entry["topics"] if c["topic"] == "pose"]
    assert fused <= min(into_fuse) + 1


def test_a_path_follows_every_message_made_from_the_source() -> None:
    from roboscale.analysis.graph import Events, _follow
    from roboscale.spec.graphfile import GraphPath

    # Node 1 made two messages (11, 12) from source message 5; only 12 reached node 2.
    ev = Events(
        sent={},
        arrived=[{}, {(0, 5): 100}, {(1, 12): 300, (1, 13): 250}],
        made=[{}, {(0, 5, 1): [11, 12]}, {}],
    )
    path = GraphPath("p", ("a", "b", "c"), ("x", "y"))
    index = {"x": 0, "y": 1}
    assert _follow(ev, [0, 1, 2], index, path, 5) == 300
    assert _follow(ev, [0, 1, 2], index, path, 6) == 0  # never arrived: not followed


def test_a_bad_bag_in_a_graph_exits_2_naming_its_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.test_bags import write_bag

    from roboscale.cli import main

    bag = write_bag(tmp_path / "x.bag", "ros1")
    bag.write_bytes(bag.read_bytes()[:200])
    with pytest.raises(SystemExit) as done:
        main(["bench", str(write_spec(tmp_path, REPLAY_GRAPH)), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "Traceback" not in err
    graph = (tmp_path / "g.yaml").resolve()
    assert f"{graph}:2: nodes.player.publish[0].replay.bag: {bag.resolve()}: cannot read" in err


def test_a_graph_trial_is_named_by_its_graph_not_the_payload(tmp_path: Path) -> None:
    from roboscale.spec.planner import count_trials

    spec = load_spec(write_spec(tmp_path, payload="[text, 4KB]"))
    trials = plan(spec)
    assert [t.trial for t in trials] == ["t0000-native-g-10hz-r0"]
    assert trials[0].subject == "g" and count_trials(spec) == 1


TYPED_GRAPH = f"""\
message_types: {Path(__file__).parents[2] / "examples" / "msgs"}
nodes:
  wheels: {{publish: {{topic: wheels, rate_hz: 20, payload: robot_msgs/msg/WheelState}}}}
  odometry: {{relay: {{input: wheels, output: odom, payload: legacy_msgs/Odometry2D}}}}
  sink: {{subscribe: [odom, wheels]}}
paths:
  wheel_to_odom: [wheels, odometry, sink]
"""


@pytest.mark.parametrize("backend", BACKENDS)
def test_trial_carries_message_types_of_the_graph(
    tmp_path: Path, run_trial: Any, request: pytest.FixtureRequest, backend: str
) -> None:
    """Topics typed by .msg files the graph loads (relative to it): every message
    arrives, at the size of its type's sample."""
    pytest.importorskip("rosbags")  # the data extra, which make test installs
    t, table = graph_trial(tmp_path, run_trial, request, backend, TYPED_GRAPH)
    entry = summarize_trial(table, t.params(), Thresholds()).to_dict()
    assert entry["received"] == entry["sent"] > 0
    (path,) = entry["paths"]
    assert path["followed"] == path["sources"] > 0
    kinds = wl.WORKLOAD.graph(t).kinds()
    assert kinds["odom"].typed is not None and kinds["odom"].typed.msgtype.endswith("Odometry2D")
