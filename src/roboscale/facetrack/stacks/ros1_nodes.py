"""The rospy nodes of the ROS 1 face tracker, started by roslaunch from a generated package.

    ft_node camera HARNESS_PORT ROSCORE_PID CONFIG_JSON
    ft_node worker INDEX CONFIG_JSON          (respawn="true")
    ft_node aggregator 0 CONFIG_JSON          (respawn="true")

They run in the harness's Python (OpenCV and numpy from its environment) with Debian's
dist-packages appended to the END of sys.path, so rospy comes from Debian and never
shadows the environment's numpy or cv2. Every message is a `StampedBytes` (`int32 id`,
`time t`, `uint8[] data`: the backend's own type) whose data are the pipeline's `wire`
bytes, unchanged, as in every stack:

    camera ──/ft/frames_<i>──► worker i ──/ft/results──► aggregator ──/ft/tracker──► camera
    every node ──/ft/status (latched)──► camera ──link──► harness

Like the paper's main node, the camera node publishes each frame straight to the topic of
the worker the harness chose. `/ft/status` carries a node's start (the first line of its
program) and its readiness (registered, its input and output topics connected) as
two `ProcessEvent`s on the shared CLOCK_MONOTONIC. When the harness goes away, the camera
node stops roslaunch and the roscore, so nothing outlives a killed harness.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roboscale.facetrack import wire
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.stacks.link import (
    EVENT,
    LENGTH,
    WORKER,
    ProcessEvent,
    Role,
    read_packet,
)

DEBIAN_PACKAGES = "/usr/lib/python3/dist-packages"
QUEUE = 1000  # the paper's publisher queue (Listing 1)
CONNECT_WAIT_S = 60.0  # a node waits this long for its output topic's subscriber
EVENT_SIZE = 1 + EVENT.size

# The node program roslaunch runs: {python} is the harness's interpreter, {package} the
# folder its roboscale is imported from (roslaunch's environment drops PYTHONPATH).
SCRIPT = """#!{python}
import time
T_START = time.monotonic_ns()
import sys
sys.path.insert(0, {package!r})
sys.path.append({debian!r})
from roboscale.facetrack.stacks.ros1_nodes import main
sys.exit(main(sys.argv[1:], T_START))
"""


def script(python: str) -> str:
    import roboscale

    package = str(Path(roboscale.__file__).resolve().parent.parent)
    return SCRIPT.format(python=python, package=package, debian=DEBIAN_PACKAGES)


def message_type() -> Any:
    from roboscale.backends.ros1 import message_class

    return message_class("bytes")


def _wait_connected(endpoint: Any, deadline: float) -> None:
    """Until a publisher or subscriber has a peer (or the deadline passes)."""
    import rospy

    while endpoint.get_num_connections() == 0 and time.monotonic() < deadline:
        if rospy.is_shutdown():
            return
        time.sleep(0.005)


def _status(role: Role, index: int, t_start: int) -> bytes:
    pid = os.getpid()
    started = ProcessEvent(role, index, pid, False, t_start, None)
    ready = ProcessEvent(role, index, pid, True, time.monotonic_ns(), None)
    return started.encode() + ready.encode()


def serve(
    role: Role,
    index: int,
    t_start: int,
    topics: tuple[str, str],
    handle: Callable[[bytes], list[bytes]],
) -> int:
    """A worker or the aggregator: `handle` each message of topics[0], publish on topics[1]."""
    import rospy

    msg_type = message_type()
    name = f"worker_{index}" if role == Role.WORKER else "aggregator"
    rospy.init_node(name, disable_rosout=True)
    out = rospy.Publisher(topics[1], msg_type, queue_size=QUEUE)
    status = rospy.Publisher("/ft/status", msg_type, queue_size=10, latch=True)

    def on_message(msg: Any) -> None:
        for data in handle(bytes(msg.data)):
            out.publish(msg_type(id=index, data=data))

    inbox = rospy.Subscriber(topics[0], msg_type, on_message, tcp_nodelay=True)
    deadline = time.monotonic() + CONNECT_WAIT_S
    for endpoint in (inbox, out):  # ready: what comes in reaches it, what it sends goes out
        _wait_connected(endpoint, deadline)
    status.publish(msg_type(id=index, data=_status(role, index, t_start)))
    rospy.spin()
    return 0


def worker(index: int, cfg: TrackerConfig, t_start: int) -> int:
    from roboscale.facetrack.pipeline import WorkerRole

    role = WorkerRole(index)

    def handle(data: bytes) -> list[bytes]:
        result = role.handle(data)
        return [] if result is None else [result]

    return serve(Role.WORKER, index, t_start, (f"/ft/frames_{index}", "/ft/results"), handle)


def aggregator(cfg: TrackerConfig, t_start: int) -> int:
    from roboscale.facetrack.pipeline import TrackerRole

    role = TrackerRole(cfg)

    def handle(data: bytes) -> list[bytes]:
        command = role.handle(data)
        if command is None:
            return []
        return [b"R" + command, b"D" + wire.encode_handled(role.handled[-1])]

    return serve(Role.AGGREGATOR, 0, t_start, ("/ft/results", "/ft/tracker"), handle)


class HarnessLink:
    """The camera node's end of the harness link; sends come from rospy's threads."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.settimeout(None)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._lock = threading.Lock()

    def send(self, data: bytes) -> None:
        with self._lock:
            self.sock.sendall(LENGTH.pack(len(data)) + data)


