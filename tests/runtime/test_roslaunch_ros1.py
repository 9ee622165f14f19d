"""roslaunch XML under OTP supervision, on real ROS 1 (rosmaster, rospy nodes).

The same launch file is run by roslaunch and by roboscale; the master's state (nodes,
publishers, subscribers, services, parameters) must be the same. Then roboscale's
supervision: a killed talker restarted and registered again, a hung (alive, silent)
talker restarted by its rate watchdog, and a required node whose end stops the tree.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
import xmlrpc.client
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import EVENT_TIMEOUT_S

from roboscale.backends.ros1 import Roscore
from roboscale.backends.roslaunch import make_package, ros_env, stop_group
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.launch import run_launch
from roboscale.runtime.supervisor import Supervisor

TALKER = """#!/usr/bin/python3
import os, time, rospy
from std_msgs.msg import String
rospy.init_node("talker", disable_signals=True)
pub = rospy.Publisher("chatter", String, queue_size=10)
rate = rospy.Rate(float(rospy.get_param("~rate", 50)))
hang_after = float(rospy.get_param("~hang_after_s", 0))
flag = rospy.get_param("~hang_flag", "")
t0 = time.monotonic()
while not rospy.is_shutdown():
    if hang_after and time.monotonic() - t0 > hang_after and not os.path.exists(flag):
        time.sleep(0.1)  # alive, registered, silent
        continue
    pub.publish(String("hello"))
    rate.sleep()
"""
LISTENER = """#!/usr/bin/python3
import rospy
from std_msgs.msg import String
rospy.init_node("listener", disable_signals=True)
rospy.Subscriber("chatter", String, lambda m: None)
rospy.spin()
"""
QUITTER = """#!/usr/bin/python3
import time, rospy
rospy.init_node("quitter", disable_signals=True)
time.sleep(float(rospy.get_param("~after_s", 1.0)))
"""
LAUNCH = """\
<launch>
  <arg name="rate" default="20"/>
  <param name="global_rate" value="$(eval rate * 2)"/>
  <param name="label" type="str" value="robot one"/>
  <group ns="robot">
    <remap from="chatter" to="talk"/>
    <node name="talker" pkg="demo" type="talker.py" respawn="true" args="--verbose">
      <param name="rate" value="$(arg rate)"/>
      <rosparam>
        gains: {p: 1.5, i: 0, enabled: true}
      </rosparam>
    </node>
    <node name="listener" pkg="demo" type="listener.py" respawn="true"/>
  </group>
  <node name="echo" ns="tools" pkg="demo" type="listener.py">
    <remap from="chatter" to="/robot/talk"/>
  </node>
</launch>
"""
# Set by rosmaster, roscore or roslaunch themselves, not by the file.
OWN_PARAMS = ("/run_id", "/roslaunch/", "/rosdistro", "/rosversion")
pytestmark = pytest.mark.ros1
NODES = {"/robot/talker", "/robot/listener", "/tools/echo", "/rosout"}


@pytest.fixture
def demo(tmp_path: Path, ros1: None, monkeypatch: pytest.MonkeyPatch) -> Path:
    scripts = {"talker.py": TALKER, "listener.py": LISTENER, "quitter.py": QUITTER}
    pkgs = make_package(tmp_path, "demo", scripts)
    monkeypatch.setenv("ROS_PACKAGE_PATH", f"{pkgs}:/usr/share")
    monkeypatch.setenv("ROS_HOME", str(tmp_path / "ros_home"))
    return tmp_path


def write(tmp_path: Path, text: str, name: str = "robot.launch") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def graph(uri: str) -> dict[str, Any]:
    """The master's state: who publishes, subscribes and serves what, and the parameters."""
    master: Any = xmlrpc.client.ServerProxy(uri)
    _, _, (pubs, subs, services) = master.getSystemState("/test")
    _, _, names = master.getParamNames("/test")
    own = [n for n in names if not n.startswith(OWN_PARAMS)]
    return {
        "publishers": {t: sorted(n) for t, n in pubs},
        "subscribers": {t: sorted(n) for t, n in subs},
        "services": {s: sorted(n) for s, n in services},
        "params": {n: master.getParam("/test", n)[2] for n in sorted(own)},
    }


