"""Rectangles, the Jaccard index and the tracking error. Stdlib only.

Coordinates are image pixels, x to the right and y down; a rectangle is its
top-left corner and its size. Detections are whole pixels, averages and the
scaled ground truth are not, so the fields are floats.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rect:
    x: float
    y: float
    w: float
    h: float

    @property
    def area(self) -> float:
        return max(self.w, 0.0) * max(self.h, 0.0)

    @property
    def center(self) -> tuple[float, float]:
        return (self.x + self.w / 2, self.y + self.h / 2)

    def shifted(self, dx: float, dy: float) -> Rect:
        return Rect(self.x + dx, self.y + dy, self.w, self.h)

    def intersection(self, other: Rect) -> Rect | None:
        """The overlap of two rectangles, or None when they do not overlap (touching is none)."""
        x0, y0 = max(self.x, other.x), max(self.y, other.y)
        x1 = min(self.x + self.w, other.x + other.w)
        y1 = min(self.y + self.h, other.y + other.h)
        if x1 <= x0 or y1 <= y0:
            return None
        return Rect(x0, y0, x1 - x0, y1 - y0)


def jaccard(a: Rect, b: Rect) -> float:
    """Intersection over union of two rectangles, over both axes: J = Aov / (Aa + Ab - Aov).

    The paper's formula (1). Its original scripts used the x extent only, and one divided by
    Aa + Ab, which caps the score at 0.5; this is the true rectangle formula. 0 without overlap.
    """
    overlap = a.intersection(b)
    if overlap is None:
        return 0.0
    union = a.area + b.area - overlap.area
    return overlap.area / union if union > 0 else 0.0


def mean_rect(rects: Iterable[Rect]) -> Rect | None:
    """The component-wise mean of rectangles (the aggregator's averaged face); None if empty."""
    items = list(rects)
    if not items:
        return None
    n = len(items)
    return Rect(
        sum(r.x for r in items) / n,
        sum(r.y for r in items) / n,
        sum(r.w for r in items) / n,
        sum(r.h for r in items) / n,
    )


def center_offset(rect: Rect, view_w: int, view_h: int) -> tuple[float, float]:
    """How far the rectangle's centre lies from the view's centre: (right, down) in pixels."""
    cx, cy = rect.center
    return (cx - view_w / 2, cy - view_h / 2)


def tracking_error(truth: Rect | None, view_w: int, view_h: int) -> float | None:
    """Distance in pixels from the true face's centre to the view's centre (None: out of view).

    What a tracker minimizes: a camera that follows the face keeps it near the centre.
    """
    if truth is None:
        return None
    dx, dy = center_offset(truth, view_w, view_h)
    return math.hypot(dx, dy)


def clip_to_view(rect: Rect, view_w: int, view_h: int, min_visible: float) -> Rect | None:
    """The part of `rect` inside the view, or None when less than `min_visible` of it shows."""
    inside = rect.intersection(Rect(0, 0, view_w, view_h))
    if inside is None or rect.area <= 0 or inside.area < min_visible * rect.area:
        return None
    return inside
