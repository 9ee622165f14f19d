"""A simulated pan-tilt camera with exact ground truth, from images that ship in packages.

- Background: scikit-image's `data.camera()` scaled 2x to a 1024-wide scene. Its rows
  below 780 are cut: at that scale the Haar cascade finds a false face in the grass
  there (tested window by window over the whole scene: no other false detection).
- Face: scikit-image's `data.astronaut()` head as a sprite, blended in with a soft oval
  mask. OpenCV's frontal-face cascade finds the face at x 177, y 66, 95x95 in the
  512x512 image; that box, scaled with the sprite, is the ground truth.
- The face follows a seeded `Trajectory`; the camera is a `Viewport` that pans and tilts
  at a bounded speed. `scripted` mode aims the view at the true face whenever it is more
  than the deadband off centre (the same frames whatever the tracker does, as the
  paper's prepared image sets); `closed` mode moves only on the tracker's commands.
- Noise and blur are optional and seeded per frame.

A frame's truth is the face box in view coordinates, clipped to the view; None when the
face is away or less than half of it shows.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from roboscale.facetrack import _deps
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.geometry import Rect, clip_to_view
from roboscale.facetrack.messages import Frame
from roboscale.facetrack.trajectory import Trajectory, Viewport

if TYPE_CHECKING:
    from roboscale.facetrack.messages import Image
else:
    Image = Any

ASTRONAUT_FACE = Rect(177, 66, 95, 95)  # the cascade's box in data.astronaut()
SPRITE_CROP = (127, 16, 200, 200)  # x, y, w, h: the head with a margin around the face
SCENE_SCALE = 2
SCENE_ROWS = 780  # rows of the scaled background kept (see the module docstring)
MIN_VISIBLE = 0.5  # share of the face box that must be in view for it to count as there
VIEW_HISTORY = 4096  # view positions remembered for commands that refer to a frame


class Scene:
    """The camera of one run. `capture(frame_id, now_ns)` renders frame `frame_id` (time
    frame_id / fps in the scene), `command(frame_id, pan, tilt)` aims the camera (closed
    mode) relative to where it looked when that frame was captured."""

    def __init__(self, cfg: TrackerConfig) -> None:
        import numpy as np

        self.cfg = cfg
        self.background, self.sprite, self.alpha, self.face = _assets(cfg.sprite_scale)
        scene_h, scene_w = self.background.shape
        half = self.sprite.shape[1] / 2
        bounds = (half, half, scene_w - half, scene_h - half)
        self.trajectory = Trajectory(cfg.seed, cfg.duration_s + 1.0, bounds)
        self.viewport = Viewport(scene_w, scene_h, cfg.view_w, cfg.view_h, cfg.pan_speed)
        x, y, _ = self.trajectory.at(0.0)
        self.viewport.cx, self.viewport.cy = self.viewport._clamp(x, y)
        self.viewport.target = (self.viewport.cx, self.viewport.cy)
        self._views: OrderedDict[int, tuple[float, float]] = OrderedDict()
        self._np = np

    def capture(self, frame_id: int, now_ns: int) -> Frame:
        cfg = self.cfg
        x, y, visible = self.trajectory.at(frame_id / cfg.fps)
        if cfg.camera == "scripted" and visible:
            self._aim_at(x, y)
        self.viewport.step(1.0 / cfg.fps)
        self._remember(frame_id)
        ox, oy = self.viewport.origin
        image = self.background[oy : oy + cfg.view_h, ox : ox + cfg.view_w].copy()
        sprite_x = round(x - self.sprite.shape[1] / 2)
        sprite_y = round(y - self.sprite.shape[0] / 2)
        truth = None
        if visible:
            self._paste(image, sprite_x - ox, sprite_y - oy)
            face = self.face.shifted(sprite_x - ox, sprite_y - oy)
            truth = clip_to_view(face, cfg.view_w, cfg.view_h, MIN_VISIBLE)
        return Frame(frame_id, now_ns, self._degrade(image, frame_id), truth)

    def command(self, frame_id: int, pan: float, tilt: float) -> None:
        """Aim the camera `pan`, `tilt` px from where it looked at frame `frame_id`."""
        cx, cy = self._views.get(frame_id, (self.viewport.cx, self.viewport.cy))
        self.viewport.aim(cx + pan, cy + tilt)

    def _aim_at(self, x: float, y: float) -> None:
        vp = self.viewport
        if abs(x - vp.cx) > self.cfg.deadband or abs(y - vp.cy) > self.cfg.deadband:
            vp.aim(x, y)

    def _remember(self, frame_id: int) -> None:
        self._views[frame_id] = (self.viewport.cx, self.viewport.cy)
        if len(self._views) > VIEW_HISTORY:
            self._views.popitem(last=False)

    def _paste(self, image: Image, left: int, top: int) -> None:
        """Blend the sprite into the view at (left, top), clipped to the view."""
        h, w = self.sprite.shape
        x0, y0 = max(left, 0), max(top, 0)
        x1, y1 = min(left + w, image.shape[1]), min(top + h, image.shape[0])
        if x1 <= x0 or y1 <= y0:
            return
        region = (slice(y0 - top, y1 - top), slice(x0 - left, x1 - left))
        a = self.alpha[region]
        under = image[y0:y1, x0:x1].astype(self._np.float32)
        blended = under * (1 - a) + self.sprite[region] * a
        image[y0:y1, x0:x1] = blended.astype(self._np.uint8)

    def _degrade(self, image: Image, frame_id: int) -> Image:
        cfg = self.cfg
        np = self._np
        if cfg.blur:
            image = _deps.cv2().GaussianBlur(image, (cfg.blur, cfg.blur), 0)
        if cfg.noise > 0:
            rng = np.random.default_rng((cfg.seed, frame_id))
            noisy = image + rng.normal(0.0, cfg.noise, image.shape)
            image = np.clip(noisy, 0, 255).astype(np.uint8)
        return image


_ASSETS: dict[float, tuple[Image, Image, Any, Rect]] = {}


def _assets(sprite_scale: float) -> tuple[Image, Image, Any, Rect]:
    """Background, sprite, its alpha mask and the face box inside the sprite (cached)."""
    if sprite_scale in _ASSETS:
        return _ASSETS[sprite_scale]
    import numpy as np

    cv2, data = _deps.cv2(), _deps.skimage_data()
    background = cv2.resize(data.camera(), None, fx=SCENE_SCALE, fy=SCENE_SCALE)[:SCENE_ROWS]
    grey = cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2GRAY)
    cx, cy, cw, ch = SPRITE_CROP
    size = (round(cw * sprite_scale), round(ch * sprite_scale))
    sprite = cv2.resize(grey[cy : cy + ch, cx : cx + cw], size, interpolation=cv2.INTER_AREA)
    yy, xx = np.mgrid[0 : size[1], 0 : size[0]].astype(np.float32)
    # A soft oval: opaque over the head, fading to the background at the crop's edge.
    r = np.hypot((xx - size[0] / 2) / (size[0] / 2), (yy - size[1] / 2) / (size[1] / 2))
    alpha = np.clip((1.0 - r) / 0.25, 0.0, 1.0).astype(np.float32)
    f = ASTRONAUT_FACE
    face = Rect(
        (f.x - cx) * size[0] / cw, (f.y - cy) * size[1] / ch, f.w * size[0] / cw, f.h * size[1] / ch
    )
    _ASSETS[sprite_scale] = (np.ascontiguousarray(background), sprite, alpha, face)
    return _ASSETS[sprite_scale]
