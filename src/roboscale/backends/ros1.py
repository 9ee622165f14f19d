"""The ros1 backend: real roscore and rospy from Debian's packages.

The lab starts its own roscore on a free port with its own ROS_HOME and log
directory, so it never touches a user's running ROS system, and always stops it.
Nodes run in Debian's system Python, where rospy lives. Messages are the thesis's
stamped types (`int32 id`, `time t`, then the payload), generated at run time by
genpy from their definitions, around real `sensor_msgs` LaserScan and Image, or
around a type of the user's (`roboscale_msgs/Stamped<Type>`: `<package>/<Type> msg`,
generated from the .msg files' ROS 1 definition, so its md5sum is the one a ROS node
built from the same files has); its sample message is deserialized into it once, and
every send serializes it, as rospy does. A replayed message (`send_body`) travels as its
recorded type too (`roboscale_msgs/Stamped<Type>` of the bag's definition, or
StampedLaserScan/StampedImage for the Stata streams), its recorded bytes written after
the id and stamp without deserializing them, as `rosbag play` publishes a bag; the
subscriber deserializes the real type (genpy), and an echoer republishes it.
"""

from __future__ import annotations

import contextlib
import io
import os
import shutil
import signal
import struct
import subprocess
import time
import xmlrpc.client
from pathlib import Path
from typing import Any

from roboscale import lifeline
from roboscale.backends.base import (
    Callback,
    MessageKind,
    NodeContext,
    NodeSetting,
    TypedPayload,
    Where,
    free_port,
)
from roboscale.backends.payload import TEXT, body
from roboscale.backends.qos import RELIABLE_VOLATILE
from roboscale.backends.ros1def import parse_full_text
from roboscale.errors import BackendUnavailable, UserError
from roboscale.safewrite import open_stream

SYSTEM_PYTHON = "/usr/bin/python3"
INSTALL_HINT = (
    "as root: apt-get install ros-core python3-rospy python3-sensor-msgs python3-std-msgs "
    "(Debian 12), or run `sudo make ros1`"
)
HEAD = "int32 id\ntime t\n"
STAMP = struct.Struct("<iII")  # HEAD serialized: id, t.secs, t.nsecs
SEP = "\n" + "=" * 80 + "\nMSG: "

# Thesis message kinds (seed notes) plus raw bytes for arbitrary sizes.
DEFINITIONS = {
    "text": ("roboscale_msgs/StampedMessage", HEAD + "string message\n", None),
    "laserscan": (
        "roboscale_msgs/StampedLaserScan",
        HEAD + "sensor_msgs/LaserScan scan\n",
        "LaserScan",
    ),
    "image": ("roboscale_msgs/StampedImage", HEAD + "sensor_msgs/Image image\n", "Image"),
    "bytes": ("roboscale_msgs/StampedBytes", HEAD + "uint8[] data\n", None),
}
LASER_FIXED_BYTES = 60  # header, angles, times, ranges and 2 array lengths, frame "laser"


def typed_definition(typed: TypedPayload) -> tuple[str, str]:
    """The stamped wrapper of a type of the user's: its name and genpy full text."""
    inner = f"{typed.package}/{typed.type_name}"
    text = HEAD + f"{inner} msg\n" + SEP + f"{inner}\n" + typed.ros1_definition
    return f"roboscale_msgs/Stamped{typed.type_name}", text


def message_class(kind: str, typed: TypedPayload | None = None) -> Any:
    from genpy.dynamic import generate_dynamic

    if typed is not None:
        name, full = typed_definition(typed)
        # genpy writes the text into Python source and imports it: it gets only text
        # proven data here too, whatever the lab checked (a DefinitionError otherwise).
        parse_full_text(name, full)
        return generate_dynamic(name, full)[name]
    type_name, text, dep = DEFINITIONS[kind]
    if dep is not None:
        import sensor_msgs.msg

        text += SEP + f"sensor_msgs/{dep}\n" + getattr(sensor_msgs.msg, dep)._full_text
    return generate_dynamic(type_name, text)[type_name]


