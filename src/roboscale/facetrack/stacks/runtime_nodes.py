"""The face tracker's nodes on the roboscale runtime, and the process-worker target.

- `FaceWorker`: the paper's face_server. A durable subscriber of its own frame topic
  `/faces/w<i>` (a restarted instance gets the frames that came meanwhile), detection in
  the runtime's worker pool (OpenCV releases the GIL), results on `/results`.
- `Aggregator`: the aggregator and controller (`TrackerRole`): `/results` in, `/commands`.
- `Camera`: renders a frame per period and sends it to the worker the dispatcher chose.
- `worker_main`: a process worker, as a `ProcessNode` target forked from the zygote: its
  own runtime with one `FaceWorker`, frames imported durably over the Zenoh bridge
  (resuming from a cursor file), results exported.

In-process workers share one detector per pool thread (`thread_detector`): the cascade
takes about 0.3 s and some MB to load, a node is a few KB. Process workers load it once
in the zygote (importing this module does), so a forked worker starts without loading it
and shares its pages with its siblings.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from roboscale.facetrack.detector import FaceDetector
from roboscale.facetrack.pipeline import WorkerRole
from roboscale.jsonfields import Fields
from roboscale.runtime.node import Node

RESULTS = "/results"
COMMANDS = "/commands"
QUEUE = 10_000  # frames a worker's durable inbox holds: more than any run sends it
MAX_LIFETIME_S = 4 * 3600.0  # a process worker its host lost track of still ends

_local = threading.local()
_PRELOADED: FaceDetector | None = None


def frames_topic(worker: int) -> str:
    return f"/faces/w{worker}"


def thread_detector() -> FaceDetector:
    """This thread's detector (the zygote's preloaded one in a forked process worker)."""
    detector: FaceDetector | None = getattr(_local, "detector", None)
    if detector is None:
        detector = _local.detector = _PRELOADED or FaceDetector()
    return detector


class FaceWorker(Node):
    def on_start(self) -> None:
        self.index = int(self.get_param("index"))
        self.results = self.publisher(RESULTS)
        self.subscribe(
            frames_topic(self.index), self.on_frame, durable=True, blocking=True, queue_size=QUEUE
        )

    def on_frame(self, data: bytes) -> None:
        answer = WorkerRole(self.index, thread_detector()).handle(data)
        if answer is not None:
            self.results.publish(answer)


class Aggregator(Node):
    def on_start(self) -> None:
        self.role = self.get_param("role")  # a TrackerRole, kept by the host across restarts
        commands = self.publisher(COMMANDS)
        self.subscribe(RESULTS, lambda data: self._handle(data, commands.publish), queue_size=QUEUE)

    def _handle(self, data: bytes, publish: Callable[[bytes], None]) -> None:
        command = self.role.handle(data)
        if command is not None:
            publish(command)


class Camera(Node):
    """Calls `tick()` (the host's) every frame period and `on_command` for each command."""

    def on_start(self) -> None:
        self.timer(float(self.get_param("period_s")), self.get_param("tick"))
        self.subscribe(COMMANDS, self.get_param("on_command"), queue_size=QUEUE)


def worker_main(config: object, ready: Callable[[], None]) -> int:
    """A process worker: `index`, `connect` (the host's endpoint), `cursor` (a file)."""
    settings = Fields(config, "face worker config")  # checked before anything starts
    index, connect = settings.whole("index"), settings.text("connect")
    cursor = Path(settings.text("cursor"))
    from roboscale.runtime.bridge import Bridge, bridge_config
    from roboscale.runtime.executor import Runtime
    from roboscale.runtime.node import NodeRecipe
    from roboscale.runtime.supervisor import ChildSpec, Supervisor

    rt = Runtime(workers=1).start()
    sup = Supervisor(
        rt, "worker", [ChildSpec(NodeRecipe(f"w{index}", FaceWorker, {"index": index}))]
    )
    rt.wait(sup.start_async())  # the durable subscription exists before the bridge opens
    topic = frames_topic(index)
    raw = {"connect": [connect], "import": [topic], "durable": [topic],
           "export": [RESULTS]}  # fmt: skip
    bridge = Bridge(rt, bridge_config(raw), cursors={topic: cursor}).open()
    ready()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait(MAX_LIFETIME_S)
    bridge.close()
    rt.wait(sup.stop_async(), timeout_s=5.0)
    rt.close()
    return 0


if os.environ.get("ROBOSCALE_FACETRACK_PRELOAD") == "1":  # set for the zygote only
    _PRELOADED = FaceDetector()
