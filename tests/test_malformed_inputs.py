"""Malformed inputs of the surfaces added since the first corpus (tests/test_malformed.py):
graph files, payload sizes, QoS axes, face-tracker sweeps, host inventories and `--host`,
launch names, and `roboscale status` files. Each runs the real CLI in this process (the
helpers of test_malformed.py: an alarm turns a hang into a failure) and must give exit
code 2, an `error:` naming the file, line and field with what is allowed, and no
traceback. Each case is a file (or files) written here from a table.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.test_malformed import check, run

# -- graph files, through the spec that names them (bench --dry-run) --------------------------
GOOD_GRAPH = """\
version: 1
nodes:
  lidar:
    publish: {topic: scan, rate_hz: 20, payload: laserscan}
  filter:
    relay: {input: scan, output: points, payload: 4KB, work_ms: 1}
  sink:
    subscribe: [points]
paths:
  scan_path: [lidar, filter, sink]
"""
SPEC_OF_GRAPH = "name: g\nsweep:\n  workload: graph\n  graph: {graph}\n  rate_hz: 10\n"
DIGITS = "9" * 400  # in a quoted string; unquoted, the YAML reader caps numbers at 64 characters
NUMBER = "9" * 60  # unquoted: an integer far beyond every range, within the reader's cap


def _graph(old: str, new: str) -> str:
    assert old in GOOD_GRAPH, old
    return GOOD_GRAPH.replace(old, new)


# (id, graph text, the fragments of the error after the graph file's path)
GRAPHS: list[tuple[str, str, list[str]]] = [
    ("path-step-a-list", _graph("[lidar, filter, sink]", "[lidar, [filter], sink]"),
     [":10: paths.scan_path[1]: a step is a node's name; got ['filter']"]),
    ("path-step-a-mapping", _graph("[lidar, filter, sink]", "[lidar, {a: 1}, sink]"),
     [":10: paths.scan_path[1]: a step is a node's name"]),
    ("path-step-a-number", _graph("[lidar, filter, sink]", "[lidar, 5, sink]"),
     [":10: paths.scan_path[1]: a step is a node's name; got 5"]),
    ("path-name-newline", _graph("  scan_path:", '  "scan_path\\n":'),
     [":10: paths.scan_path\\n: a path name", "got 'scan_path\\n'"]),
    ("path-steps-a-string", _graph("[lidar, filter, sink]", "lidar"),
     [":10: paths.scan_path: a list of at least 2 node names"]),
    ("graph-name-newline", 'name: "g\\n"\n' + GOOD_GRAPH,
     [":1: name: a short name of letters, digits", "got 'g\\n'"]),
    ("graph-name-a-list", "name: [g]\n" + GOOD_GRAPH, [":1: name: a short name", "got ['g']"]),
    ("node-name-newline", _graph("  filter:\n", '  "filter\\n":\n'),
     [":5: nodes.filter\\n: a node name", "got 'filter\\n'"]),
    ("node-name-too-long", _graph("  sink:\n", f"  {'s' * 65}:\n"),
     [":7: nodes.sssss", "a node name: a letter or _, then up to 63"]),
    ("topic-newline", _graph("{topic: scan,", '{topic: "scan\\n",'),
     [":4: nodes.lidar.publish[0].topic: a topic name", "got 'scan\\n'"]),
    ("subscribe-newline", _graph("subscribe: [points]", 'subscribe: ["points\\n"]'),
     [":8: nodes.sink.subscribe[0]: a topic name", "got 'points\\n'"]),
    ("relay-input-newline", _graph("input: scan,", 'input: "scan\\n",'),
     [":6: nodes.filter.relay[0].input: a topic name"]),
    ("topic-empty-segment", _graph("output: points,", "output: a//points,"),
     [":6: nodes.filter.relay[0].output: a topic name", "no empty segment", "got 'a//points'"]),
    ("topic-trailing-slash", _graph("{topic: scan,", "{topic: scan/,"),
     [":4: nodes.lidar.publish[0].topic: a topic name", "no / at the end", "got 'scan/'"]),
    ("topic-leading-slash", _graph("{topic: scan,", "{topic: /scan,"),
     [":4: nodes.lidar.publish[0].topic: a topic name", "got '/scan'"]),
    ("topic-too-long", _graph("{topic: scan,", "{topic: " + "/".join(["seg"] * 40) + ","),
     [":4: nodes.lidar.publish[0].topic: a topic name: up to 128 characters"]),
    ("payload-hundreds-of-digits", _graph("payload: 4KB", f"payload: '{DIGITS}'"),
     [":6: nodes.filter.relay[0].payload:", "(402 characters) is not a size",
      "allowed: sizes from 1 B to 4 MB"]),
    ("payload-hundreds-of-digits-kb", _graph("payload: 4KB", f"payload: '{DIGITS}KB'"),
     [":6: nodes.filter.relay[0].payload:", "is not a size"]),
    ("payload-huge-integer", _graph("payload: 4KB", f"payload: {NUMBER}"),
     [":6: nodes.filter.relay[0].payload:", "a number of 60 digits is far more than 4 MB"]),
    ("payload-fraction-of-a-byte", _graph("payload: 4KB", "payload: 1.5B"),
     [":6: nodes.filter.relay[0].payload: '1.5B' is 1.5 bytes; allowed: a whole number"]),
    ("payload-other-digits", _graph("payload: 4KB", "payload: ٤KB"),
     [":6: nodes.filter.relay[0].payload: '٤KB' is not a payload; allowed"]),
    ("payload-zero", _graph("payload: 4KB", "payload: 0"),
     [":6: nodes.filter.relay[0].payload: 0 is 0 bytes; allowed: sizes from 1 B"]),
    ("rate-overflows-to-inf", _graph("rate_hz: 20,", "rate_hz: 1e400,"),
     [":4: nodes.lidar.publish[0].rate_hz: messages per second, a number from 0.1 to 10000"]),
    ("rate-sixty-digits", _graph("rate_hz: 20,", f"rate_hz: {NUMBER},"),
     [":4: nodes.lidar.publish[0].rate_hz: messages per second", f"got {NUMBER}"]),
    ("host-sixty-digits", _graph("  sink:\n", f"  sink:\n    host: {NUMBER}\n"),
     [":8: nodes.sink.host: a host index from 0 to 63", f"got {NUMBER}"]),
    ("work-negative", _graph("work_ms: 1", "work_ms: -1"),
     [":6: nodes.filter.relay[0].work_ms: processing time per message in ms, a number from 0"]),
    ("work-text", _graph("work_ms: 1", "work_ms: lots"),
     [":6: nodes.filter.relay[0].work_ms:", "got 'lots'"]),
    ("unknown-field-number-like", _graph("  sink:\n", "  sink:\n    '5': 1\n"),
     [":8: nodes.sink.5: unknown field; allowed: host, publish"]),
    ("replay-bag-nul", _graph("{topic: scan, rate_hz: 20, payload: laserscan}",
                              '{topic: scan, replay: {bag: "a\\0b", topic: x}}'),
     [":4: nodes.lidar.publish[0].replay.bag: stata", "got 'a\\x00b'"]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in GRAPHS], ids=[c[0] for c in GRAPHS])
def test_graph_file(tmp_path: Path, text: str, expected: list[str]) -> None:
    graph = tmp_path / "g.yaml"
    graph.write_text(text)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC_OF_GRAPH.format(graph="g.yaml"))
    check(["bench", str(spec), "--dry-run"], str(graph) + expected[0], *expected[1:])


def test_the_good_graph_loads(tmp_path: Path) -> None:
    (tmp_path / "g.yaml").write_text(GOOD_GRAPH)
    (tmp_path / "spec.yaml").write_text(SPEC_OF_GRAPH.format(graph="g.yaml"))
    code, err = run(["bench", str(tmp_path / "spec.yaml"), "--dry-run"])
    assert code == 0, err


def test_graph_outputs_that_would_stop_early(tmp_path: Path) -> None:
    """A trial of (messages + warmup) / rate_hz seconds: lidar's 20 Hz scan would send more
    than a graph output's 200,000 messages, so it would stop early, in silence."""
    (tmp_path / "g.yaml").write_text(GOOD_GRAPH)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC_OF_GRAPH.format(graph="g.yaml").replace("rate_hz: 10", "rate_hz: 1")
                    + "trial:\n  messages: 10000\n")  # fmt: skip
    from roboscale.spec.graphfile import MAX_OUTPUT_MESSAGES
    from roboscale.workloads.graph import MAX_MESSAGES

    assert MAX_OUTPUT_MESSAGES == MAX_MESSAGES  # the spec's bound is the workload's
    expected = f"{spec}:7: trial.messages: a trial of 10,050 s at rate_hz 1: lidar's scan (20 Hz"
    check(
        ["bench", str(spec), "--dry-run"], expected, "would send 201,000 messages; at most 200,000"
    )


