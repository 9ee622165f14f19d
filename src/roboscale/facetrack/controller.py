"""The camera controller: pan or tilt when the averaged face is off centre by more than the
deadband (the paper: about 80 px at 640x480; `TrackerConfig.deadband` scales it to the view).

A command is relative to where the camera looked when the frame was captured, and asks to
bring the face's centre to the view's centre on each axis that is past the deadband.
"""

from __future__ import annotations

from dataclasses import dataclass

from roboscale.facetrack.geometry import Rect, center_offset


@dataclass(frozen=True, slots=True)
class Move:
    pan: float  # px, positive: look right
    tilt: float  # px, positive: look down

    @property
    def still(self) -> bool:
        return self.pan == 0 and self.tilt == 0


STILL = Move(0.0, 0.0)


class Controller:
    def __init__(self, view_w: int, view_h: int, deadband_px: float) -> None:
        self.view_w, self.view_h, self.deadband = view_w, view_h, deadband_px

    def decide(self, estimate: Rect | None) -> Move:
        if estimate is None:
            return STILL
        dx, dy = center_offset(estimate, self.view_w, self.view_h)
        return Move(
            dx if abs(dx) > self.deadband else 0.0,
            dy if abs(dy) > self.deadband else 0.0,
        )
