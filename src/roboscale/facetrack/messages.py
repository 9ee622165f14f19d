"""The three messages of the pipeline, as every stack carries them. Stdlib only.

camera --Frame--> worker --DetectionResult--> aggregator/controller --CameraCommand--> camera.
Times are CLOCK_MONOTONIC nanoseconds (`time.monotonic_ns()`), one clock for every process
of the machine, so latencies across processes are exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from roboscale.facetrack.geometry import Rect

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Image = npt.NDArray[np.uint8]
else:
    Image = Any


@dataclass(frozen=True, slots=True)
class Frame:
    """One camera frame: id, capture time, grey image (uint8, H x W), true face box in view
    coordinates (None: the face is not in view)."""

    id: int
    capture_ns: int
    image: Image
    truth: Rect | None


@dataclass(frozen=True, slots=True)
class DetectionResult:
    """A worker's answer for one frame: the largest face (None: no face) and when it worked."""

    frame_id: int
    capture_ns: int
    worker: int
    rect: Rect | None
    received_ns: int  # the worker got the frame
    detected_ns: int  # the detector returned


@dataclass(frozen=True, slots=True)
class CameraCommand:
    """The controller's decision for one frame's result: move the view by (pan, tilt) px from
    where it looked at that frame (0, 0: stay)."""

    frame_id: int
    capture_ns: int
    command_ns: int
    pan: float
    tilt: float
