"""The relay as a bridge into the runtime's durable topics, on real ROS 1 and Zenoh: a rospy
talker's /seq, mirrored by the relay into the durable runtime topic /data, is taken by a
runtime node in another process (tests/runtime/programs/bridge_sub.py, a durable import
with a cursor file); that process is SIGKILLed, and its next instance resumes from the
cursor: every message the talker published since the first one taken arrives, the ones
published while no importer lived included (replayed from the relay's retention); and a
second importer started last replays all the relay retained, from the oldest."""

from __future__ import annotations

import asyncio
import socket
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from tests.runtime.test_durable_remote import spawn, stop, taken, wait_ready
from tests.runtime.test_rosrelay_ros1 import RELAY, TALKER

from roboscale.backends.base import free_port
from roboscale.backends.roslaunch import make_package
from roboscale.runtime.executor import Runtime
from roboscale.runtime.launch import run_launch
from roboscale.runtime.supervisor import Supervisor

from .conftest import wait_until

pytestmark = [pytest.mark.ros1, pytest.mark.zenoh]

LAUNCH = """\
<launch>
  <node name="talker" pkg="mirror" type="talker.py" args="{work}/talker.log {work}/stop"/>
  <node name="relay" pkg="mirror" type="relay" required="true"
        args="--topic /seq --durable /data --listen {endpoint}"/>
</launch>
"""


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return False
    return True


def published(work: Path) -> list[str]:
    log = work / "talker.log"
    return log.read_text().split() if log.exists() else []


def test_a_runtime_node_resumes_a_ros_topic_from_its_cursor_across_a_kill(
    tmp_path: Path, ros1: None, zenoh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    pkgs = make_package(tmp_path, "mirror", {"talker.py": TALKER, "relay": RELAY})
    monkeypatch.setenv("ROS_PACKAGE_PATH", f"{pkgs}:/usr/share")
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "ros_home"))
    port = free_port()
    endpoint = f"tcp/127.0.0.1:{port}"
    launch = tmp_path / "mirror.launch"
    launch.write_text(LAUNCH.format(work=tmp_path, endpoint=endpoint))
    cursor, out = tmp_path / "data.cursor", tmp_path / "taken"
    late = tmp_path / "taken_late"  # a second importer, started last, with its own cursor
    procs: list[subprocess.Popen[bytes]] = []

    def importer(cursor: Path = cursor, out: Path = out) -> subprocess.Popen[bytes]:
        # -1: no message stalls its callback (the talker's numbers start at 0).
        proc = spawn("bridge_sub.py", endpoint, str(cursor), str(out), "at_least_once", "-1")
        procs.append(proc)
        wait_ready(proc)
        return proc

    def body() -> None:
        wait_until(lambda: listening(port))  # the relay's bridge is open: then importers
        first = importer()
        wait_until(lambda: len(taken(out)) >= 20)
        first.kill()  # SIGKILL: no goodbye; the talker goes on publishing
        first.wait(timeout=30)
        seen = len(published(tmp_path))
        wait_until(lambda: len(published(tmp_path)) >= seen + 100)  # missed while down
        importer()
        (tmp_path / "stop").touch()
        wait_until(lambda: published(tmp_path)[-1:] == ["END"])
        last = int(published(tmp_path)[-2])
        wait_until(lambda: last in taken(out))
        importer(tmp_path / "late.cursor", late)  # replayed all the relay retained
        wait_until(lambda: last in taken(late))

    async def session(rt: Runtime, root: Supervisor) -> int:
        try:
            await asyncio.to_thread(body)
        finally:
            for proc in procs:
                stop(proc)
        return 0

    assert run_launch(launch, session=session) == 0
    sent = [int(x) for x in published(tmp_path)[:-1]]
    got = Counter(taken(out))
    window = [s for s in sent if s >= min(got)]
    lost = [s for s in window if s not in got]
    duplicated = sum(n - 1 for n in got.values())
    # The window holds at least the 20 taken before the kill and the 100 published while
    # the importer was down (body() waits for both), whatever the talker's pace.
    assert len(window) >= 120 and not lost, (len(window), lost[:10])
    assert duplicated <= 1  # at least once: the one in flight at the kill, not yet committed
    assert taken(out) == sorted(taken(out))  # in order (a message again: right after itself)
    # The late importer, a first start: everything retained, from the oldest, in order.
    assert taken(late) == sorted(set(taken(late))) and min(taken(late)) <= min(got)
    assert set(window) <= set(taken(late))
