"""The paper's proposal, realised: OTP-style supervision over a real ROS 1 node.

A rospy talker runs as a command child of a runtime supervisor under a private
roscore. It is SIGKILLed; the supervisor restarts it, and the new instance
registers with the master again and publishes.
"""

from __future__ import annotations

import os
import signal
import time
import xmlrpc.client
from pathlib import Path
from typing import Any

import pytest

from roboscale.backends.ros1 import SYSTEM_PYTHON, Roscore
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.process import CommandChild
from roboscale.runtime.supervisor import ChildSpec, Recipe, Supervisor

TALKER = """
import rospy
from std_msgs.msg import String
rospy.init_node("talker", disable_signals=True)
pub = rospy.Publisher("/chatter", String, queue_size=10)
print("talking", flush=True)
rate = rospy.Rate(50)
while not rospy.is_shutdown():
    pub.publish(String("hello"))
    rate.sleep()
"""


def publishers_of(master: Any, topic: str) -> list[str]:
    _, _, (publishers, _, _) = master.getSystemState("/test")
    return next((nodes for name, nodes in publishers if name == topic), [])


def restarted(events: list[SupervisionEvent]) -> bool:
    return any(e.kind == "restarted" and e.child == "talker" for e in events)


@pytest.mark.ros1
def test_killed_rospy_node_is_restarted_by_its_supervisor(tmp_path: Path, ros1: None) -> None:
    core = Roscore(tmp_path)
    rt = Runtime().start()
    events: list[SupervisionEvent] = []
    rt.subscribers.append(events.append)
    script = tmp_path / "talker.py"
    script.write_text(TALKER)
    talker = Recipe(
        "talker", CommandChild, ("talker", [SYSTEM_PYTHON, str(script)]),
        {"env": core.env, "ready_line": "talking", "log": tmp_path / "talker.log",
         "ready_timeout_s": 30},
    )  # fmt: skip
    root = Supervisor(rt, "robot", [ChildSpec(talker, shutdown_s=2)], intensity=Intensity(5, 10))
    try:
        rt.wait(root.start_async(), timeout_s=60)
        master = xmlrpc.client.ServerProxy(core.uri)
        assert publishers_of(master, "/chatter") == ["/talker"]
        _, _, first_uri = master.lookupNode("/test", "/talker")
        first = root.child("talker").pid
        os.kill(first, signal.SIGKILL)
        # A new pid exists from the fork on, but the supervisor reports "restarted"
        # only once the new talker printed its ready line, so wait for the event.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not restarted(events):
            time.sleep(0.05)
        assert restarted(events)
        assert root.child("talker").alive() and root.child("talker").pid != first
        exits = [e for e in events if e.kind == "exited"]
        assert exits and exits[0].reason == "killed"
        assert publishers_of(master, "/chatter") == ["/talker"]
        # The killed talker's entry stays with the master until replaced, so only a new
        # address (a fresh ephemeral port) shows that the new instance registered.
        _, _, uri = master.lookupNode("/test", "/talker")
        assert uri != first_uri
    finally:
        rt.wait(root.stop_async(), timeout_s=30)
        rt.close()
        core.stop()
