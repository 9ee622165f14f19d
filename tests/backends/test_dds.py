"""Real Cyclone DDS trials of every workload on loopback, each in its own leased domain,
and the backend's configuration. Nothing asserts on elapsed time."""

from __future__ import annotations

import fcntl
import os
from dataclasses import replace
from pathlib import Path

import pytest
from tests.backends.test_trials import RunTrial, check_complete, trial
from tests.backends.test_trials import run as run_echo
from tests.lab.test_flows import check_chain, check_fanout, flow
from tests.lab.test_flows import run as run_flow

from roboscale.backends import dds as backend
from roboscale.backends import dds_domain
from roboscale.backends.base import NodeSetting, get_backend
from roboscale.errors import BackendUnavailable, UserError


@pytest.mark.dds
@pytest.mark.parametrize(
    ("payload", "size"), [("text", 11), ("laserscan", 4250), ("image", 307200), ("64KB", 65536)]
)
def test_dds_echo(run_trial: RunTrial, dds: None, payload: str, size: int) -> None:
    tables, nodes = run_echo(run_trial, trial("dds", payload, size, pairs=2))
    assert len(tables) == 2
    for rows in tables:
        check_complete(rows, 200)
    assert all(n["malformed"] == 0 for n in nodes)
    assert len({n["pid"] for n in nodes}) == 4  # one process per node


@pytest.mark.dds
@pytest.mark.parametrize(
    ("workload", "ack"), [("fanout", False), ("fanout", True), ("ping", False), ("ping", True)]
)
def test_dds_one_to_many(run_trial: RunTrial, dds: None, workload: str, ack: bool) -> None:
    t = flow("dds", workload, listeners=3 if workload == "fanout" else 1, ack=ack)
    table, _ = run_flow(run_trial, t)
    check_fanout(t, table)


@pytest.mark.dds
def test_dds_chain(run_trial: RunTrial, dds: None) -> None:
    t = flow("dds", "chain", chain_length=5, ack=True)
    table, _ = run_flow(run_trial, t)
    check_chain(t, table)


def test_configuration_is_loopback_without_multicast() -> None:
    xml = dds_domain.cyclone_xml(42, "lo", ["127.0.0.1"], 9)
    assert '<Domain id="42">' in xml
    assert '<NetworkInterface name="lo"/>' in xml
    assert "<AllowMulticast>false</AllowMulticast>" in xml
    assert '<Peers><Peer address="127.0.0.1"/></Peers>' in xml
    assert "<MaxAutoParticipantIndex>9</MaxAutoParticipantIndex>" in xml
    on_host = dds_domain.cyclone_xml(42, "10.231.0.2", ["10.231.0.2", "10.231.0.3"], 9)
    assert '<NetworkInterface address="10.231.0.2"/>' in on_host


def test_domain_ports_stay_in_range() -> None:
    for domain in dds_domain.DOMAINS:
        ports = dds_domain.domain_ports(domain)
        gain, top = dds_domain.PARTICIPANT_GAIN, dds_domain.MAX_PARTICIPANT_INDEX
        last = ports[dds_domain.DISCOVERY_OFFSET + gain * top + 1]
        assert last == ports[-1] < 65536


def test_leases_never_share_a_domain() -> None:
    first, second = dds_domain.lease_domain(), dds_domain.lease_domain()
    try:
        assert first.domain != second.domain
    finally:
        first.release()
        second.release()


