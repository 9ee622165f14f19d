"""The pipeline's roles as plain objects, the same code in every stack.

A stack only moves bytes (`wire`) between them and supervises them:

    camera = CameraRole(cfg)                       # in the camera node / main process
    data, worker = camera.next_frame(frame_id)     # render, stamp, choose a worker, log
    ... deliver `data` to worker `worker` ...
    worker_role = WorkerRole(index)                # in each detector worker
    answer = worker_role.handle(data)              # decode, detect, encode the result
    ... deliver `answer` to the aggregator ...
    tracker = TrackerRole(cfg)                     # aggregator + controller
    command = tracker.handle(answer)               # average, decide, log; None if malformed
    ... deliver `command` to the camera ...
    camera.apply(command)                          # closed mode moves the view

`camera.dispatched` and `tracker.handled` are the two logs `records.assemble` joins.
Malformed messages are counted (`malformed`) and dropped.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from roboscale.facetrack import wire
from roboscale.facetrack.aggregator import Aggregator
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.controller import Controller
from roboscale.facetrack.dispatch import Dispatcher
from roboscale.facetrack.messages import CameraCommand, DetectionResult
from roboscale.facetrack.records import Dispatched, Handled

if TYPE_CHECKING:
    from roboscale.facetrack.detector import FaceDetector


class CameraRole:
    def __init__(self, cfg: TrackerConfig) -> None:
        from roboscale.facetrack.scene import Scene

        self.cfg = cfg
        self.scene = Scene(cfg)
        self.dispatcher = Dispatcher(cfg.dispatch, cfg.workers, cfg.seed)
        # Per worker, the frames sent and not answered yet (id -> bytes): what a stack
        # may send again when the worker restarts (`unanswered`).
        self.pending: list[dict[int, bytes]] = [{} for _ in range(cfg.workers)]
        self.dispatched: list[Dispatched] = []
        self.malformed = 0

    def next_frame(self, frame_id: int) -> tuple[bytes, int]:
        """Capture frame `frame_id` now; its bytes and the worker it goes to."""
        frame = self.scene.capture(frame_id, time.monotonic_ns())
        worker = self.dispatcher.choose(self.outstanding)
        data = wire.encode_frame(frame)
        self.pending[worker][frame.id] = data
        self.dispatched.append(
            Dispatched(frame.id, frame.capture_ns, time.monotonic_ns(), worker, frame.truth)
        )
        return data, worker

    @property
    def outstanding(self) -> list[int]:
        return [len(p) for p in self.pending]

    def unanswered(self, worker: int) -> list[bytes]:
        """The frames worker `worker` holds and has not answered, oldest first."""
        return [self.pending[worker][i] for i in sorted(self.pending[worker])]

    def apply(self, data: bytes) -> CameraCommand | None:
        """A command from the controller: frees its worker's slot; moves the view (closed)."""
        try:
            command = wire.decode_command(data)
        except wire.WireError:
            self.malformed += 1
            return None
        if 0 <= command.frame_id < len(self.dispatched):
            self.pending[self.dispatched[command.frame_id].worker].pop(command.frame_id, None)
        if self.cfg.camera == "closed" and (command.pan or command.tilt):
            self.scene.command(command.frame_id, command.pan, command.tilt)
        return command


class WorkerRole:
    """One detector worker: frame bytes in, result bytes out. Workers of one process may
    share a detector per thread (`detector`): loading the cascade takes about 0.3 s."""

    def __init__(self, index: int, detector: FaceDetector | None = None) -> None:
        from roboscale.facetrack.detector import FaceDetector

        self.index = index
        self.detector = detector or FaceDetector()
        self.malformed = 0

    def handle(self, data: bytes) -> bytes | None:
        received = time.monotonic_ns()
        try:
            frame = wire.decode_frame(data)
        except wire.WireError:
            self.malformed += 1
            return None
        rect = self.detector.detect(frame.image)
        result = DetectionResult(
            frame.id, frame.capture_ns, self.index, rect, received, time.monotonic_ns()
        )
        return wire.encode_result(result)


class TrackerRole:
    """The aggregator and the camera controller: result bytes in, command bytes out.
    A second result for a frame (a frame sent again after its worker restarted) is
    counted in `duplicates` and dropped: it must not weigh twice in the average."""

    def __init__(self, cfg: TrackerConfig) -> None:
        self.aggregator = Aggregator(cfg.deque_len)
        self.controller = Controller(cfg.view_w, cfg.view_h, cfg.deadband)
        self.handled: list[Handled] = []
        self.seen: set[int] = set()
        self.malformed = 0
        self.duplicates = 0

    def handle(self, data: bytes) -> bytes | None:
        result_ns = time.monotonic_ns()
        try:
            result = wire.decode_result(data)
        except wire.WireError:
            self.malformed += 1
            return None
        if result.frame_id in self.seen:
            self.duplicates += 1
            return None
        self.seen.add(result.frame_id)
        estimate = self.aggregator.add(result.rect)
        move = self.controller.decide(estimate)
        command_ns = time.monotonic_ns()
        self.handled.append(
            Handled(
                result.frame_id, result.worker, result_ns, command_ns, result.rect, estimate,
                result.received_ns, result.detected_ns,
            )
        )  # fmt: skip
        command = CameraCommand(result.frame_id, result.capture_ns, command_ns, move.pan, move.tilt)
        return wire.encode_command(command)