def build_message(kind: MessageKind) -> Any:
    """A message whose payload part serializes to about `kind.size` bytes."""
    msg = message_class(kind.kind, kind.typed)()
    if kind.typed is not None:
        msg.msg.deserialize(kind.typed.sample("ros1"))
    elif kind.kind == "text":
        msg.message = TEXT.decode()
    elif kind.kind == "laserscan":
        msg.scan.header.frame_id = "laser"
        msg.scan.ranges = [1.5] * max(0, (kind.size - LASER_FIXED_BYTES) // 4)
        msg.scan.angle_min, msg.scan.angle_max, msg.scan.range_max = -2.35, 2.35, 30.0
    elif kind.kind == "image":
        msg.image.header.frame_id = "camera"
        msg.image.height, msg.image.width, msg.image.encoding = 480, 640, "mono8"
        msg.image.step = 640
        msg.image.data = body(kind.size, "bytes")
    else:
        msg.data = body(kind.size, "bytes")
    return msg


def raw_class(cls: Any) -> Any:
    """The stamped type `cls` (same `_type` and md5sum) serialized from the id, the stamp
    and a message's bytes as recorded, written as they are: what `rosbag play` does with
    a bag's messages (it publishes their serialized bytes through a ShapeShifter, never
    deserializing them). A subscriber deserializes the real type."""

    class Raw(cls):  # type: ignore[misc]
        __slots__ = ("body",)

        def serialize(self, buff: Any) -> None:
            buff.write(STAMP.pack(self.id, self.t.secs, self.t.nsecs))
            buff.write(self.body)

    return Raw


class Ros1Publisher:
    def __init__(self, publisher: Any, kind: MessageKind) -> None:
        import rospy

        self._pub = publisher
        self._msg = build_message(kind)
        self._time = rospy.Time
        self._raw = raw_class(type(self._msg))() if kind.sensor_or_typed else None

    def send(self, seq: int, stamp_ns: int) -> None:
        self._msg.id = seq
        self._msg.t = self._time(stamp_ns // 1_000_000_000, stamp_ns % 1_000_000_000)
        self._pub.publish(self._msg)

    def send_body(self, seq: int, stamp_ns: int, body: bytes) -> None:
        if self._raw is None:
            self._msg.data = body  # genpy writes a uint8[] given as bytes in one block
            self.send(seq, stamp_ns)
            return
        raw = self._raw
        raw.id, raw.body = seq, body
        raw.t = self._time(stamp_ns // 1_000_000_000, stamp_ns % 1_000_000_000)
        self._pub.publish(raw)

    def forward(self, msg: object) -> None:
        self._pub.publish(msg)


class Ros1Session:
    def __init__(self, ctx: NodeContext) -> None:
        import rospy

        self._rospy = rospy
        self._nodelay = bool(ctx.config.get("tcp_nodelay", True))
        # On an emulated host, other hosts reach this node at the host's own address.
        if address := os.environ.get("ROBOSCALE_HOST_ADDRESS"):
            os.environ["ROS_IP"] = address
        rospy.init_node(ctx.name, anonymous=False, disable_signals=True, disable_rosout=True)
        self._pubs: list[Any] = []
        self._subs: list[Any] = []

    def publisher(self, topic: str, kind: MessageKind, queue: int) -> Ros1Publisher:
        cls = message_class(kind.kind, kind.typed)
        pub = self._rospy.Publisher(topic, cls, queue_size=queue or None)
        self._pubs.append(pub)
        return Ros1Publisher(pub, kind)

    def subscribe(self, topic: str, kind: MessageKind, callback: Callback, queue: int) -> None:
        def on_message(msg: Any) -> None:
            callback(int(msg.id), msg)

        sub = self._rospy.Subscriber(
            topic,
            message_class(kind.kind, kind.typed),
            on_message,
            queue_size=queue or None,
            tcp_nodelay=self._nodelay,
        )
        self._subs.append(sub)

    def body_of(self, msg: object, kind: MessageKind) -> bytes:
        """The payload: the bytes of a `bytes` message, else the message after the id and
        stamp, serialized."""
        if not kind.sensor_or_typed and kind.kind != "text":
            return bytes(msg.data)  # type: ignore[attr-defined]
        out = io.BytesIO()
        msg.serialize(out)  # type: ignore[attr-defined]
        return out.getvalue()[STAMP.size :]

    def close(self) -> None:
        for entity in self._subs + self._pubs:
            entity.unregister()
        self._rospy.signal_shutdown("roboscale trial finished")


# Asked inside the master's host: an emulated host is not reachable from the root namespace.
MASTER_PROBE = (
    "import sys, xmlrpc.client\n"
    "try: ok = xmlrpc.client.ServerProxy(sys.argv[1]).getSystemState('/roboscale')[0] == 1\n"
    "except OSError: ok = False\n"
    "sys.exit(0 if ok else 1)"
)


class Roscore:
    """A private roscore on a free port; stop() ends its whole process group.

    On emulated hosts it runs on host 0 (`prefix` enters it) and listens on `address`.
    """

    def __init__(self, workdir: Path, prefix: list[str] | None = None, address: str = "") -> None:
        port = free_port()
        home = workdir / "ros_home"
        home.mkdir(parents=True, exist_ok=True)
        self.prefix = prefix or []
        address = address or "127.0.0.1"
        self.uri = f"http://{address}:{port}/"
        self.env = {
            "ROS_MASTER_URI": self.uri,
            "ROS_HOME": str(home),
            "ROS_LOG_DIR": str(home / "log"),
            "ROS_IP": address,
        }
        self._log = os.fdopen(open_stream(workdir / "roscore.log"), "wb")
        self._proc = subprocess.Popen(
            [*self.prefix, "roscore", "-p", str(port)],
            env={**os.environ, **self.env, **lifeline.child_env()},
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_ready(workdir)

    @property
    def pid(self) -> int:
        return self._proc.pid

    def _answers(self) -> bool:
        if self.prefix:
            probe = [*self.prefix, SYSTEM_PYTHON, "-c", MASTER_PROBE, self.uri]
            return (
                subprocess.run(probe, capture_output=True, timeout=10, check=False).returncode == 0
            )
        try:
            state: Any = xmlrpc.client.ServerProxy(self.uri).getSystemState("/roboscale")
            return bool(state[0] == 1)
        except OSError:
            return False

    def _wait_ready(self, workdir: Path, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                self.stop()
                raise UserError(f"roscore exited early; see {workdir / 'roscore.log'}")
            if self._answers():
                return
            time.sleep(0.1)
        self.stop()
        raise UserError(f"roscore did not answer within {timeout_s:.0f} s at {self.uri}")

    def stop(self) -> None:
        # rosmaster and rosout run in process groups of their own: note them first, so
        # that none outlives a roscore that had to be killed.
        children = _children(self._proc.pid)
        if self._proc.poll() is None:
            for sig, wait_s in ((signal.SIGINT, 10.0), (signal.SIGKILL, 5.0)):
                try:
                    os.killpg(self._proc.pid, sig)
                    self._proc.wait(wait_s)
                    break
                except ProcessLookupError:
                    break
                except subprocess.TimeoutExpired:
                    continue
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        self._log.close()


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


class Ros1Backend:
    qos = RELIABLE_VOLATILE
    name = "ros1"
    replay_encoding = "ros1"
    placement = "node"

    @property
    def python(self) -> str:
        return SYSTEM_PYTHON

    def check(self) -> None:
        if shutil.which("roscore") is None or not Path(SYSTEM_PYTHON).exists():
            raise BackendUnavailable(
                "backend 'ros1' is not installed: roscore not found", hint=INSTALL_HINT
            )
        probe = subprocess.run(
            [SYSTEM_PYTHON, "-c", "import rospy, genpy.dynamic, sensor_msgs.msg"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode != 0:
            last = (probe.stderr.strip().splitlines() or ["import failed"])[-1]
            raise BackendUnavailable(f"backend 'ros1' is not installed: {last}", hint=INSTALL_HINT)

    def version(self) -> str:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", "python3-rospy"],
            capture_output=True,
            text=True,
            check=False,
        )
        return f"rospy {out.stdout.strip() or 'unknown'} (Debian)"

    def start_infrastructure(self, workdir: Path, where: Where) -> Roscore:
        host = where.infrastructure_host
        return Roscore(workdir, where.prefixes[host], where.addresses[host])

    def node_config(self, role: str, key: int, node: NodeSetting) -> dict[str, object]:
        # The thesis's nodes used rospy's default (Nagle on); standard mode turns it off.
        return {"tcp_nodelay": node.mode != "thesis_compat"}

    def open(self, ctx: NodeContext) -> Ros1Session:
        return Ros1Session(ctx)


BACKEND = Ros1Backend()
