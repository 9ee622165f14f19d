"""Broken specs, each with its exact message: file, line, field and what is allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.backends.base import MessageKind
from roboscale.errors import SpecError, SpecErrors, UserError
from roboscale.spec.loader import load_spec

GOOD = """\
name: ok
sweep:
  backend: [zenoh, ros1]
  rate_hz: [10, 100]
  payload: [text, 4KB]
  pairs: [1, 2]
trial:
  runs: 2
quick:
  sweep:
    rate_hz: 5
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def messages(tmp_path: Path, text: str, quick: bool = False) -> list[str]:
    path = write(tmp_path, text)
    with pytest.raises(UserError) as info:
        load_spec(path, quick=quick)
    err = info.value
    errors = err.errors if isinstance(err, SpecErrors) else [err]
    assert all(isinstance(e, SpecError) for e in errors)
    return [e.message.replace(str(path), "F") for e in errors]


def test_good_spec_and_quick_variant(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    spec = load_spec(path)
    assert spec.sweep.backend == ["zenoh", "ros1"]
    assert spec.sweep.payload == [("text", 11), ("4KB", 4096)]
    assert spec.trial.runs == 2
    assert load_spec(path, quick=True).sweep.rate_hz == [5.0]
    assert load_spec(path, quick=True).trial.runs == 2  # the spec's own count, kept


@pytest.mark.parametrize(
    ("text", "full", "quick"),
    [
        ("", 3, 1),  # no runs anywhere: three in full, one quick
        ("quick:\n  sweep:\n    rate_hz: 5\n", 3, 1),  # a quick section without runs
        ("quick:\n  trial:\n    runs: 2\n", 3, 2),
        ("trial:\n  runs: 5\n", 5, 5),
    ],
)
def test_full_specs_default_to_three_runs_and_quick_ones_to_one(
    tmp_path: Path, text: str, full: int, quick: int
) -> None:
    path = write(tmp_path, "name: r\nsweep:\n  rate_hz: 10\n" + text)
    assert (load_spec(path).trial.runs, load_spec(path, quick=True).trial.runs) == (full, quick)


def test_scalars_become_lists(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "name: s\nsweep:\n  rate_hz: 7\n  payload: image\n"))
    assert spec.sweep.rate_hz == [7.0]
    assert spec.sweep.payload == [("image", 307200)]
    assert spec.sweep.backend == ["native"]  # the embedded default


def test_broken_yaml(tmp_path: Path) -> None:
    assert messages(tmp_path, "name: x\nsweep: [\n") == [
        "F:3: not valid YAML: expected the node content, but found '<stream end>'"
    ]


def test_empty_file(tmp_path: Path) -> None:
    assert messages(tmp_path, "") == ["F:1: the file is empty; a spec file is a YAML mapping"]


def test_not_a_mapping(tmp_path: Path) -> None:
    assert messages(tmp_path, "- 1\n- 2\n") == [
        "F:1: a spec must be a mapping with at least name and sweep"
    ]


def test_unknown_field_suggests_nearest(tmp_path: Path) -> None:
    assert messages(tmp_path, "name: x\nsweep:\n  rate_hz: 1\n  paylod: text\n") == [
        "F:4: sweep.paylod: unknown field; did you mean 'payload'? "
        "allowed fields here: backend, rate_hz, rate_factor, payload, pairs, hosts, link, cpu, "
        "workload, listeners, chain_length, ack, reliability, history, durability, stack, workers, "
        "deque_len, kills, kill_method, kill_target, kill_interval_ms, dispatch, priority, pin, "
        "cpu_load, traffic, graph"
    ]


def test_unknown_top_level_field(tmp_path: Path) -> None:
    msgs = messages(tmp_path, "name: x\nsweep:\n  rate_hz: 1\ntrials:\n  runs: 2\n")
    assert msgs == [
        "F:4: trials: unknown field; did you mean 'trial'? "
        "allowed fields here: name, description, sweep, trial, seed, replay, replay_topics, "
        "message_types, verdict, env"
    ]


def test_negative_rate(tmp_path: Path) -> None:
    assert messages(tmp_path, "name: x\nsweep:\n  rate_hz: [10,\n    -5]\n") == [
        "F:4: sweep.rate_hz[1]: Input should be greater than 0 (got -5); "
        "allowed: a rate in Hz above 0 and at most 1,000,000, or a list of them"
    ]