@pytest.mark.parametrize(
    ("given", "expected"),
    [('"g\\0.yaml"', "sweep.graph[0]: a graph file's path, relative to the spec; got "
      "'g\\x00.yaml'"),
     ('""', "sweep.graph[0]: a graph file's path, relative to the spec; got ''")],
    ids=["nul", "empty"],
)  # fmt: skip
def test_graph_path_in_the_spec(tmp_path: Path, given: str, expected: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC_OF_GRAPH.format(graph=given))
    check(["bench", str(spec), "--dry-run"], f"{spec}:4: {expected}")


# -- specs: payload sizes, QoS axes, face-tracker sweeps (bench --dry-run) --------------------
def _spec(sweep: str, rest: str = "") -> str:
    return f"name: s\nsweep:\n  rate_hz: 10\n{sweep}{rest}"


FACE = "  workload: facetrack\n"
SPECS: list[tuple[str, str, list[str]]] = [
    ("payload-hundreds-of-digits", _spec(f"  payload: '{DIGITS}'\n"),
     [":4: sweep.payload[0]:", "is not a size; allowed: sizes from 1 B to 4 MB"]),
    ("payload-huge-integer", _spec(f"  payload: {NUMBER}\n"),
     [":4: sweep.payload[0]:", "is far more than 4 MB"]),
    ("payload-fraction-of-a-byte", _spec("  payload: [4KB, 2.5B]\n"),
     [":4: sweep.payload[1]: '2.5B' is 2.5 bytes; allowed: a whole number of bytes"]),
    ("history-newline-after", _spec("  backend: dds\n  history: \"keep_all\\n\"\n"),
     [":5: sweep.history: history 'keep_all\\n': allowed keep_all, keep_last"]),
    ("history-newline-inside", _spec("  backend: dds\n  history: \"keep_last\\n5\"\n"),
     [":5: sweep.history: history 'keep_last\\n5': allowed"]),
    ("history-other-digits", _spec("  backend: dds\n  history: keep_last ²\n"),
     [":5: sweep.history: history 'keep_last ²': allowed", "keep_last N with N from 1"]),
    ("history-thousands-of-digits", _spec(f"  backend: dds\n  history: keep_last {'1' * 5000}\n"),
     [":5: sweep.history: history 'keep_last 111", "N from 1 to 1,000,000"]),
    ("history-leading-zeros", _spec("  backend: dds\n  history: keep_last 007\n"),
     [":5: sweep.history: history 'keep_last 007': allowed"]),
    ("history-depth-zero", _spec("  backend: dds\n  history: keep_last 0\n"),
     [":5: sweep.history: history 'keep_last 0': allowed"]),
    ("history-depth-too-deep", _spec("  backend: dds\n  history: keep_last 1000001\n"),
     [":5: sweep.history: history 'keep_last 1000001': allowed"]),
    ("history-a-number", _spec("  backend: dds\n  history: 5\n"),
     [":5: sweep.history[0]: Input should be a valid string"]),
    ("reliability-newline", _spec("  backend: dds\n  reliability: \"reliable\\n\"\n"),
     [":5: sweep.reliability: reliability 'reliable\\n': allowed reliable or best_effort"]),
    ("durability-a-mapping", _spec("  backend: dds\n  durability: {a: 1}\n"),
     [":5: sweep.durability[0]: Input should be a valid string"]),
    ("best-effort-on-native", _spec("  reliability: best_effort\n"),
     [":4: sweep.reliability: backend 'native' cannot honour reliability best_effort",
      "backends that honour best_effort: dds"]),
    ("transient-local-on-zenoh", _spec("  backend: zenoh\n  durability: transient_local\n"),
     [":5: sweep.durability: backend 'zenoh' cannot honour durability transient_local"]),
    ("keep-last-on-ros1", _spec("  backend: [dds, ros1]\n  history: keep_last 5\n"),
     [":5: sweep.history: backend 'ros1' cannot honour history keep_last 5"]),
    ("qos-on-facetrack", _spec(FACE + "  reliability: reliable\n"),
     [":5: sweep.reliability: workload facetrack runs on its stacks (sweep.stack)",
      "remove sweep.reliability"]),
    ("backend-on-facetrack", _spec(FACE + "  backend: zenoh\n"),
     [":5: sweep.backend: workload facetrack runs on its stacks", "remove sweep.backend"]),
    ("ros1-cannot-crash", _spec(FACE + "  stack: ros1\n  kills: 2\n  kill_method: crash\n"),
     [":7: sweep.kill_method: stack 'ros1' cannot kill by 'crash'; it can: sigterm, sigkill"]),
    ("erlang-cannot-crash",
     _spec(FACE + "  stack: [runtime, erlang]\n  kills: [0, 3]\n  kill_method: [sigkill, crash]\n"),
     [":7: sweep.kill_method[1]: stack 'erlang' cannot kill by 'crash'"]),
    ("runtime-proc-cannot-crash",
     _spec(FACE + "  stack: runtime-proc\n  kills: 1\n  kill_method: crash\n"),
     [":7: sweep.kill_method: stack 'runtime-proc' cannot kill by 'crash'"]),
    ("quick-stack-cannot-crash",
     _spec(FACE + "  stack: runtime\n  kills: 1\n  kill_method: crash\n",
           "quick:\n  sweep:\n    stack: ros1\n"),
     [":7: sweep.kill_method: stack 'ros1' cannot kill by 'crash'"]),
    ("frame-rate-too-high", _spec(FACE).replace("rate_hz: 10", "rate_hz: 5000"),
     [":3: sweep.rate_hz: workload facetrack: the camera runs from 0.1 to 1000 frames per "
      "second; got 5000"]),
    ("frame-rate-too-low", _spec(FACE).replace("rate_hz: 10", "rate_hz: [10, 0.01]"),
     [":3: sweep.rate_hz[1]: workload facetrack: the camera runs from 0.1"]),
    ("frames-too-many", _spec(FACE, "trial:\n  messages: 5000000\n"),
     [":6: trial.messages: workload facetrack: at most 1,000,000 frames a trial"]),
    ("frames-too-many-by-duration",
     _spec(FACE, "trial:\n  duration_s: 3600\n").replace("rate_hz: 10", "rate_hz: 1000"),
     [":6: trial.duration_s: workload facetrack: at most 1,000,000 frames a trial; 3,600,000"]),
    ("facetrack-seed-too-large", _spec(FACE, f"seed: {2**64}\n"),
     [":5: seed: workload facetrack, stack runtime: seed: must be from 0 to "
      "9223372036854775807"]),
    ("facetrack-seed-of-last-run", _spec(FACE, f"seed: {2**63 - 1}\ntrial:\n  runs: 2\n"),
     [":5: seed: workload facetrack, stack runtime: seed:", f"got {2**63}"]),
    ("workers-sixty-digits", _spec(FACE + f"  workers: {NUMBER}\n"),
     [":5: sweep.workers[0]: Input should be less than or equal to 5000"]),
    ("profiles-nul", _spec("  hosts: 2\n", 'env:\n  profiles: "p\\0.yaml"\n'),
     [":6: env.profiles: a file's path, relative to the spec (not empty, no NUL)"]),
    ("inventory-nul", _spec("", 'env:\n  inventory: "i\\0.yaml"\n  machines: [robot]\n'),
     [":5: env.inventory: a file's path, relative to the spec (not empty, no NUL)"]),
    ("inventory-empty", _spec("", 'env:\n  inventory: ""\n  machines: [robot]\n'),
     [":5: env.inventory: a file's path", "(got '')"]),
    ("message-types-nul", _spec("", 'message_types: "m\\0"\n'),
     [":4: message_types[0]: a file's path, relative to the spec (not empty, no NUL)"]),
    ("replay-nul", 'name: s\nsweep: {}\nreplay: "b\\0.bag"\n',
     [":3: replay: a file's path, relative to the spec (not empty, no NUL)"]),
    ("name-newline", 'name: "s\\n"\nsweep:\n  rate_hz: 10\n',
     [":1: name: String should match pattern"]),
    ("link-newline", _spec("  link: \"wifi\\n\"\n"), [":4: sweep.link[0]: String should match"]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "expected"), [c[1:] for c in SPECS], ids=[c[0] for c in SPECS])
