"""The durable relay on real ROS 1: a rospy listener behind it, SIGKILLed and respawned by
`roboscale launch`, handles every message the talker published, the ones sent while it
was dead included (replayed from its cursor); without the relay the same kill loses them.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections import Counter
from pathlib import Path

import pytest

import roboscale.runtime.roscursor
from roboscale.backends.roslaunch import make_package
from roboscale.runtime.executor import Runtime
from roboscale.runtime.launch import run_launch
from roboscale.runtime.supervisor import Supervisor

from .conftest import wait_until

pytestmark = pytest.mark.ros1
SRC = Path(roboscale.runtime.roscursor.__file__).resolve().parents[2]
TALKER = """#!/usr/bin/python3
import os, sys, rospy
from std_msgs.msg import UInt64
rospy.init_node("talker", disable_rosout=True)
log, stop = rospy.myargv(sys.argv)[1:3]
out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
pub = rospy.Publisher("/seq", UInt64, queue_size=1000)
rate = rospy.Rate(200)
seq = 0
while not rospy.is_shutdown() and not os.path.exists(stop):
    pub.publish(UInt64(seq))
    os.write(out, f"{seq}\\n".encode())
    seq += 1
    rate.sleep()
os.write(out, b"END\\n")
rospy.spin()
"""
LISTENER = """#!/usr/bin/python3
import os, sys, rospy
from std_msgs.msg import UInt64
from roscursor import Cursor
rospy.init_node("listener", disable_rosout=True)
log, topic, cursor_path = rospy.myargv(sys.argv)[1:4]
out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
cursor = Cursor(cursor_path)
pid = os.getpid()
os.write(out, f"{pid} START\\n".encode())
def on_seq(msg):
    os.write(out, f"{pid} {msg.data}\\n".encode())  # the work ...
    cursor.handled(msg)  # ... then the commit
rospy.Subscriber(topic, UInt64, on_seq, tcp_nodelay=True)
rospy.spin()
"""
RELAY = f"""#!/bin/sh
exec env PYTHONPATH={SRC} {sys.executable} -m roboscale.runtime.rosrelay "$@"
"""


def launch_file(work: Path, durable: bool) -> Path:
    topic = "/seq_durable" if durable else "/seq"
    relay = (
        f'  <node name="relay" pkg="relaydemo" type="relay" required="true" '
        f'args="--topic /seq --to /seq_durable --cursor {work}/listener.cursor"/>\n'
    )
    path = work / "relay.launch"
    path.write_text(
        "<launch>\n"
        f'  <node name="talker" pkg="relaydemo" type="talker.py" '
        f'args="{work}/talker.log {work}/stop"/>\n'
        + (relay if durable else "")
        + f'  <node name="listener" pkg="relaydemo" type="listener.py" respawn="true" '
        f'args="{work}/listener.log {topic} {work}/listener.cursor"/>\n'
        "</launch>\n"
    )
    return path


@pytest.fixture
def demo(tmp_path: Path, ros1: None, monkeypatch: pytest.MonkeyPatch) -> Path:
    cursor_module = Path(roboscale.runtime.roscursor.__file__).read_text()
    scripts = {"talker.py": TALKER, "listener.py": LISTENER, "relay": RELAY}
    pkgs = make_package(tmp_path, "relaydemo", {**scripts, "roscursor.py": cursor_module})
    monkeypatch.setenv("ROS_PACKAGE_PATH", f"{pkgs}:/usr/share")
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "ros_home"))
    return tmp_path


def received(work: Path) -> list[tuple[int, str]]:
    lines = (
        (work / "listener.log").read_text().splitlines() if (work / "listener.log").exists() else []
    )
    return [(int(p), what) for p, what in (ln.split() for ln in lines)]


def kill_listener_once(work: Path, durable: bool) -> dict[str, int]:
    """Run the file; once the listener handles messages, SIGKILL it, wait for its respawn
    to handle some, stop the talker; what the listeners handled against what was published."""

    def body() -> None:
        wait_until(lambda: any(w != "START" for _, w in received(work)))
        first = received(work)[-1][0]
        os.kill(first, signal.SIGKILL)
        wait_until(lambda: any(p != first and w != "START" for p, w in received(work)))
        (work / "stop").touch()
        wait_until(lambda: (work / "talker.log").read_text().endswith("END\n"))
        published = (work / "talker.log").read_text().split()[:-1]
        last = published[-1]
        if durable:  # every one, the last included, reaches the respawned listener
            wait_until(lambda: any(w == last for _, w in received(work)))

    async def session(rt: Runtime, root: Supervisor) -> int:
        await asyncio.to_thread(body)
        return 0

    assert run_launch(launch_file(work, durable), session=session) == 0
    published = [int(x) for x in (work / "talker.log").read_text().split()[:-1]]
    got = Counter(int(w) for _, w in received(work) if w != "START")
    window = [s for s in published if s >= min(got)]
    return {
        "published": len(window),
        "lost": sum(1 for s in window if s not in got),
        "duplicated": sum(n - 1 for n in got.values()),
    }


def test_the_durable_relay_loses_nothing_across_a_kill(demo: Path) -> None:
    counts = kill_listener_once(demo, durable=True)
    assert counts["lost"] == 0, counts
    assert counts["duplicated"] <= 1, counts  # at least once: the one handled, not committed


def test_without_the_relay_the_same_kill_loses_messages(demo: Path) -> None:
    counts = kill_listener_once(demo, durable=False)
    assert counts["lost"] > 0, counts  # what was published while no listener was there
