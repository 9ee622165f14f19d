from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from roboscale.errors import SpecError, SpecErrors
from roboscale.runtime.executor import Runtime
from roboscale.runtime.launch import format_status, load_launch, load_launch_file, run_launch
from roboscale.runtime.launchspec import read_launch
from roboscale.runtime.node import Node
from roboscale.runtime.supervisor import Strategy, Supervisor, SupervisorRecipe

from .conftest import private


class Talker(Node):
    def on_start(self) -> None:
        pub = self.publisher("/chatter")
        self.timer(float(self.get_param("period_s", 0.01)), lambda: pub.publish(b"hi"))


class CmdReader(Node):
    def on_start(self) -> None:
        self.subscribe("/cmd", lambda msg: None, durable=True)


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
    listeners = root.children[1].recipe  # the tree is data until it starts
    assert isinstance(listeners, SupervisorRecipe) and listeners.strategy is Strategy.ONE_FOR_ALL
    rt.wait(root.start_async())
    assert isinstance(root.child("listeners"), Supervisor)
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
         "robot.yaml:2: strategy: Input should be 'one_for_one', 'one_for_all' or "
         "'rest_for_one' (got 'all_for_one'); allowed: one_for_one | one_for_all | rest_for_one"),
        (GOOD.replace("restart: transient", "restart: sometimes"),
         "robot.yaml:14: children[1].children[0].restart: Input should be 'permanent', "
         "'transient' or 'temporary' (got 'sometimes')"),
        (GOOD.replace(":Talker", ":Nope"),
         "robot.yaml:7: children[0].class: " + __name__ + ":Nope is not a subclass"),
        (GOOD.replace(f"{__name__}:Talker", "no_such_pkg.mod:Talker"),
         "robot.yaml:7: children[0].class: cannot import no_such_pkg.mod"),
        (GOOD.replace("    params:", "    parms:"),
         "robot.yaml:8: children[0].parms: unknown field; did you mean 'params'? allowed "
         "fields here: restart, shutdown_s, restart_delay_s, required, node, class, params"),
        (GOOD.replace("node: talker", "node: 9talker"),
         "robot.yaml:6: children[0].node: invalid name '9talker'"),
        (GOOD.replace("intensity: 10", "intensity: -1"),
         "robot.yaml:3: intensity: Input should be greater than or equal to 0 (got -1); "
         "allowed: a whole number >= 0"),
        (GOOD.replace("heartbeat_s: 5", "heartbeat_s: soon"),
         "robot.yaml:15: children[1].children[0].heartbeat_s: Input should be a valid number "
         "(got 'soon'); allowed: a number of seconds"),
    ],
)  # fmt: skip
def test_launch_errors_name_file_line_and_field(
    rt: Runtime, tmp_path: Path, text: str, expected: str
) -> None:
    with pytest.raises((SpecError, SpecErrors)) as info:
        load_launch(write(tmp_path, text), rt)
    assert expected in str(info.value).replace(str(tmp_path) + "/", "")


def test_a_zygote_that_cannot_preload_is_an_error_at_its_line(rt: Runtime, tmp_path: Path) -> None:
    """Not a traceback (exit 1): the module named, at `zygote.preload`'s line, exit 2."""
    text = (
        "name: r\nzygote:\n  preload: [no_such_module_of_yours]\nchildren:\n"
        "  - process: a\n    target: no_such_module_of_yours:main\n    standby: true\n"
    )
    with pytest.raises(SpecError) as info:
        load_launch(write(tmp_path, text), rt)
    assert (
        str(info.value)
        .replace(str(tmp_path) + "/", "")
        .startswith(
            "robot.yaml:3: zygote.preload: zygote did not start: preloading "
            "'no_such_module_of_yours' failed: No module named 'no_such_module_of_yours'; "
            "allowed: modules importable here"
        )
    ), info.value


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
        (("  export: [/chatter]", "  export: [/chatter]\n  import: [/cmd]\n  durable: [/cmd]"),
         "  durable:", "bridge.durable: durable import /cmd needs a cursor file: add cursors: "
         "{/cmd: cmd.cursor}"),
        (("  export: [/chatter]", "  export: [/chatter]\n  transport: fast"), "  transport:",
         "bridge.transport: 'fast' is not allowed: allowed are queued, lowlatency"),
        (("  export: [/chatter]", "  export: [/chatter]\n  transport: lowlatency\n"
          "  max_payload: 60000"), "  max_payload:",
         "bridge.max_payload: a number of bytes from 1 to 48000 with transport: lowlatency"),
    ],
)  # fmt: skip
def test_launch_security_errors_name_file_line_and_field(
    rt: Runtime, tmp_path: Path, change: tuple[str, str], start: str, expected: str
) -> None:
    private(tmp_path / "users.txt", "robot:secret\n")
    text = SECURED.replace(*change)
    with pytest.raises(SpecErrors) as info:
        read_launch(write(tmp_path, text))
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