def camera(port: int, roscore_pid: int, cfg: TrackerConfig, t_start: int) -> int:
    import rospy

    launch_pid = os.getppid()  # roslaunch, noted now: if it dies first, the parent changes
    msg_type = message_type()
    link = HarnessLink(port)
    link.send(b"H" + WORKER.pack(os.getpid()) + b"rospy")
    rospy.init_node("camera", disable_rosout=True)
    frames = [
        rospy.Publisher(f"/ft/frames_{i}", msg_type, queue_size=QUEUE) for i in range(cfg.workers)
    ]

    def on_status(msg: Any) -> None:
        data = bytes(msg.data)
        for at in range(0, len(data) - EVENT_SIZE + 1, EVENT_SIZE):
            link.send(data[at : at + EVENT_SIZE])

    def on_tracker(msg: Any) -> None:
        link.send(b"O" + bytes(msg.data))

    rospy.Subscriber("/ft/status", msg_type, on_status, tcp_nodelay=True)
    rospy.Subscriber("/ft/tracker", msg_type, on_tracker, tcp_nodelay=True)
    deadline = time.monotonic() + CONNECT_WAIT_S + cfg.workers
    for publisher in frames:
        _wait_connected(publisher, deadline)
    status = _status(Role.CAMERA, 0, t_start)
    for at in (0, EVENT_SIZE):
        link.send(status[at : at + EVENT_SIZE])
    code = _relay_frames(link, frames, msg_type)
    if code != 0:  # the harness is gone: end this launch and its roscore
        _end_launch(launch_pid, roscore_pid)
    rospy.signal_shutdown("the harness said stop" if code == 0 else "the harness is gone")
    return code


def _relay_frames(link: HarnessLink, frames: list[Any], msg_type: Any) -> int:
    """Publish each frame to its worker's topic until `Q` (0) or the link ends (1)."""
    fd = link.sock.fileno()
    while True:
        try:
            message = read_packet(fd)
        except (OSError, ValueError):
            return 1
        if message is None:
            return 1
        if message[:1] == b"Q":
            return 0
        if message[:1] == b"F" and len(message) >= 1 + WORKER.size:
            (worker,) = WORKER.unpack_from(message, 1)
            if worker < len(frames):
                frames[worker].publish(msg_type(id=worker, data=message[1 + WORKER.size :]))


def _end_launch(launch_pid: int, roscore_pid: int) -> None:
    """SIGINT to roslaunch and the roscore, each the leader of its own process group (the
    harness started them so), checked by command line first: pids get reused."""
    for pid, name in ((launch_pid, b"roslaunch"), (roscore_pid, b"roscore")):
        with contextlib.suppress(OSError):
            if name in Path(f"/proc/{pid}/cmdline").read_bytes() and os.getpgid(pid) == pid:
                os.killpg(pid, signal.SIGINT)


def main(argv: list[str], t_start: int) -> int:
    import rospy

    args = rospy.myargv(argv)
    if len(args) < 3 or args[0] not in ("camera", "worker", "aggregator"):
        print(f"usage: ft_node camera|worker|aggregator ... (got {args})", file=sys.stderr)
        return 2
    cfg = TrackerConfig.from_json(Path(args[-1]).read_text())
    if args[0] == "camera":
        return camera(int(args[1]), int(args[2]), cfg, t_start)
    if args[0] == "worker":
        return worker(int(args[1]), cfg, t_start)
    return aggregator(cfg, t_start)
