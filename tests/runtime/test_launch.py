from __future__ import annotations

import time
from pathlib import Path

import pytest

from roboscale.errors import SpecError, SpecErrors
from roboscale.runtime.executor import Runtime
from roboscale.runtime.launch import format_status, load_launch, load_launch_file, run_launch
from roboscale.runtime.node import Node
from roboscale.runtime.supervisor import Strategy, Supervisor

from .conftest import private


class Talker(Node):
    def on_start(self) -> None:
        pub = self.publisher("/chatter")
        self.timer(float(self.get_param("period_s", 0.01)), lambda: pub.publish(b"hi"))


class Listener(Node):
    def on_start(self) -> None:
        self.subscribe("/chatter", lambda msg: None)


GOOD = f"""\
name: robot
strategy: rest_for_one
intensity: 10
period_s: 1
children:
  - node: talker
    class: {__name__}:Talker
    params: {{period_s: 0.001}}
  - supervisor: listeners
    strategy: one_for_all
    children:
      - node: l1
        class: {__name__}:Listener
        restart: transient
        heartbeat_s: 5
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "robot.yaml"
    path.write_text(text)
    return path


def test_good_launch_file_builds_and_runs_the_tree(rt: Runtime, tmp_path: Path) -> None:
    root = load_launch(write(tmp_path, GOOD), rt)
    assert root.strategy is Strategy.REST_FOR_ONE and root.intensity.max_restarts == 10
    listeners = root.child("listeners")
    assert isinstance(listeners, Supervisor) and listeners.strategy is Strategy.ONE_FOR_ALL
    rt.wait(root.start_async())
    rows = root.status()
    assert [r["path"] for r in rows] == ["/robot/talker", "/robot/listeners", "/robot/listeners/l1"]
    assert all(r["state"] == "running" for r in rows)
    table = format_status(rows)
    assert table.splitlines()[0].split()[:3] == ["path", "kind", "state"]
    rt.wait(root.stop_async())


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (GOOD.replace("strategy: rest_for_one", "strategy: all_for_one"),
         "robot.yaml:2: strategy: 'all_for_one' is not allowed; allowed: one_for_one | "
         "one_for_all | rest_for_one"),
        (GOOD.replace("restart: transient", "restart: sometimes"),
         "robot.yaml:14: children[1].children[0].restart: 'sometimes' is not allowed"),
        (GOOD.replace(":Talker", ":Nope"),
         "robot.yaml:7: children[0].class: " + __name__ + ":Nope is not a subclass"),
        (GOOD.replace(f"{__name__}:Talker", "no_such_pkg.mod:Talker"),
         "robot.yaml:7: children[0].class: cannot import no_such_pkg.mod"),
        (GOOD.replace("    params:", "    parms:"),
         "robot.yaml:8: children[0].parms: unknown field; allowed here: class, deadline_s"),
        (GOOD.replace("node: talker", "node: 9talker"),
         "robot.yaml:6: children[0].node: invalid name '9talker'"),
        (GOOD.replace("intensity: 10", "intensity: -1"),
         "robot.yaml:3: intensity: -1 is not allowed; a whole number >= 0"),
        (GOOD.replace("heartbeat_s: 5", "heartbeat_s: soon"),
         "robot.yaml:15: children[1].children[0].heartbeat_s: 'soon' is not allowed"),
    ],
)  # fmt: skip
def test_launch_errors_name_file_line_and_field(
    rt: Runtime, tmp_path: Path, text: str, expected: str
) -> None:
    with pytest.raises((SpecError, SpecErrors)) as info:
        load_launch(write(tmp_path, text), rt)
    assert expected in str(info.value).replace(str(tmp_path) + "/", "")


def test_all_errors_are_reported_together(rt: Runtime, tmp_path: Path) -> None:
    text = GOOD.replace("strategy: rest_for_one", "strategy: x").replace(
        "period_s: 1", "period_s: 0"
    )
    with pytest.raises(SpecErrors) as info:
        load_launch(write(tmp_path, text), rt)
    assert len(info.value.errors) == 2


def test_child_needs_exactly_one_kind(rt: Runtime, tmp_path: Path) -> None:
    text = "name: r\nchildren:\n  - node: a\n    command: b\n"
    with pytest.raises(
        SpecErrors, match=r"robot.yaml:3: children\[0\]: each child has exactly one"
    ):
        load_launch(write(tmp_path, text), rt)


def test_command_child_needs_argv(rt: Runtime, tmp_path: Path) -> None:
    text = "name: r\nchildren:\n  - command: talker\n"
    with pytest.raises(SpecErrors, match=r"robot.yaml:3: children\[0\].argv: required"):
        load_launch(write(tmp_path, text), rt)


BRIDGED = (
    GOOD
    + """\