def test_latency_ceiling_must_be_positive(tmp_path: Path) -> None:
    spec = "name: x\nsweep:\n  rate_hz: 10\nverdict:\n  max_p99_us: 0\n"
    assert messages(tmp_path, spec) == [
        "F:5: verdict.max_p99_us: Input should be greater than 0; "
        "allowed: microseconds above 0 (a ceiling on the p99 latency), or absent"
    ]


def test_rate_above_one_megahertz(tmp_path: Path) -> None:
    msgs = messages(tmp_path, "name: x\nsweep:\n  rate_hz: 2000000\n")
    assert msgs[0].startswith(
        "F:3: sweep.rate_hz[0]: Input should be less than or equal to 1000000"
    )


def test_unknown_backend(tmp_path: Path) -> None:
    assert messages(tmp_path, "name: x\nsweep:\n  rate_hz: 1\n  backend: ros2\n") == [
        "F:4: sweep.backend: unknown backend 'ros2'; "
        "allowed: one of native, native-proc, zenoh, ros1, dds, or a list of them"
    ]


def test_bad_payloads(tmp_path: Path) -> None:
    allowed = "one of text, laserscan, image, a size from 1 B to 4 MB such as 256, "
    allowed += "'256B', '4KB', '4MB', or a message type of message_types (package/msg/Type, "
    allowed += "or {type: package/msg/Type, size: 64KB})"
    assert messages(tmp_path, "name: x\nsweep:\n  rate_hz: 1\n  payload: [foo, 5MB]\n") == [
        f"F:4: sweep.payload[0]: 'foo' is not a payload; allowed: {allowed}",
        "F:4: sweep.payload[1]: '5MB' is 5242880 bytes; allowed: sizes from 1 B to 4 MB",
    ]


def test_several_errors_in_file_order(tmp_path: Path) -> None:
    text = "name: 'bad name'\nsweep:\n  rate_hz: 1\ntrial:\n  runs: 0\n  mode: fast\n"
    assert messages(tmp_path, text) == [
        "F:1: name: String should match pattern '^[A-Za-z0-9_.-]+$' (got 'bad name'); "
        "allowed: a short name of letters, digits, '.', '_' or '-'",
        "F:5: trial.runs: Input should be greater than or equal to 1 (got 0); "
        "allowed: a whole number of repetitions from 1 to 1000",
        "F:6: trial.mode: Input should be 'standard' or 'thesis_compat' (got 'fast'); "
        "allowed: standard or thesis_compat",
    ]


def test_missing_required(tmp_path: Path) -> None:
    assert messages(tmp_path, "name: x\nsweep:\n  pairs: 2\n") == [
        "F:2: sweep.rate_hz: required field is missing; "
        "expected a rate in Hz above 0 and at most 1,000,000, or a list of them "
        "(or a stream to replay: replay)"
    ]


def test_wrong_type(tmp_path: Path) -> None:
    assert messages(tmp_path, "name: x\nsweep:\n  rate_hz: 1\ntrial:\n  warmup: lots\n") == [
        "F:5: trial.warmup: Input should be a valid integer (got 'lots'); "
        "allowed: messages sent and discarded before measuring, 0 to 100,000"
    ]


@pytest.mark.parametrize("value", ["true", "'10'", ".nan", ".inf"])
def test_a_rate_is_a_finite_number_never_coerced(tmp_path: Path, value: str) -> None:
    (message,) = messages(tmp_path, f"name: x\nsweep:\n  rate_hz: {value}\n")
    assert message.startswith("F:3: sweep.rate_hz[0]: Input should be a ")
    assert message.endswith(
        "allowed: a rate in Hz above 0 and at most 1,000,000, or a list of them"
    )


def test_duplicate_key(tmp_path: Path) -> None:
    assert messages(tmp_path, "name: x\nname: y\nsweep:\n  rate_hz: 1\n") == [
        "F:2: name: duplicate key"
    ]


def test_broken_quick_section_reported_even_without_quick(tmp_path: Path) -> None:
    text = "name: x\nsweep:\n  rate_hz: 1\nquick:\n  trial:\n    messagez: 5\n"
    assert messages(tmp_path, text) == [
        "F:6: quick.trial.messagez: unknown field; did you mean 'messages'? allowed fields "
        "here: runs, messages, duration_s, warmup, drain_s, pause_s, publisher_queue, "
        "subscriber_queue, mode, order, match_timeout_s, loop"
    ]


