"""Machine tags become hosts: a ROS 1 node on a `<machine>` elsewhere started there over
real OpenSSH (an sshd on 127.0.0.2, not a local address to roboscale) under the local
supervisor: killed on the host, restarted by its restart type and registered again with
the master; a required node there stops the tree; and each problem with the host (an
unknown host key, a refused key, nothing listening, no env-loader) named at the `<machine>`
line, exit 2.
"""

from __future__ import annotations

import asyncio
import os
import signal
import xmlrpc.client
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import EVENT_TIMEOUT_S
from tests.runtime.sshd_loopback import LoopbackHost, loopback_sshd
from tests.runtime.test_roslaunch_ros1 import LISTENER, QUITTER, TALKER, graph, kinds, wait_for

from roboscale.backends.roslaunch import make_package
from roboscale.cli import main
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.launch import run_launch
from roboscale.runtime.rosremote import SSH_CONFIG_ENV
from roboscale.runtime.supervisor import Supervisor

pytestmark = pytest.mark.ros1

LOADER = """#!/bin/sh
# What a robot's env-loader does: set up ROS, then run what it is given.
export ROS_PACKAGE_PATH='{pkgs}:/usr/share'
export ROS_HOME='{home}'
exec "$@"
"""
LAUNCH = """\
<launch>
  <machine name="arm" address="{address}" ssh-port="{port}" env-loader="{loader}"/>
  <group ns="robot">
    <remap from="chatter" to="talk"/>
    <node name="talker" pkg="demo" type="talker.py" machine="arm" respawn="true"
          respawn_delay="0.2">
      <param name="rate" value="20"/>
    </node>
    <node name="listener" pkg="demo" type="listener.py" respawn="true"/>
  </group>
</launch>
"""
REQUIRED = """\
<launch>
  <machine name="arm" address="{address}" ssh-port="{port}" env-loader="{loader}"/>
  <node name="listener" pkg="demo" type="listener.py" respawn="true"/>
  <node name="quitter" pkg="demo" type="quitter.py" machine="arm" required="true">
    <param name="after_s" value="3"/>
  </node>
</launch>
"""


@pytest.fixture
def host(
    root: None, ros1: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[LoopbackHost]:
    with loopback_sshd(tmp_path / "sshd") as made:
        monkeypatch.setenv(SSH_CONFIG_ENV, str(made.config))
        yield made


@pytest.fixture
def demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The demo package, here and (through the env-loader) on the host."""
    pkgs = make_package(tmp_path, "demo", {"talker.py": TALKER, "listener.py": LISTENER,
                                           "quitter.py": QUITTER})  # fmt: skip
    monkeypatch.setenv("ROS_PACKAGE_PATH", f"{pkgs}:/usr/share")
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "ros_home"))
    loader = tmp_path / "env.sh"
    loader.write_text(LOADER.format(pkgs=pkgs, home=tmp_path / "remote_home"))
    loader.chmod(0o755)
    return loader


def write(tmp_path: Path, template: str, host: LoopbackHost, loader: Path, **extra: Any) -> Path:
    fields = {"address": host.address, "port": host.port, "loader": loader, **extra}
    path = tmp_path / "robot.launch"
    path.write_text(template.format(**fields))
    return path


def node_pid(master: Any, name: str) -> tuple[str, int] | None:
    """The node's registered address and, if it answers there, its pid (on the host)."""
    try:
        code, _, uri = master.lookupNode("/test", name)
        if code != 1:
            return None
        code, _, pid = xmlrpc.client.ServerProxy(uri).getPid("/test")
        return (str(uri), int(pid)) if code == 1 else None
    except OSError:
        return None


def started_by_sshd(pid: int) -> bool:
    """The process descends from an sshd session: it was started on the host over ssh."""
    while pid > 1:
        status = Path(f"/proc/{pid}/status").read_text()
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        if fields["Name"].strip().startswith("sshd"):
            return True
        pid = int(fields["PPid"])
    return False


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def run_with(
    launch: Path, body: Callable[[Supervisor], Any], events: list[SupervisionEvent]
) -> int:
    async def session(rt: Any, root: Supervisor) -> int | None:
        rt.subscribers.append(events.append)
        result = await asyncio.to_thread(body, root)
        return None if result is None else int(result)

    return run_launch(launch, session=session)


def test_a_node_on_another_host_runs_there_and_is_restarted(
    host: LoopbackHost, demo: Path, tmp_path: Path
) -> None:
    launch = write(tmp_path, LAUNCH, host, demo)
    events: list[SupervisionEvent] = []
    pids: list[int] = []

    def body(root: Supervisor) -> int:
        uri = str(root.child("master").uri)
        master: Any = xmlrpc.client.ServerProxy(uri)
        first_uri, first = wait_for(lambda: node_pid(master, "/robot/talker"))
        pids.append(first)
        # Started on the host (by its sshd), advertising the host's address, remapped there.
        assert started_by_sshd(first)
        assert first_uri.startswith(f"http://{host.address}:")
        wait_for(lambda: graph(uri)["publishers"].get("/robot/talk") == ["/robot/talker"])
        wait_for(lambda: graph(uri)["subscribers"].get("/robot/talk") == ["/robot/listener"])
        assert master.getParam("/test", "/robot/talker/rate")[2] == 20
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: ("restarted", "") in kinds(events, "talker"))
        again = wait_for(lambda: (found := node_pid(master, "/robot/talker")) and
                         found[1] != first and found)  # fmt: skip
        pids.append(again[1])
        assert again[0] != first_uri and started_by_sshd(again[1])
        wait_for(lambda: graph(uri)["publishers"].get("/robot/talk") == ["/robot/talker"])
        return 0

    assert run_with(launch, body, events) == 0
    exits = [e for e in events if e.kind == "exited" and e.child == "talker"]
    assert exits[0].reason == "crash" and "137" in exits[0].detail  # 128 + SIGKILL, on the host
    # Stopped with the tree: the guard on the host ended the node before the stop returned.
    assert len(pids) == 2 and not alive(pids[0]) and not alive(pids[1])