bridge:
  listen: [tcp/0.0.0.0:7447]
  export: [/chatter]
"""
)
SECURED = (
    BRIDGED
    + """\
security:
  users_file: users.txt
  access:
    rules:
      - allow: [subscribe]
        topics: [/chatter]
        users: [robot]
"""
)


def line_of(text: str, start: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if line.startswith(start))


def test_a_launch_bridge_beyond_loopback_needs_security(rt: Runtime, tmp_path: Path) -> None:
    with pytest.raises(SpecErrors) as info:
        load_launch_file(write(tmp_path, BRIDGED), rt)
    line = line_of(BRIDGED, "  listen:")  # the endpoint's own line (judged per endpoint)
    expected = f"robot.yaml:{line}: bridge.listen: tcp/0.0.0.0:7447 is beyond"
    assert expected in str(info.value).replace(str(tmp_path) + "/", "")
    private(tmp_path / "users.txt", "robot:secret\n")
    _, bridge = load_launch_file(write(tmp_path, SECURED), rt)
    assert bridge is not None and bridge.exports == ("/chatter",) and bridge.security is not None
    assert bridge.security.users_file == tmp_path / "users.txt"  # beside the launch file
    assert bridge.security.rules[0].users == ("robot",)


@pytest.mark.parametrize(
    ("change", "start", "expected"),
    [
        (("[subscribe]", "[read]"), "  access:",
         "security.access: rules[0]: allow: allowed actions are publish, subscribe"),
        (("users_file: users.txt", "users_file: nobody.txt"), "  users_file:",
         "security.users_file: "),
        (("  export: [/chatter]", "  export: [/chatter]\n  retain: 0"), "  retain:",
         "bridge.retain: must be an integer >= 1"),
        (("  export: [/chatter]", "  export: [/chatter]\n  durable: [/chatter]"), "  durable:",
         "bridge.durable: durable topics need cursor files"),
    ],
)  # fmt: skip
def test_launch_security_errors_name_file_line_and_field(
    rt: Runtime, tmp_path: Path, change: tuple[str, str], start: str, expected: str
) -> None:
    private(tmp_path / "users.txt", "robot:secret\n")
    text = SECURED.replace(*change)
    with pytest.raises(SpecErrors) as info:
        load_launch_file(write(tmp_path, text), rt)
    assert f"robot.yaml:{line_of(text, start)}: {expected}" in str(info.value).replace(
        str(tmp_path) + "/", ""
    )


@pytest.mark.zenoh
def test_run_launch_opens_the_secured_bridge_after_the_tree(zenoh: None, tmp_path: Path) -> None:
    import json

    import zenoh as z

    from roboscale.backends.base import free_port
    from roboscale.runtime.zenoh_config import zenoh_config, zenoh_settings

    private(tmp_path / "users.txt", "robot:secret\n")
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    text = SECURED.replace("tcp/0.0.0.0:7447", endpoint)
    login = ("transport/auth/usrpwd", json.dumps({"user": "robot", "password": "secret"}))

    def read_one_sample() -> int:
        session = z.open(zenoh_config([*zenoh_settings([], [endpoint]), login]))
        try:
            sub = session.declare_subscriber("rs/chatter", z.handlers.FifoChannel(16))
            deadline = time.monotonic() + 20.0  # the talker publishes every millisecond
            while (sample := sub.try_recv()) is None and time.monotonic() < deadline:
                time.sleep(0.005)
            return 0 if sample is not None and sample.payload.to_bytes() == b"hi" else 3
        finally:
            session.close()

    async def session(rt: Runtime, root: Supervisor) -> int:
        return await rt.loop.run_in_executor(None, read_one_sample)

    assert run_launch(write(tmp_path, text), session=session) == 0
