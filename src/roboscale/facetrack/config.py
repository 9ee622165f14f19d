"""`TrackerConfig`: what every stack is given, a typed, versioned object. Stdlib only.

It crosses process boundaries as JSON (`to_json` / `from_json`) into rospy nodes and
Erlang port programs, which run in Debian's system Python, so it is a dataclass, not a
pydantic model. Every field is checked on construction; a bad value is a `ConfigError`
naming the field and what is allowed.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from roboscale.errors import UserError

CONFIG_VERSION = 1
DISPATCH_POLICIES = ("random", "round_robin", "least_loaded")
CAMERA_MODES = ("scripted", "closed")
KILL_METHODS = ("sigterm", "sigkill", "crash")
KILL_TARGETS = ("worker", "aggregator", "face_supervisor", "aggregator_supervisor")
MAX_WORKERS = 5000
MAX_DEQUE = 1000
MAX_FRAMES = 1_000_000
MIN_FPS = 0.1
MAX_FPS = 1000.0
MAX_KILL_INTERVAL_MS = 1000.0
PAPER_DEADBAND_PX = 80  # at the paper's 640x480


class ConfigError(UserError):
    """A bad face-tracker setting: names the field, the value and what is allowed."""

    def __init__(self, field_name: str, problem: str, where: str = "facetrack") -> None:
        super().__init__(f"{where}: {field_name}: {problem}")
        self.field = field_name
        self.problem = problem


@dataclass(frozen=True)
class KillPlan:
    """Chaos during a run: `count` workers killed by `method` when frame `at_frame` is
    captured, `interval_ms` apart: 0 is all at once (no pause between them, as the paper's
    quality-under-failure runs); its restart timing (Table 5) killed 200 times a second,
    5 ms apart, so that each restart is timed on its own, not behind the others'.

    `sigterm`/`sigkill` signal a worker's OS process; `crash` fails an in-process worker
    (an exception in its callback) for stacks whose workers share a process.
    """

    count: int = 0
    method: str = "sigkill"
    at_frame: int = 0
    # What is killed: workers (the paper's chaos monkey), or once one of the main processes
    # (the aggregator: the ROS main node's part that respawns; an Erlang supervisor), as
    # the paper's Table 5 did.
    target: str = "worker"
    interval_ms: float = 0.0

    def __post_init__(self) -> None:
        _int_in("kills.count", self.count, 0, MAX_WORKERS * 10)
        _choice("kills.method", self.method, KILL_METHODS)
        _int_in("kills.at_frame", self.at_frame, 0, MAX_FRAMES)
        _choice("kills.target", self.target, KILL_TARGETS)
        _number_in("kills.interval_ms", self.interval_ms, 0.0, MAX_KILL_INTERVAL_MS)
        if self.target != "worker" and self.count > 1:
            raise ConfigError("kills.count", f"a {self.target} is one process: 0 or 1")


@dataclass(frozen=True)
class TrackerConfig:
    """One face-tracker run. Defaults are the paper's where it gives one (Table 2)."""

    workers: int = 4
    deque_len: int = 5  # the paper's default; it tested 1, 5 and 10
    dispatch: str = "random"  # the paper's random frame cast
    fps: float = 10.0
    frames: int = 100  # the paper's sequences were 100 images
    seed: int = 1
    view_w: int = 320
    view_h: int = 240
    camera: str = "scripted"  # scripted: the same frames whatever the tracker does
    pan_speed: float = 300.0  # px/s the viewport moves at most
    deadband_px: float | None = None  # None: the paper's 80 px at 640 wide, scaled to view_w
    sprite_scale: float = 0.7  # the astronaut's 95 px face becomes about 66 px (minSize 50)
    noise: float = 0.0  # std of Gaussian pixel noise, grey levels
    blur: int = 0  # Gaussian blur kernel (odd), 0 for none
    late_ms: float = 500.0  # a frame answered later than this after capture is late
    kills: KillPlan = field(default_factory=KillPlan)
    version: int = CONFIG_VERSION

    def __post_init__(self) -> None:
        if self.version != CONFIG_VERSION:
            raise ConfigError("version", f"{self.version!r} is not supported (only 1)")
        _int_in("workers", self.workers, 1, MAX_WORKERS)
        _int_in("deque_len", self.deque_len, 1, MAX_DEQUE)
        _choice("dispatch", self.dispatch, DISPATCH_POLICIES)
        _number_in("fps", self.fps, MIN_FPS, MAX_FPS)
        _int_in("frames", self.frames, 1, MAX_FRAMES)
        _int_in("seed", self.seed, 0, 2**63 - 1)
        _int_in("view_w", self.view_w, 64, 4096)
        _int_in("view_h", self.view_h, 64, 4096)
        _choice("camera", self.camera, CAMERA_MODES)
        _number_in("pan_speed", self.pan_speed, 1.0, 100_000.0)
        if self.deadband_px is not None:
            _number_in("deadband_px", self.deadband_px, 0.0, float(max(self.view_w, self.view_h)))
        _number_in("sprite_scale", self.sprite_scale, 0.3, 3.0)
        _number_in("noise", self.noise, 0.0, 128.0)
        _int_in("blur", self.blur, 0, 31)
        if self.blur and self.blur % 2 == 0:
            raise ConfigError("blur", f"must be 0 or an odd kernel size, got {self.blur}")
        _number_in("late_ms", self.late_ms, 1.0, 600_000.0)
        if not isinstance(self.kills, KillPlan):
            raise ConfigError("kills", "must be a KillPlan")

    @property
    def deadband(self) -> float:
        if self.deadband_px is not None:
            return self.deadband_px
        return PAPER_DEADBAND_PX * self.view_w / 640

    @property
    def duration_s(self) -> float:
        return self.frames / self.fps

    def replace(self, **changes: Any) -> TrackerConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], where: str = "facetrack") -> TrackerConfig:
        """Build from plain values (a spec, a JSON file); unknown keys are errors too."""
        try:
            return _from_dict(cls, raw)
        except ConfigError as e:
            raise ConfigError(e.field, e.problem, where) from None

    @classmethod
    def from_json(cls, text: str) -> TrackerConfig:
        raw = json.loads(text)
        if not isinstance(raw, dict):
            raise ConfigError("(top)", "must be a JSON object")
        return cls.from_dict(raw)


def _from_dict(cls: type[TrackerConfig], raw: dict[str, Any]) -> TrackerConfig:
    known = {f.name for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in known:
            raise ConfigError(str(key), f"unknown setting; allowed: {', '.join(sorted(known))}")
    values = dict(raw)
    kills = values.get("kills")
    if isinstance(kills, dict):
        kill_fields = {f.name for f in dataclasses.fields(KillPlan)}
        for key in kills:
            if key not in kill_fields:
                allowed = ", ".join(sorted(kill_fields))
                raise ConfigError(f"kills.{key}", f"unknown setting; allowed: {allowed}")
        values["kills"] = KillPlan(**kills)
    elif kills is not None and not isinstance(kills, KillPlan):
        raise ConfigError("kills", "must be a mapping with count, method, at_frame, target")
    return cls(**values)


def _int_in(name: str, value: Any, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(name, f"must be a whole number from {low} to {high}, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(name, f"must be from {low} to {high}, got {value}")


def _number_in(name: str, value: Any, low: float, high: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(name, f"must be a number from {low:g} to {high:g}, got {value!r}")
    if not low <= value <= high:
        raise ConfigError(name, f"must be from {low:g} to {high:g}, got {value}")


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(name, f"{value!r} is not one of: {', '.join(allowed)}")