def test_a_required_node_on_another_host_stops_the_tree(
    host: LoopbackHost, demo: Path, tmp_path: Path
) -> None:
    launch = write(tmp_path, REQUIRED, host, demo)
    events: list[SupervisionEvent] = []

    async def session(rt: Any, root: Supervisor) -> int:
        rt.subscribers.append(events.append)
        await asyncio.sleep(EVENT_TIMEOUT_S)
        return 3  # the required node did not stop the tree in time

    assert run_launch(launch, session=session) == 1  # the root supervisor ended
    assert any(e.kind == "gave_up" and "required child quitter" in e.detail for e in events)


def check(launch: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """`roboscale launch FILE`: exit 2 and its one-line message, before anything started."""
    with pytest.raises(SystemExit) as info:
        main(["launch", str(launch)])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip()


def test_an_unknown_host_key_is_refused_at_the_machine_line(
    host: LoopbackHost,
    demo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(SSH_CONFIG_ENV, str(host.stranger_config))
    launch = write(tmp_path, LAUNCH, host, demo)
    err = check(launch, capsys)
    assert f"robot.launch:2: machine.address: the host key of {host.address} is unknown" in err
    assert "Host key verification failed" in err and "accepts only known host keys" in err


def test_a_refused_key_is_named_at_the_machine_line(
    host: LoopbackHost,
    demo: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv(SSH_CONFIG_ENV, str(host.refused_config))
    err = check(write(tmp_path, LAUNCH, host, demo), capsys)
    assert f"robot.launch:2: machine.user: {host.address} refused the key of ssh's default" in err
    assert "Permission denied" in err


def test_a_host_nothing_answers_on_is_named_at_the_machine_line(
    host: LoopbackHost, demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    launch = write(tmp_path, LAUNCH.replace('ssh-port="{port}"', 'ssh-port="1"'), host, demo)
    err = check(launch, capsys)
    assert f"robot.launch:2: machine.address: cannot reach {host.address} over ssh (" in err
    assert "Connection refused" in err


def test_a_missing_env_loader_is_named_at_the_machine_line(
    host: LoopbackHost, demo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    launch = write(tmp_path, LAUNCH, host, tmp_path / "no" / "env.sh")
    err = check(launch, capsys)
    assert err == (
        f"error: {launch}:2: machine.env-loader: no executable {tmp_path}/no/env.sh on "
        f"{host.address}"
    )
