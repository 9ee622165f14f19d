"""The paper's detector: OpenCV's Haar frontal-face cascade, the largest face wins.

Parameters as in the paper (Table 2): scaleFactor 1.1, minNeighbors 6, minSize 50x50.
OpenCV runs one thread per detector (`cv2.setNumThreads(1)`): workers are the unit of
parallelism in every stack, and OpenCV's own pool would oversubscribe the cores.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from roboscale.errors import UserError
from roboscale.facetrack import _deps
from roboscale.facetrack.geometry import Rect

DEFAULT_CASCADE = "haarcascade_frontalface_default.xml"
SCALE_FACTOR = 1.1
MIN_NEIGHBORS = 6
MIN_SIZE = (50, 50)


def cascade_path(cascade: str = DEFAULT_CASCADE) -> Path:
    """A cascade file: a path, or a name among those OpenCV ships (cv2.data.haarcascades)."""
    candidate = Path(cascade)
    if candidate.is_absolute() or candidate.parent != Path("."):
        found = candidate
    else:
        found = Path(_deps.cv2().data.haarcascades) / cascade
    if not found.is_file():
        raise UserError(
            f"cascade: Haar cascade file {str(found)!r} does not exist",
            hint="give a cascade OpenCV ships (e.g. haarcascade_frontalface_default.xml) "
            "or a path to one; opencv-python-headless<5 ships them",
        )
    return found


class FaceDetector:
    def __init__(self, cascade: str = DEFAULT_CASCADE) -> None:
        cv2 = _deps.cv2()
        path = cascade_path(cascade)
        cv2.setNumThreads(1)
        self._cascade: Any = cv2.CascadeClassifier(str(path))
        if self._cascade.empty():
            raise UserError(f"cascade: OpenCV cannot load {str(path)!r} as a Haar cascade")
        self.path = path

    def detect(self, image: Any) -> Rect | None:
        """The largest face in a grey image, or None."""
        faces = self._cascade.detectMultiScale(
            image, scaleFactor=SCALE_FACTOR, minNeighbors=MIN_NEIGHBORS, minSize=MIN_SIZE
        )
        if len(faces) == 0:
            return None
        x, y, w, h = max(faces, key=lambda f: int(f[2]) * int(f[3]))
        return Rect(float(x), float(y), float(w), float(h))
