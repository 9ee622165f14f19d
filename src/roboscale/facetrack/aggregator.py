"""The paper's aggregator: a deque of the most recent faces whose rectangles are averaged.

Only detected faces enter the deque (a frame without a face adds nothing), so the
estimate holds its last value while the face is lost, and a long deque lags behind a
moving face: that is why quality fell from deque length 1 to 10 in the paper (Table 4).
"""

from __future__ import annotations

from collections import deque

from roboscale.facetrack.config import MAX_DEQUE, ConfigError
from roboscale.facetrack.geometry import Rect, mean_rect


class Aggregator:
    def __init__(self, length: int) -> None:
        if isinstance(length, bool) or not isinstance(length, int) or not 1 <= length <= MAX_DEQUE:
            raise ConfigError("deque_len", f"must be from 1 to {MAX_DEQUE}, got {length!r}")
        self.faces: deque[Rect] = deque(maxlen=length)

    def add(self, face: Rect | None) -> Rect | None:
        """Take one detection result (None: no face) and return the averaged estimate."""
        if face is not None:
            self.faces.append(face)
        return self.estimate

    @property
    def estimate(self) -> Rect | None:
        return mean_rect(self.faces)