def test_a_domain_held_elsewhere_is_skipped(tmp_path: Path) -> None:
    lease = dds_domain.lease_domain()
    held = lease.domain
    lease.release()
    # Another run (another open file) holds the lock: the next lease must avoid it.
    fd = os.open(dds_domain._lock_dir() / f"{held}.lock", os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        again = dds_domain.lease_domain()
        assert again.domain != held
        again.release()
    finally:
        os.close(fd)


def test_each_trial_gets_its_own_domain() -> None:
    driver = backend.DdsBackend()
    one = driver.node_config("sender", 0, NodeSetting("a"))
    same = driver.node_config("echoer", 0, NodeSetting("a"))
    other = driver.node_config("sender", 0, NodeSetting("b"))
    driver.release()
    assert one["domain"] == same["domain"]
    assert f'<Domain id="{other["domain"]}">' in other["xml"]


def test_version_names_the_binding_and_the_per_message_path(
    dds: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roboscale.backends.dds_cdr import compiled_take

    version = get_backend("dds").version()
    assert version.startswith("cyclonedds 11.0.1")
    built = compiled_take() is not None
    assert version.endswith("per-message path in C") == built
    monkeypatch.setenv(backend.PATH_ENV, "ctypes")
    assert get_backend("dds").version().endswith("in ctypes ($ROBOSCALE_DDS_PATH)")


def test_missing_binding_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "cyclonedds", None)  # import fails as if absent
    with pytest.raises(BackendUnavailable) as err:
        get_backend("dds").check()
    assert "pip install 'roboscale[dds]'" in (err.value.hint or "")


def test_trial_qos_reaches_the_session() -> None:
    driver = backend.DdsBackend()
    assert driver.node_config("sender", 0, NodeSetting("q"))["qos"] == {}
    trial = NodeSetting(
        "q", reliability="best_effort", history="keep_last 7", durability="transient_local"
    )
    assert driver.node_config("sender", 0, trial)["qos"] == {
        "reliability": "best_effort",
        "history": "keep_last",
        "depth": 7,
        "durability": "transient_local",
    }
    driver.release()


@pytest.mark.dds
def test_qos_becomes_cyclone_policies(dds: None) -> None:
    from cyclonedds.core import Policy

    def policies(settings: dict[str, object], queue: int) -> list[object]:
        return list(backend.qos_policies({**backend.DEFAULT_QOS, **settings}, queue))

    default = policies({}, 1000)
    assert Policy.History.KeepLast(1000) in default and Policy.Durability.Volatile in default
    assert Policy.History.KeepAll in policies({}, 0)  # an unbounded queue keeps all
    chosen = policies(
        {"reliability": "best_effort", "history": "keep_last", "depth": 5,
         "durability": "transient_local"},
        1000,
    )  # fmt: skip
    assert Policy.Reliability.BestEffort in chosen
    assert Policy.History.KeepLast(5) in chosen
    assert Policy.Durability.TransientLocal in chosen


@pytest.mark.dds
def test_dds_echo_with_keep_all_and_transient_local(run_trial: RunTrial, dds: None) -> None:
    t = replace(
        trial("dds", "4KB", 4096, pairs=1),
        reliability="reliable",
        history="keep_all",
        durability="transient_local",
    )
    tables, _ = run_echo(run_trial, t)
    check_complete(tables[0], 200)


@pytest.mark.dds
def test_dds_fanout_best_effort(run_trial: RunTrial, dds: None) -> None:
    """Best effort may drop; the trial runs and its records stay consistent."""
    t = replace(
        flow("dds", "fanout", listeners=2), reliability="best_effort", history="keep_last 5"
    )
    table, _ = run_flow(run_trial, t)
    assert table.num_rows == 2 * 150
    assert any(v is not None for v in table.column("t_echoed").to_pylist())


FANOUT_ON_HOSTS = """\
name: dds-hosts
sweep:
  backend: dds
  workload: fanout
  listeners: 4
  rate_hz: 100
  payload: 64KB
  hosts: 3
  link: ethernet
trial:
  runs: 1
  messages: 100
  warmup: 10
  drain_s: 2
"""


@pytest.mark.netns
@pytest.mark.dds
def test_dds_fanout_across_emulated_hosts(tmp_path: Path, root: None, dds: None) -> None:
    """A publisher on h0, four listeners on h1 and h2, over the emulated Ethernet: every
    message reaches every listener, and the hosts are gone afterwards."""
    import json

    from rich.console import Console

    from roboscale.env.cleanup import PREFIX
    from roboscale.env.netcmd import netns_names
    from roboscale.lab.runner import run_sweep
    from roboscale.records.folder import ResultsFolder
    from roboscale.spec.loader import load_spec
    from roboscale.spec.planner import plan

    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(FANOUT_ON_HOSTS)
    spec = load_spec(spec_path)
    out = tmp_path / "run"
    outcome = run_sweep(spec, plan(spec), out, FANOUT_ON_HOSTS, "test", Console(quiet=True))
    assert outcome.failed == 0 and not outcome.interrupted
    (entry,) = json.loads((out / "summary.json").read_text())["trials"]
    assert entry["backend"] == "dds" and entry["workload"] == "fanout"
    assert entry["sent"] == entry["received"] == 100 and entry["lost"] == 0
    records = ResultsFolder(out).records(entry["trial"]).to_pydict()
    assert sorted(set(records["host"])) == ["h1", "h2"]  # the listeners' hosts
    meta = json.loads((out / "trials" / entry["trial"] / "metadata.json").read_text())
    assert meta["env"]["link_profile"]["name"] == "ethernet"
    ours = f"{PREFIX}{meta['env']['run_id']}-"  # other runs may share the machine
    assert [n for n in netns_names() if n.startswith(ours)] == []


@pytest.mark.dds
@pytest.mark.parametrize(("topic", "wrapper"), [(2, "int32 id\nbuiltin_interfaces/Time t\n"
                         "sensor_msgs/LaserScan msg\n"), (1, "int32 id\nbuiltin_interfaces/Time"
                         " t\nuint32 align8\nnav_msgs/Odometry msg\n")])  # fmt: skip
def test_a_replayed_message_is_its_recorded_type_on_dds(
    dds: None, tmp_path: Path, topic: int, wrapper: str
) -> None:
    """A ROS 1 bag's LaserScan and Odometry, converted to CDR in the lab and sent by
    `send_body` as they are: a typed topic (`roboscale_msgs::msg::dds_::Stamped<Type>_`
    around `<pkg>::msg::dds_::<Type>_`) whose samples rosbags' ROS 2 deserializer reads
    as the recorded message, with the id and stamp in place."""
    import threading
    from typing import Any

    from rosbags.typesys import Stores, get_types_from_msg, get_typestore
    from tests.test_bags import write_sensor_bag

    from roboscale.backends.base import NodeContext
    from roboscale.backends.dds_types import type_of
    from roboscale.bags import replay_kinds, replay_stream
    from roboscale.workloads.replay import read_stream_file

    bag = str(write_sensor_bag(tmp_path / "s.bag", "ros1"))
    kind = replay_kinds(bag)[topic]
    assert kind.typed is not None
    stamped = type_of(kind)
    assert stamped.__idl_typename__ == f"roboscale_msgs::msg::dds_::Stamped{kind.typed.type_name}_"
    inner_name = stamped.__annotations__["msg"].__idl_typename__
    package, _, type_name = kind.typed.msgtype.split("/")
    assert inner_name == f"{package}::msg::dds_::{type_name}_"
    stream = read_stream_file(Path(replay_stream(bag, "cdr")[0]))
    body = stream.body(stream.topic_of.index(topic, 3))  # its second message
    driver = backend.DdsBackend()
    cfg = driver.node_config("sender", 0, NodeSetting(f"typed-{topic}", trial_nodes=1))
    session = driver.open(NodeContext("typed", "localhost", cfg))
    got: list[Any] = []
    done = threading.Event()

    def on_message(seq: int, msg: object) -> None:  # a Sample: read while it is lent
        got.append((bytes(msg), session.body_of(msg, kind)))  # type: ignore[call-overload]
        done.set()

    try:
        session.subscribe("/typed", kind, on_message, 0)
        pub = session.publisher("/typed", kind, 10)
        for _ in range(300):
            pub.send_body(5, 7_000_000_123, body)
            if done.wait(0.1):
                break
        assert got, "nothing arrived"
        assert got[0][1][4:] == body[4:]
    finally:
        session.close()
        driver.release()
    store = get_typestore(Stores.LATEST)
    name = f"roboscale_msgs/msg/Stamped{kind.typed.type_name}"
    store.register(get_types_from_msg(wrapper, name))
    msg: Any = store.deserialize_cdr(got[0][0], name)
    assert (msg.id, msg.t.sec, msg.t.nanosec) == (5, 7, 123)
    recorded: Any = store.deserialize_cdr(body, kind.typed.msgtype)
    assert (msg.msg.header.frame_id, msg.msg.header.stamp.sec) == ("f1", 101)
    if topic == 2:
        assert list(msg.msg.ranges) == list(recorded.ranges) and msg.msg.ranges[0] == 2.0
    else:
        assert msg.msg.pose.pose.position.x == 2.5
        assert list(msg.msg.twist.covariance) == list(recorded.twist.covariance)


@pytest.mark.dds
@pytest.mark.parametrize(
    ("variable", "key", "value"),
    [(backend.TAKE_ENV, "take", "waitset"), (backend.PATH_ENV, "path", "ctypes")],
)
def test_dds_echo_with_another_take(
    run_trial: RunTrial,
    dds: None,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    key: str,
    value: str,
) -> None:
    """$ROBOSCALE_DDS_TAKE=waitset: readers take on threads of their own, as rclpy does;
    $ROBOSCALE_DDS_PATH=ctypes: the nodes take and forward through dds_cdr's Python
    classes, what a machine without a C compiler gets. The trial is as complete."""
    monkeypatch.setenv(variable, value)
    tables, _ = run_echo(run_trial, trial("dds", "4KB", 4096, pairs=1))
    check_complete(tables[0], 200)
    # the setting reaches the nodes in their configuration (the session obeys it:
    # test_dds_cdr's forwarding test looks at its takers and reader threads)
    ours = backend.DdsBackend()
    try:
        assert ours.node_config("echoer", 0, NodeSetting("t"))[key] == value
    finally:
        ours.release()


def test_an_unknown_take_mode_or_message_path_is_refused_before_anything_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(backend.TAKE_ENV, "poll")
    with pytest.raises(
        UserError, match=r"ROBOSCALE_DDS_TAKE is 'poll'; allowed: listener, waitset"
    ):
        backend.DdsBackend().check()  # what the lab calls before the first trial
    monkeypatch.setenv(backend.TAKE_ENV, "")
    monkeypatch.setenv(backend.PATH_ENV, "rust")
    with pytest.raises(UserError, match=r"ROBOSCALE_DDS_PATH is 'rust'; allowed: c, ctypes"):
        backend.DdsBackend().check()