TARGETS = """
import asyncio
import time

def idle(config, ready):
    ready()
    time.sleep(config.get("sleep", 60))
"""
FEATURES = """\
name: robot
intensity: 10
zygote: {{preload: [json]}}
children:
  - node: talker
    class: {module}:Talker
  - node: reader
    class: {module}:CmdReader
  - process: worker
    target: launch_targets:idle
    watchdog: {{heartbeat_file: {beat}, heartbeat_s: 0.5, grace_s: 0.5}}
bridge:
  listen: [{endpoint}]
  export: [/chatter]
  import: [/cmd]
  durable: [/chatter, /cmd]
cursors: {{/cmd: cmd.cursor}}
"""


@pytest.mark.zenoh
def test_zygote_process_watchdog_and_durable_bridge_from_a_launch_file(
    zenoh: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from roboscale.backends.base import free_port
    from roboscale.runtime.events import SupervisionEvent
    from roboscale.runtime.process import ProcessNode
    from roboscale.runtime.watchdog import WatchedChild

    (tmp_path / "launch_targets.py").write_text(TARGETS)
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}:{Path(__file__).parents[2] / 'src'}")
    text = FEATURES.format(
        module=__name__, beat=tmp_path / "beat", endpoint=f"tcp/127.0.0.1:{free_port()}"
    )
    events: list[SupervisionEvent] = []
    seen: dict[str, object] = {}

    async def session(rt: Runtime, root: Supervisor) -> int:
        rt.subscribers.append(events.append)
        worker = root.child("worker")
        assert isinstance(worker, WatchedChild) and isinstance(worker.inner, ProcessNode)
        seen["via"] = worker.inner.started_via
        while not any(e.kind == "restarted" and e.child == "worker" for e in events):
            await asyncio.sleep(0.02)
        seen["reason"] = next(e.reason for e in events if e.kind == "exited")
        return 0

    assert run_launch(write(tmp_path, text), session=session) == 0
    assert seen == {"via": "zygote", "reason": "hung"}
    assert (tmp_path / "cmd.cursor").exists()  # the durable import's cursor, beside the file


REMOTE = """\
name: robot
children:
  - remote: camera
    node_path: /robot/camera
    ready_timeout_s: 20
bridge:
  listen: [{endpoint}]
"""


@pytest.mark.zenoh
def test_a_remote_child_from_a_launch_file_is_seen_over_liveliness(
    zenoh: None, tmp_path: Path
) -> None:
    from roboscale.backends.base import free_port

    from .test_durable_remote import spawn, stop, wait_ready

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    node = spawn("alive_node.py", endpoint, "/robot/camera")
    alive: list[bool] = []

    async def session(rt: Runtime, root: Supervisor) -> int:
        alive.append(root.child("camera").alive())
        return 0

    try:
        wait_ready(node)
        assert run_launch(write(tmp_path, REMOTE.format(endpoint=endpoint)), session=session) == 0
    finally:
        stop(node)
    assert alive == [True]


def test_a_launch_removes_the_shared_memory_segments_no_process_holds(tmp_path: Path) -> None:
    """A killed process node leaves its Zenoh pools in /dev/shm; the launch's end removes
    what no live process holds, and says so, but never a segment a process still maps."""
    import fcntl
    import json
    import os
    import uuid

    from roboscale.runtime.zenoh_config import SHM_DIR

    tag = uuid.uuid4().hex
    orphan, held = SHM_DIR / f"rs-test-{tag}-orphan.zenoh", SHM_DIR / f"rs-test-{tag}-held.zenoh"
    for path in (orphan, held):
        path.write_bytes(b"\0" * 64)
        path.chmod(0o600)
    holder = os.open(held, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_SH)  # what every process mapping a segment holds
    events = tmp_path / "events.jsonl"

    async def session(rt: Runtime, root: Supervisor) -> int:
        return 0

    try:
        assert run_launch(write(tmp_path, GOOD), events=events, session=session) == 0
        assert not orphan.exists() and held.exists()
    finally:
        os.close(holder)
        for path in (orphan, held):
            path.unlink(missing_ok=True)
    kinds = [json.loads(line)["kind"] for line in events.read_text().splitlines()]
    assert "shared_memory_swept" in kinds
