"""The ROS 1 stack: rospy nodes under a generated roslaunch file, as the paper's ROS tracker.

A private roscore (free port, own ROS_HOME) and one roslaunch of a generated launch file:
the camera node (the harness's link), N detector workers and the aggregator, each its own
process, workers and aggregator with `respawn="true"`. The node programs
(`ros1_nodes.py`) live in a throw-away ROS package. Kills are SIGTERM or SIGKILL of a
worker's process; the restart is timed on CLOCK_MONOTONIC from the kill to the respawned
worker's first line (`initialized_ns`) and to its readiness (`restarted_ns`: registered,
its frame and result topics connected), as roslaunch respawns it.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path

from roboscale.backends.ros1 import INSTALL_HINT, SYSTEM_PYTHON, Ros1Backend, _children
from roboscale.backends.roslaunch import Roslaunch, make_package, node_xml
from roboscale.errors import BackendUnavailable, UserError
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.records import ProcessUsage
from roboscale.facetrack.stack import StackUnavailable
from roboscale.facetrack.stacks.external import ExternalTracker
from roboscale.facetrack.stacks.link import Link, LinkClosed, Listener, Role
from roboscale.facetrack.stacks.ros1_nodes import script
from roboscale.facetrack.usage import process_usage
from roboscale.safewrite import write_text

PACKAGE = "roboscale_facetrack"
PROGRAM = "ft_node"
SIGNALS = {"sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}
CONNECT_WAIT_S = 60.0


def _ready_wait_s(workers: int) -> float:
    # Each node starts an interpreter, imports rospy and OpenCV and registers: on 2 cores,
    # about a third of a second of CPU each.
    return 90.0 + 0.5 * workers


def launch_nodes(cfg: TrackerConfig, harness_port: int, roscore_pid: int, config: Path) -> str:
    """The launch file's nodes: the camera, then the respawning workers and aggregator."""
    camera = f"camera {harness_port} {roscore_pid} {config}"
    nodes = node_xml("camera", PACKAGE, PROGRAM, camera, respawn=False, screen=True)
    nodes += node_xml("aggregator", PACKAGE, PROGRAM, f"aggregator 0 {config}", True, True)
    for i in range(cfg.workers):
        nodes += node_xml(f"worker_{i}", PACKAGE, PROGRAM, f"worker {i} {config}", True, True)
    return nodes


class Ros1Tracker(ExternalTracker):
    name = "ros1"

    def __init__(
        self, cfg: TrackerConfig, link: Link, log: Path, launch: Roslaunch, build: Path
    ) -> None:
        super().__init__(cfg, link, log)
        self.launch = launch
        self.build = build

    def on_other(self, message: bytes) -> None:
        if message[:1] != b"H":
            super().on_other(message)

    def _kill(self, worker: int, method: str) -> int:
        if method not in SIGNALS:
            allowed = ", ".join(SIGNALS)
            raise UserError(f"kills.method: the ros1 stack cannot kill by {method!r}: {allowed}")
        event = self.instances.get((Role.WORKER, worker))
        if event is None or not _is_node(event.os_pid):
            self.counters["kills_missed"] += 1
            return 0
        os.kill(event.os_pid, SIGNALS[method])
        return event.os_pid

    def _pids(self) -> list[tuple[int, str, int]]:
        core = self.launch.core.pid
        found = [(core, "roscore", 0)] + [(pid, "rosmaster/rosout", 0) for pid in _children(core)]
        if self.launch.proc is not None:
            found.append((self.launch.proc.pid, "roslaunch", 0))
        for (role, _), event in sorted(self.instances.items()):
            if _is_node(event.os_pid):
                found.append((event.os_pid, role.name.lower(), int(role == Role.WORKER)))
        return found

    def processes(self) -> list[ProcessUsage]:
        found = (process_usage(pid, role, workers) for pid, role, workers in self._pids())
        return [u for u in found if u is not None]

    def alive_workers(self) -> int:
        return sum(
            1
            for (role, _), event in self.instances.items()
            if role == Role.WORKER and _is_node(event.os_pid)
        )

    def stop(self) -> None:
        with contextlib.suppress(LinkClosed, OSError):
            self.link.send(b"Q")
        self.link.close()
        self.launch.stop()
        for event in self.instances.values():  # roslaunch stops its nodes; make sure
            if _is_node(event.os_pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(event.os_pid, signal.SIGKILL)
        shutil.rmtree(self.build, ignore_errors=True)


def _is_node(pid: int) -> bool:
    """A live node program of ours (checked by its command line: pids get reused)."""
    if pid <= 0:
        return False
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return PROGRAM.encode() in cmdline and state != "Z"


class Ros1Stack:
    name = "ros1"
    summary = "ROS 1: rospy nodes under roslaunch (respawn), one process per worker"
    kill_methods = tuple(SIGNALS)

    def check(self) -> None:
        try:
            Ros1Backend().check()
        except BackendUnavailable as e:
            raise StackUnavailable(f"stack 'ros1': {e.message}", hint=INSTALL_HINT) from None
        if shutil.which("roslaunch") is None or not Path(SYSTEM_PYTHON).exists():
            raise StackUnavailable("stack 'ros1': roslaunch not found", hint=INSTALL_HINT)

    def version(self) -> str:
        return Ros1Backend().version()

    def start(self, cfg: TrackerConfig, workdir: Path) -> Ros1Tracker:
        self.check()
        workdir.mkdir(parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(prefix="roboscale-ros1-"))
        listener = Listener()
        launch: Roslaunch | None = None
        try:
            config = build / "config.json"
            write_text(config, cfg.to_json())
            packages = make_package(build, PACKAGE, {PROGRAM: script(sys.executable)})
            launch = Roslaunch(build, packages)
            nodes = launch_nodes(cfg, listener.port, launch.core.pid, config)
            launch.start(nodes, workdir / "facetrack.log")
            proc = launch.proc
            link = listener.accept(
                "the ROS camera node",
                CONNECT_WAIT_S,
                lambda: proc is not None and proc.poll() is None,
            )
            tracker = Ros1Tracker(cfg, link, workdir / "facetrack.log", launch, build)
        except BaseException:
            if launch is not None:
                launch.stop()
            shutil.rmtree(build, ignore_errors=True)
            raise
        finally:
            listener.close()
        try:
            expected = {(Role.WORKER, i) for i in range(cfg.workers)}
            expected |= {(Role.AGGREGATOR, 0), (Role.CAMERA, 0)}
            tracker.wait_ready(expected, _ready_wait_s(cfg.workers), "the ROS 1 nodes")
        except BaseException as e:
            tracker.stop()
            if isinstance(e, UserError):
                raise UserError(f"{e}; see {workdir / 'facetrack.log'}") from None
            raise
        return tracker


STACK = Ros1Stack()