# Everything LAUNCH's nodes register once each is up (rospy's logger services and /rosout
# publisher, then the file's topics): a read that holds all of it is the final graph.
TOPICS = {
    "publishers": {
        "/robot/talk": {"/robot/talker"},
        "/rosout": {"/robot/talker", "/robot/listener", "/tools/echo"},
        "/rosout_agg": {"/rosout"},
    },
    "subscribers": {"/robot/talk": {"/robot/listener", "/tools/echo"}, "/rosout": {"/rosout"}},
}


def settled(uri: str, nodes: set[str]) -> dict[str, Any] | None:
    """The graph once every node has registered all it will (no guessed pause)."""
    try:
        state = graph(uri)
    except OSError:
        return None
    for kind, topics in TOPICS.items():
        if any(not names <= set(state[kind].get(t, [])) for t, names in topics.items()):
            return None
    services = {f"{n}/{s}" for n in nodes for s in ("get_loggers", "set_logger_level")}
    return state if services <= set(state["services"]) else None


def wait_for(check: Callable[[], Any], timeout_s: float = EVENT_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout_s
    while (found := check()) is None or found is False:
        if time.monotonic() > deadline:
            raise AssertionError("not reached in time")
        time.sleep(0.1)
    return found


def roslaunch_graph(tmp_path: Path, launch: Path) -> dict[str, Any]:
    core = Roscore(tmp_path / "core")
    env = ros_env({**core.env, "ROS_PACKAGE_PATH": os.environ["ROS_PACKAGE_PATH"]})
    log = (tmp_path / "roslaunch.log").open("wb")
    proc = subprocess.Popen(
        ["roslaunch", str(launch)], env=env, stdout=log, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        return dict(wait_for(lambda: settled(core.uri, NODES)))
    finally:
        stop_group(proc)
        log.close()
        core.stop()


def master_uri(root: Supervisor) -> str:
    return str(root.child("master").uri)


def run_with(
    launch: Path, body: Callable[[Runtime, Supervisor], Any], events: list[SupervisionEvent]
) -> int:
    """run_launch with `body` (blocking, in a thread) as its session; events collected."""

    async def session(rt: Runtime, root: Supervisor) -> int | None:
        rt.subscribers.append(events.append)
        result = await asyncio.to_thread(body, rt, root)
        return None if result is None else int(result)

    return run_launch(launch, session=session)


def test_same_graph_as_roslaunch(demo: Path) -> None:
    launch = write(demo, LAUNCH)
    expected = roslaunch_graph(demo, launch)
    seen: dict[str, Any] = {}

    def body(rt: Runtime, root: Supervisor) -> int:
        seen.update(wait_for(lambda: settled(master_uri(root), NODES)))
        return 0

    assert run_with(launch, body, []) == 0
    assert seen == expected
    assert seen["params"]["/robot/talker/rate"] == 20 and seen["params"]["/global_rate"] == 40
    assert seen["params"]["/robot/talker/gains/enabled"] is True
    assert seen["publishers"]["/robot/talk"] == ["/robot/talker"]
    assert seen["subscribers"]["/robot/talk"] == ["/robot/listener", "/tools/echo"]


def pid_of(root: Supervisor, *path: str) -> int:
    handle: Any = root
    for name in path:
        handle = handle.child(name)
    return int(handle.pid)


def kinds(events: list[SupervisionEvent], child: str) -> list[tuple[str, str]]:
    return [(e.kind, e.reason) for e in events if e.child == child]


def test_killed_talker_is_restarted_and_registers_again(demo: Path) -> None:
    launch = write(demo, LAUNCH)
    events: list[SupervisionEvent] = []

    def body(rt: Runtime, root: Supervisor) -> int:
        uri = master_uri(root)
        wait_for(lambda: settled(uri, NODES))
        master: Any = xmlrpc.client.ServerProxy(uri)
        first_uri = master.lookupNode("/test", "/robot/talker")[2]
        first = pid_of(root, "nodes", "robot", "talker")
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: ("restarted", "") in kinds(events, "talker"))
        assert pid_of(root, "nodes", "robot", "talker") != first
        # A new address (a fresh port) shows the new instance registered with the master.
        wait_for(lambda: master.lookupNode("/test", "/robot/talker")[2] != first_uri)
        wait_for(lambda: graph(uri)["publishers"].get("/robot/talk") == ["/robot/talker"])
        return 0

    assert run_with(launch, body, events) == 0
    assert ("exited", "killed") in kinds(events, "talker")


HUNG = """\
<launch>
  <node name="talker" pkg="demo" type="talker.py" respawn="true">
    <param name="hang_after_s" value="2"/>
    <param name="hang_flag" value="{flag}"/>
    <watchdog topic="/chatter" min_rate_hz="5" window_s="1" grace_s="1"/>
  </node>
</launch>
"""


def test_hung_talker_is_restarted_by_its_rate_watchdog(demo: Path) -> None:
    flag = demo / "stay-alive"  # once it exists, restarted talkers publish forever
    launch = write(demo, HUNG.format(flag=flag))
    events: list[SupervisionEvent] = []

    def body(rt: Runtime, root: Supervisor) -> int:
        first = pid_of(root, "nodes", "talker")
        wait_for(lambda: ("exited", "hung") in kinds(events, "talker"))
        flag.touch()
        wait_for(lambda: ("restarted", "") in kinds(events, "talker"))
        assert pid_of(root, "nodes", "talker") != first
        uri = master_uri(root)
        wait_for(lambda: graph(uri)["publishers"].get("/chatter") == ["/talker"])
        return 0

    assert run_with(launch, body, events) == 0
    hung = next(e for e in events if e.kind == "exited" and e.child == "talker")
    assert hung.reason == "hung" and "watchdog: /chatter at " in hung.detail
    assert "below 5 Hz" in hung.detail


REQUIRED = """\
<launch>
  <node name="listener" pkg="demo" type="listener.py" respawn="true"/>
  <group ns="core">
    <node name="quitter" pkg="demo" type="quitter.py" required="true">
      <param name="after_s" value="1"/>
    </node>
  </group>
</launch>
"""


def test_a_required_node_ending_stops_the_tree(demo: Path) -> None:
    launch = write(demo, REQUIRED)
    events: list[SupervisionEvent] = []
    pids: list[int] = []
    code = run_launch(launch, session=_collect(events, pids))
    assert code == 1  # the root supervisor ended
    assert any(e.kind == "gave_up" and "required child quitter" in e.detail for e in events)
    assert pids and not _alive(pids[0])


def _collect(
    events: list[SupervisionEvent], pids: list[int]
) -> Callable[[Runtime, Supervisor], Any]:
    async def session(rt: Runtime, root: Supervisor) -> int | None:
        rt.subscribers.append(events.append)
        pids.append(pid_of(root, "nodes", "listener"))
        await asyncio.sleep(EVENT_TIMEOUT_S)
        return 3  # the required node did not stop the tree in time

    return session


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


def test_a_given_master_is_used_with_its_own_rosout(demo: Path) -> None:
    """With --master, as roslaunch when a master answers: no second rosmaster or /rosout."""
    core = Roscore(demo / "core")
    launch = write(demo, LAUNCH)
    events: list[SupervisionEvent] = []
    seen: dict[str, Any] = {}

    async def session(rt: Runtime, root: Supervisor) -> int:
        rt.subscribers.append(events.append)
        state = await asyncio.to_thread(wait_for, lambda: settled(core.uri, NODES))
        seen.update(state)
        await asyncio.sleep(1.0)  # a /rosout fighting roscore's would exit meanwhile
        return 0

    try:
        assert run_launch(launch, session=session, master=core.uri) == 0
    finally:
        core.stop()
    assert seen["params"]["/robot/talker/rate"] == 20
    assert seen["publishers"]["/robot/talk"] == ["/robot/talker"]
    assert not [e for e in events if e.kind == "exited"]