def test_quick_not_a_mapping(tmp_path: Path) -> None:
    assert messages(tmp_path, "name: x\nsweep:\n  rate_hz: 1\nquick: yes\n") == [
        "F:4: quick: must be a mapping of overrides"
    ]


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such spec file"):
        load_spec(tmp_path / "nope.yaml")


def test_shipped_specs_are_valid() -> None:
    root = Path(__file__).resolve().parents[2] / "experiments"
    specs = sorted(root.glob("*.yaml"))
    assert specs
    for path in specs:
        load_spec(path)
        load_spec(path, quick=True)


def test_unknown_link_profile_suggests(tmp_path: Path) -> None:
    text = "name: s\nsweep:\n  rate_hz: 7\n  hosts: 2\n  link: [ethernet, wfi]\n"
    with pytest.raises(SpecError) as e:
        load_spec(write(tmp_path, text))
    assert "spec.yaml:5: sweep.link: unknown link profile 'wfi'; " in str(e.value)
    assert "did you mean 'wifi'?" in str(e.value)


def test_more_hosts_than_addresses(tmp_path: Path) -> None:
    text = "name: s\nsweep:\n  rate_hz: 7\n  hosts: 8\nenv:\n  subnet: 10.231.0.0/30\n"
    with pytest.raises(SpecError, match=r"spec.yaml:4: sweep.hosts: 8 hosts do not fit in 10.231"):
        load_spec(write(tmp_path, text))


def test_missing_profiles_file(tmp_path: Path) -> None:
    text = "name: s\nsweep:\n  rate_hz: 7\n  link: lab\nenv:\n  profiles: nope.yaml\n"
    with pytest.raises(SpecError, match=r"spec.yaml:6: env.profiles: .*nope.yaml: no such file"):
        load_spec(write(tmp_path, text))