def test_spec(tmp_path: Path, text: str, expected: list[str]) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    check(["bench", str(spec), "--dry-run"], str(spec) + expected[0], *expected[1:])


def test_qos_given_with_backend_flag(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(_spec("  backend: dds\n  history: keep_last 5\n"))
    expected = f"{spec}:5: sweep.history: backend 'native' cannot honour history keep_last 5"
    check(["bench", str(spec), "--dry-run", "--backend", "native"], expected)


@pytest.mark.parametrize(
    "sweep",
    [FACE + "  stack: runtime\n  kills: 2\n  kill_method: crash\n",
     FACE + "  stack: ros1\n  kills: 0\n  kill_method: crash\n",  # no kill: no method used
     "  backend: dds\n  history: \"keep_last\\t5\"\n"],
    ids=["runtime-crash", "no-kills", "history-tab"],
)  # fmt: skip
def test_what_a_stack_or_backend_honours_loads(tmp_path: Path, sweep: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(_spec(sweep))
    code, err = run(["bench", str(spec), "--dry-run"])
    assert code == 0, err


# -- host inventories (hosts check; specs naming one) ----------------------------------------
def _key(tmp: Path, mode: int, name: str = "id_test") -> None:
    key = tmp / name
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    key.chmod(mode)


def _fifo(tmp: Path) -> None:
    os.mkfifo(tmp / "id_test")


def _writable_config(tmp: Path) -> None:
    (tmp / "ssh_config").write_text("Host *\n")
    (tmp / "ssh_config").chmod(0o666)


Prepare = Callable[[Path], None]
HOST = "hosts:\n  robot:\n    address: 192.0.2.1\n"


def _nothing(tmp: Path) -> None:
    return None


INVENTORIES: list[tuple[str, str, Prepare, list[str]]] = [
    ("user-newline", HOST + '    user: "pi\\n"\n', _nothing,
     [":4: hosts.robot.user: expected a user name", "(got 'pi\\n')"]),
    ("workdir-newline", HOST + '    workdir: ".rs\\n"\n', _nothing,
     [":4: hosts.robot.workdir: expected a path", "(got '.rs\\n')"]),
    ("workdir-command", HOST + "    workdir: 'x; rm -rf ~'\n", _nothing,
     [":4: hosts.robot.workdir: expected a path"]),
    ("workdir-other-home", HOST + "    workdir: ~bob/rs\n", _nothing,
     [":4: hosts.robot.workdir:", "another user's ~name is not allowed"]),
    ("address-newline", 'hosts:\n  robot:\n    address: "192.0.2.1\\n"\n', _nothing,
     [":3: hosts.robot.address: expected a hostname", "(got '192.0.2.1\\n')"]),
    ("peer-address-newline", HOST + '    peer_address: "10.0.0.2\\n"\n', _nothing,
     [":4: hosts.robot.peer_address: expected the hostname"]),
    ("python-newline", HOST + '    python: "python3\\n"\n', _nothing,
     [":4: hosts.robot.python: expected an interpreter name"]),
    ("host-name-newline", 'hosts:\n  "robot\\n":\n    address: 192.0.2.1\n', _nothing,
     [":2: hosts.robot\n: a host name is a letter"]),
    ("port-sixty-digits", HOST + f"    port: {NUMBER}\n", _nothing,
     [":4: hosts.robot.port: expected a TCP port, 1 to 65535"]),
    ("key-readable-by-everyone", HOST + "    identity_file: id_test\n",
     lambda tmp: _key(tmp, 0o644),
     [":4: hosts.robot.identity_file: the private key", "is readable by others (mode 0644)",
      "chmod 600"]),
    ("key-readable-by-group", HOST + "    identity_file: id_test\n",
     lambda tmp: _key(tmp, 0o640), ["(mode 0640)", "chmod 600"]),
    ("key-a-fifo", HOST + "    identity_file: id_test\n", _fifo,
     [":4: hosts.robot.identity_file:", "is not a regular file"]),
    ("key-a-directory", HOST + "    identity_file: sub\n",
     lambda tmp: (tmp / "sub").mkdir(), [":4: hosts.robot.identity_file:", "not a regular"]),
    ("key-nul", HOST + '    identity_file: "id\\0"\n', _nothing,
     [":4: hosts.robot.identity_file: expected a path to a local file"]),
    ("known-hosts-of-no-user", HOST + "    known_hosts: ~nosuchuser/known_hosts\n", _nothing,
     [":4: hosts.robot.known_hosts: expected a path to a local file; no home directory"]),
    ("ssh-config-writable-by-everyone", HOST + "    ssh_config: ssh_config\n", _writable_config,
     [":4: hosts.robot.ssh_config:", "can be changed by others (mode 0666)", "chmod go-w"]),
]  # fmt: skip


@pytest.mark.parametrize(("text", "prepare", "expected"), [c[1:] for c in INVENTORIES],
                         ids=[c[0] for c in INVENTORIES])  # fmt: skip
def test_inventory(tmp_path: Path, text: str, prepare: Prepare, expected: list[str]) -> None:
    prepare(tmp_path)
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(text)
    check(["hosts", "check", str(inventory)], str(inventory), *expected)


def test_inventory_named_by_a_spec(tmp_path: Path) -> None:
    """A spec's inventory is checked when the spec loads: a world-readable key stops a
    dry run too, before anything connects."""
    _key(tmp_path, 0o644)
    (tmp_path / "inventory.yaml").write_text(HOST + "    identity_file: id_test\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(_spec("", "env:\n  inventory: inventory.yaml\n  machines: [robot]\n"))
    check(["bench", str(spec), "--dry-run"], f"{tmp_path / 'inventory.yaml'}:4: "
          "hosts.robot.identity_file: the private key", "chmod 600")  # fmt: skip


def test_machine_named_with_a_newline(tmp_path: Path) -> None:
    (tmp_path / "inventory.yaml").write_text(HOST)
    spec = tmp_path / "spec.yaml"
    spec.write_text(_spec("", 'env:\n  inventory: inventory.yaml\n  machines: ["robot\\n"]\n'))
    check(["bench", str(spec), "--dry-run"], f"{spec}:6: env.machines[0]: String should match")


@pytest.mark.parametrize(
    ("host", "expected"),
    [("robto", "argument --host: 'robto' is not a host of {inv}; did you mean 'robot'? its "
      "hosts: robot, laptop"),
     ("", "argument --host: '' is not a host of {inv}; its hosts: robot, laptop"),
     ("robot\n", "argument --host: 'robot\\n' is not a host of {inv}")],
    ids=["misspelt", "empty", "newline"],
)  # fmt: skip
def test_mistyped_host(tmp_path: Path, host: str, expected: str) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(HOST + "  laptop:\n    address: 192.0.2.2\n")
    for command in ("check", "install"):
        check(["hosts", command, str(inventory), "--host", host], expected.format(inv=inventory))


# -- names in launch files -----------------------------------------------------------------------
LAUNCH = (
    "name: robot\nchildren:\n  - node: camera\n    class: roboscale.runtime.chaos:FrameSource\n"
)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [("node: camera", 'node: "camera\\n"', ":3: children[0].node: invalid name 'camera\\n'"),
     ("name: robot", 'name: "robot\\n"', ":1: name: invalid name 'robot\\n'")],
    ids=["node-newline", "launch-newline"],
)  # fmt: skip
def test_launch_name(tmp_path: Path, old: str, new: str, expected: str) -> None:
    launch = tmp_path / "robot.yaml"
    launch.write_text(LAUNCH.replace(old, new))
    check(["launch", str(launch)], str(launch) + expected)


# -- roboscale status on status files of the wrong shape --------------------------------------
GOOD_STATUS = {
    "format": 1, "name": "robot", "pid": 1, "started_unix": 1.0, "updated_unix": 2.0,
    "alive": True,
    "rows": [{"path": "robot/camera", "kind": "node", "state": "running", "restarts": 0,
              "delivered": 3, "queued": 0, "dropped": 0, "last_exit": ""}],
    "topics": [{"topic": "/image", "rate_hz": 10.0, "published": 3, "subscribers": 1}],
    "chaos": {"kills": 0, "restarts": 0, "pending": 0},
}  # fmt: skip


def _drop(key: str) -> Callable[[dict[str, object]], object]:
    return lambda doc: doc.pop(key)


STATUSES: list[tuple[str, Callable[[dict[str, object]], object], str]] = [
    ("no-updated", _drop("updated_unix"), "updated_unix: required field is missing"),
    ("no-rows", _drop("rows"), "rows: required field is missing"),
    ("rows-a-mapping", lambda d: d.update(rows={}), "rows: expected list, got {}"),
    ("row-a-string", lambda d: d.update(rows=["x"]), "rows[0]: expected an object, got str"),
    ("row-no-path", lambda d: d["rows"][0].pop("path"),  # type: ignore[index]
     "rows[0].path: required field is missing"),
    ("row-restarts-text", lambda d: d["rows"][0].update(restarts="1"),  # type: ignore[index]
     "rows[0].restarts: expected int, got '1'"),
    ("topic-rate-text", lambda d: d["topics"][0].update(rate_hz="x"),  # type: ignore[index]
     "topics[0].rate_hz: expected int or float, got 'x'"),
    ("alive-a-number", lambda d: d.update(alive=1), "alive: expected bool, got 1"),
    ("pid-a-bool", lambda d: d.update(pid=True), "pid: expected int, got True"),
    ("chaos-a-list", lambda d: d.update(chaos=[]), "chaos: expected an object, got list"),
    ("chaos-no-kills", lambda d: d["chaos"].pop("kills"),  # type: ignore[attr-defined]
     "chaos.kills: required field is missing"),
]  # fmt: skip


@pytest.mark.parametrize(("damage", "expected"), [c[1:] for c in STATUSES],
                         ids=[c[0] for c in STATUSES])  # fmt: skip
def test_status_file(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    damage: Callable[[dict[str, object]], object],
    expected: str,
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    folder = tmp_path / "roboscale" / "launch"
    folder.mkdir(parents=True, mode=0o700)
    (tmp_path / "roboscale").chmod(0o700)
    doc = json.loads(json.dumps(GOOD_STATUS))
    damage(doc)
    path = folder / f"robot-{os.getpid()}.json"  # a live pid: this test's own
    path.write_text(json.dumps(doc))
    for argv in (["status"], ["status", "--json"], ["status", "robot"]):
        check(argv, f"{path}: not a status file of this roboscale: {expected}")


def test_a_good_status_file_is_shown(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    folder = tmp_path / "roboscale" / "launch"
    folder.mkdir(parents=True, mode=0o700)
    (tmp_path / "roboscale").chmod(0o700)
    (folder / f"robot-{os.getpid()}.json").write_text(json.dumps(GOOD_STATUS))
    code, err = run(["status"])
    assert code == 0, err


def test_the_corpus_counts() -> None:
    cases = len(GRAPHS) + len(SPECS) + len(INVENTORIES) + len(STATUSES)
    assert cases >= 80


# -- special files where a graph file or an inventory was expected ------------------------------
def _special(kind: str) -> Callable[[Path], str]:
    """A FIFO, a directory, a device or an oversize file; its path as the spec names it."""

    def make(tmp: Path) -> str:
        if kind == "fifo":
            os.mkfifo(tmp / "special.yaml")
        elif kind == "directory":
            (tmp / "special.yaml").mkdir()
        elif kind == "oversize":
            (tmp / "special.yaml").write_text("#" * (2 << 20))
        return "/dev/zero" if kind == "device" else str(tmp / "special.yaml")

    return make


SPECIAL_KINDS = {"fifo": "is a FIFO (named pipe)", "directory": "is a directory",
                 "device": "is a character device", "oversize": "bytes; a"}  # fmt: skip


@pytest.mark.parametrize("kind", list(SPECIAL_KINDS))
def test_special_graph_file(tmp_path: Path, kind: str) -> None:
    name = _special(kind)(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC_OF_GRAPH.format(graph=name))
    check(["bench", str(spec), "--dry-run"], name, SPECIAL_KINDS[kind], "graph file")


@pytest.mark.parametrize("kind", list(SPECIAL_KINDS))
def test_special_inventory(tmp_path: Path, kind: str) -> None:
    name = _special(kind)(tmp_path)
    spec = tmp_path / "spec.yaml"
    spec.write_text(_spec("", f"env:\n  inventory: {name}\n  machines: [robot]\n"))
    check(["bench", str(spec), "--dry-run"], name, SPECIAL_KINDS[kind], "host inventory")
    check(["hosts", "check", name], name, SPECIAL_KINDS[kind], "host inventory")


def test_a_stack_given_on_the_command_line_is_checked_too(tmp_path: Path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(_spec(FACE + "  stack: runtime\n  kills: 2\n  kill_method: crash\n"))
    expected = f"{spec} with --stack ros1: sweep.kill_method: stack 'ros1' cannot kill by 'crash'"
    check(["bench", str(spec), "--dry-run", "--stack", "ros1"], expected)
    code, err = run(["bench", str(spec), "--dry-run", "--stack", "runtime"])
    assert code == 0, err
