"""Lazy imports of the optional extra: OpenCV and scikit-image.

The rest of roboscale (and `make demo`) needs neither; the face tracker's scene and
detector import them through here, and a missing one is a clear error naming the extra.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from roboscale.errors import UserError

INSTALL_HINT = "pip install 'roboscale[facetrack]'"


def _load(module: str, what: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise UserError(
            f"the face tracker needs {what} ({module}), which is not installed: {exc}",
            hint=INSTALL_HINT,
        ) from None


def cv2() -> ModuleType:
    """OpenCV; version 5 dropped CascadeClassifier and the cascades, so it must be below 5."""
    module = _load("cv2", "OpenCV below version 5 (opencv-python-headless<5)")
    major = int(str(module.__version__).split(".", 1)[0])
    if major >= 5 or not hasattr(module, "CascadeClassifier"):
        raise UserError(
            f"OpenCV {module.__version__} has no CascadeClassifier or Haar cascades "
            "(they were dropped in version 5)",
            hint="pip install 'opencv-python-headless<5'",
        )
    return module


def skimage_data() -> ModuleType:
    """scikit-image's bundled images (camera, astronaut), which need no download."""
    return _load("skimage.data", "scikit-image")