def test_custom_profile_from_file(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("profiles:\n  lab:\n    base: wifi\n    delay_ms: 5\n")
    text = "name: s\nsweep:\n  rate_hz: 7\n  link: lab\nenv:\n  profiles: p.yaml\n"
    assert load_spec(write(tmp_path, text)).sweep.link == ["lab"]


def test_bad_workload(tmp_path: Path) -> None:
    assert messages(tmp_path, "name: x\nsweep:\n  rate_hz: 1\n  workload: [echo, star]\n") == [
        "F:4: sweep.workload[1]: Input should be 'echo', 'fanout', 'ping', 'chain', "
        "'facetrack' or 'graph' (got 'star'); allowed: echo, fanout, ping, chain, facetrack or "
        "graph, or a list of them"
    ]


def test_listener_and_chain_bounds(tmp_path: Path) -> None:
    text = "name: x\nsweep:\n  rate_hz: 1\n  workload: [fanout, chain]\n"
    text += "  listeners: [0, 5]\n  chain_length: 1\n"
    assert messages(tmp_path, text) == [
        "F:5: sweep.listeners[0]: Input should be greater than or equal to 1 (got 0); "
        "allowed: listeners of a fanout, 1 to 32, or a list of them",
        "F:6: sweep.chain_length[0]: Input should be greater than or equal to 2 (got 1); "
        "allowed: nodes in a chain (A -> B -> ...), 2 to 16, or a list",
    ]


@pytest.mark.parametrize(
    ("extra", "line", "field", "users"),
    [
        ("  listeners: [1, 5]\n", 5, "listeners", "fanout"),
        ("  chain_length: 3\n", 5, "chain_length", "chain"),
        ("  ack: [false, true]\n", 5, "ack", "fanout, ping or chain"),
    ],
)
def test_axis_without_its_workload(
    tmp_path: Path, extra: str, line: int, field: str, users: str
) -> None:
    text = "name: x\nsweep:\n  rate_hz: 1\n  workload: echo\n" + extra
    assert messages(tmp_path, text) == [
        f"F:{line}: sweep.{field}: applies to workload {users} only, but sweep.workload is "
        f"[echo]; add {users} to sweep.workload or remove sweep.{field}"
    ]


def test_pairs_without_echo(tmp_path: Path) -> None:
    text = "name: x\nsweep:\n  rate_hz: 1\n  pairs: 4\n  workload: [ping, chain]\n"
    assert messages(tmp_path, text) == [
        "F:4: sweep.pairs: applies to workload echo only, but sweep.workload is "
        "[ping, chain]; add echo to sweep.workload or remove sweep.pairs"
    ]


def test_workload_problem_in_quick_section(tmp_path: Path) -> None:
    text = "name: x\nsweep:\n  rate_hz: 1\n  workload: fanout\nquick:\n  sweep:\n"
    text += "    workload: ping\n    listeners: 3\n"
    msgs = messages(tmp_path, text)
    assert msgs == [
        "F:8: sweep.listeners: applies to workload fanout only, but sweep.workload is "
        "[ping]; add fanout to sweep.workload or remove sweep.listeners"
    ]


def test_network_load_needs_two_hosts(tmp_path: Path) -> None:
    text = "name: s\nsweep:\n  rate_hz: 7\nenv:\n  load_net_mbit: 5\n"
    with pytest.raises(SpecError, match=r"spec.yaml:5: env.load_net_mbit: a network load runs"):
        load_spec(write(tmp_path, text))


E5 = Path(__file__).parents[2] / "experiments" / "thesis-e5.yaml"


def test_thesis_e5_replays_the_generated_stata_streams() -> None:
    """Its rate factors scale the streams' 50 messages/s (scans 20 Hz + images 30 Hz)."""
    spec = load_spec(E5, quick=True)
    assert spec.replay == "stata" and spec.trial.loop
    assert spec.sweep.rate_hz == [50.0, 100.0]
    ((name, size),) = spec.sweep.payload
    assert name == "stata" and 100_000 < size < 200_000  # 2 scans of ~4 KB per 3 images


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("name: x\nreplay: stata\nsweep:\n  rate_hz: 5\n",
         "F:4: sweep.rate_hz: a replay keeps its recorded timing; speed it up or slow it "
         "down with sweep.rate_factor instead"),
        ("name: x\nsweep:\n  rate_hz: 5\n  rate_factor: 2\n",
         "F:4: sweep.rate_factor: applies with replay only; add replay: or remove it"),
        ("name: x\nreplay: stata\nsweep:\n  payload: image\n",
         "F:4: sweep.payload: a replay sends its recorded messages; remove sweep.payload"),
        ("name: x\nreplay: stata\nsweep:\n  workload: fanout\n",
         "F:2: replay: workloads that replay a stream: echo; sweep.workload is [fanout]"),
        ("name: x\nreplay: no.bag\nsweep:\n  backend: native\n",
         "F:2: replay: D/no.bag: no such bag; expected a ROS 1 bag (.bag), or a rosbag2 "
         "folder (sqlite3 or MCAP) or its .db3/.mcap file"),
    ],
)  # fmt: skip
def test_bad_replays(tmp_path: Path, text: str, message: str) -> None:
    found = messages(tmp_path, text)
    assert [m.replace(str(tmp_path.resolve()), "D") for m in found] == [message]


def test_message_types_size_the_payloads_that_name_them(tmp_path: Path) -> None:
    """.msg paths are relative to the spec and absolute once loaded; a payload naming a
    type gets its sample's CDR size, and trials carry the type whole."""
    pytest.importorskip("rosbags")  # the data extra, which make test installs
    from roboscale.spec.planner import plan

    msgs = Path(__file__).resolve().parents[2] / "examples" / "msgs"
    text = (
        "name: x\nsweep:\n  rate_hz: 10\n  payload: [text, robot_msgs/WheelState,\n"
        "    {type: robot_msgs/msg/WheelState, size: 64KB}]\n"
        f"message_types: {msgs}\ntrial:\n  runs: 1\n"
    )
    spec = load_spec(write(tmp_path, text))
    assert spec.message_types == [str(msgs)]
    (_, small), (name, big) = spec.sweep.payload[1:]
    assert name == "robot_msgs/msg/WheelState@64KB" and 65536 - 64 <= big <= 65536 and small < 1000
    trials = plan(spec)
    kind = trials[2].stream_settings()["kind"]
    assert kind.kind == "custom" and kind.size == big
    assert kind.typed is not None and kind.typed.msgtype == "robot_msgs/msg/WheelState"
    assert trials[0].stream_settings()["kind"] == MessageKind("text", 11)
