"""The face's path through the scene and the viewport's motion. Stdlib only, seeded.

The path is a sequence of segments in time (so it does not depend on the frame rate):
smooth moves (eased, at a bounded speed), sudden jumps, holds, and stretches where the
person steps out of view (the face is not drawn, there is no ground truth). A jump is
short enough to stay near the view, so a tracker can find the face again.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

SMOOTH, JUMP, HOLD, AWAY = "smooth", "jump", "hold", "away"
KIND_WEIGHTS = ((SMOOTH, 0.55), (HOLD, 0.2), (JUMP, 0.15), (AWAY, 0.1))
SMOOTH_DISTANCE = (60.0, 200.0)  # px in the scene
SMOOTH_SPEED = (40.0, 120.0)  # px/s
JUMP_DISTANCE = (30.0, 80.0)
HOLD_S = (0.3, 1.0)
AWAY_S = (0.5, 1.5)
JUMP_S = 0.001  # a jump is a step: it takes no time


@dataclass(frozen=True, slots=True)
class Segment:
    kind: str
    t0: float
    t1: float
    start: tuple[float, float]
    end: tuple[float, float]

    def at(self, t: float) -> tuple[float, float]:
        if self.kind != SMOOTH or self.t1 <= self.t0:
            return self.end if self.kind == JUMP else self.start
        u = min(max((t - self.t0) / (self.t1 - self.t0), 0.0), 1.0)
        ease = u * u * (3 - 2 * u)  # smoothstep: starts and stops gently
        return (
            self.start[0] + (self.end[0] - self.start[0]) * ease,
            self.start[1] + (self.end[1] - self.start[1]) * ease,
        )


class Trajectory:
    """Where the face's centre is at time t (scene pixels), and whether it is in the scene.

    `bounds` is (x0, y0, x1, y1): the centre stays inside it.
    """

    def __init__(self, seed: int, duration_s: float, bounds: tuple[float, float, float, float]):
        self.bounds = bounds
        self.rng = random.Random(seed)
        x0, y0, x1, y1 = bounds
        self.segments: list[Segment] = []
        here = ((x0 + x1) / 2, (y0 + y1) / 2)
        t = 0.0
        # The first second is a hold, so a tracker starts on a visible, still face.
        self.segments.append(Segment(HOLD, 0.0, 1.0, here, here))
        t = 1.0
        while t <= duration_s:
            segment = self._next(t, here)
            self.segments.append(segment)
            here, t = segment.end, segment.t1

    def _next(self, t: float, here: tuple[float, float]) -> Segment:
        rng = self.rng
        kind = rng.choices([k for k, _ in KIND_WEIGHTS], [w for _, w in KIND_WEIGHTS])[0]
        if kind == SMOOTH:
            end = self._offset(here, rng.uniform(*SMOOTH_DISTANCE))
            speed = rng.uniform(*SMOOTH_SPEED)
            length = math.dist(here, end)
            return Segment(SMOOTH, t, t + max(length / speed, 0.1), here, end)
        if kind == JUMP:
            return Segment(
                JUMP, t, t + JUMP_S, here, self._offset(here, rng.uniform(*JUMP_DISTANCE))
            )
        span = HOLD_S if kind == HOLD else AWAY_S
        return Segment(kind, t, t + rng.uniform(*span), here, here)

    def _offset(self, here: tuple[float, float], distance: float) -> tuple[float, float]:
        angle = self.rng.uniform(0, 2 * math.pi)
        x0, y0, x1, y1 = self.bounds
        x = min(max(here[0] + distance * math.cos(angle), x0), x1)
        y = min(max(here[1] + distance * math.sin(angle), y0), y1)
        return (x, y)

    def segment_at(self, t: float) -> Segment:
        # Segments are few (a few per second) and runs short; a bisection is not worth it.
        for segment in self.segments:
            if t < segment.t1:
                return segment
        return self.segments[-1]

    def at(self, t: float) -> tuple[float, float, bool]:
        """(x, y, visible) of the face centre at time t seconds."""
        segment = self.segment_at(t)
        x, y = segment.at(t)
        return (x, y, segment.kind != AWAY)


class Viewport:
    """The pan-tilt camera's view: its centre moves towards a target at a bounded speed and
    stays inside the scene. `pan_speed` is in px/s; `step(dt)` advances by dt seconds."""

    def __init__(
        self, scene_w: int, scene_h: int, view_w: int, view_h: int, pan_speed: float
    ) -> None:
        self.scene_w, self.scene_h = scene_w, scene_h
        self.view_w, self.view_h = view_w, view_h
        self.pan_speed = pan_speed
        self.cx, self.cy = scene_w / 2, scene_h / 2
        self.target = (self.cx, self.cy)

    def aim(self, x: float, y: float) -> None:
        """Move towards (x, y) (scene pixels), clamped so the view stays in the scene."""
        self.target = self._clamp(x, y)

    def nudge(self, pan: float, tilt: float) -> None:
        """A relative camera command: move the target by (pan, tilt) pixels."""
        self.aim(self.target[0] + pan, self.target[1] + tilt)

    def step(self, dt: float) -> None:
        dx, dy = self.target[0] - self.cx, self.target[1] - self.cy
        dist = math.hypot(dx, dy)
        reach = self.pan_speed * dt
        if dist <= reach:
            self.cx, self.cy = self.target
        else:
            self.cx += dx * reach / dist
            self.cy += dy * reach / dist

    def _clamp(self, x: float, y: float) -> tuple[float, float]:
        half_w, half_h = self.view_w / 2, self.view_h / 2
        return (
            min(max(x, half_w), self.scene_w - half_w),
            min(max(y, half_h), self.scene_h - half_h),
        )

    @property
    def origin(self) -> tuple[int, int]:
        """The view's top-left corner in the scene, whole pixels (what gets cropped)."""
        return (round(self.cx - self.view_w / 2), round(self.cy - self.view_h / 2))
