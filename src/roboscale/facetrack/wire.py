"""A versioned binary encoding of the pipeline's messages: a struct header, then raw pixels.

Every stack (runtime processes, rospy nodes, Erlang port programs) carries these same
bytes, so no stack pays for a different serialization. Stdlib only (numpy is imported
when a frame's pixels are turned into an array). No pickle: decoding never runs code.

Layout, little-endian; every message starts with magic b"FT", format version, kind:

- kind 1, frame: id u64, capture_ns i64, height u16, width u16, has_truth u8, 3 pad,
  truth 4 f32; then height*width grey bytes, row by row;
- kind 2, result: frame id u64, capture_ns i64, received_ns i64, detected_ns i64,
  worker u32, found u8, 3 pad, rect 4 f32;
- kind 3, command: frame id u64, capture_ns i64, command_ns i64, pan f32, tilt f32;
- kind 4, handled: frame id u64, result_ns i64, command_ns i64, received_ns i64,
  detected_ns i64, worker u32, found u8, has_estimate u8, 2 pad, rect 4 f32,
  estimate 4 f32: the controller's log entry (`records.Handled`), which stacks whose
  controller runs in another process (rospy nodes, Erlang port programs) send back to
  the camera.

Rectangles are x, y, w, h. A message that is too short, too long, of another magic,
version or kind raises `WireError`; receivers count and drop it.
"""

from __future__ import annotations

import struct

from roboscale.facetrack.geometry import Rect
from roboscale.facetrack.messages import CameraCommand, DetectionResult, Frame
from roboscale.facetrack.records import Handled

MAGIC = b"FT"
VERSION = 1
FRAME, RESULT, COMMAND, HANDLED = 1, 2, 3, 4
START = struct.Struct("<2sBB")
FRAME_HEAD = struct.Struct("<2sBBQqHHB3x4f")
RESULT_MSG = struct.Struct("<2sBBQqqqIB3x4f")
COMMAND_MSG = struct.Struct("<2sBBQqq2f")
HANDLED_MSG = struct.Struct("<2sBBQqqqqIBB2x4f4f")
NO_RECT = (0.0, 0.0, 0.0, 0.0)


class WireError(ValueError):
    """A malformed message: counted and dropped by whoever received it."""


def kind_of(data: bytes) -> int:
    if len(data) < START.size:
        raise WireError(f"message of {len(data)} bytes is shorter than the 4-byte start")
    magic, version, kind = START.unpack_from(data)
    if magic != MAGIC:
        raise WireError(f"bad magic {magic!r} (want {MAGIC!r})")
    if version != VERSION:
        raise WireError(f"format version {version} is not supported (only {VERSION})")
    if kind not in (FRAME, RESULT, COMMAND, HANDLED):
        raise WireError(f"unknown message kind {kind}")
    return int(kind)


def _rect(values: tuple[float, float, float, float] | None) -> Rect | None:
    return None if values is None else Rect(*values)


def _fields(rect: Rect | None) -> tuple[float, float, float, float]:
    return NO_RECT if rect is None else (rect.x, rect.y, rect.w, rect.h)


def encode_frame(frame: Frame) -> bytes:
    h, w = frame.image.shape
    head = FRAME_HEAD.pack(
        MAGIC, VERSION, FRAME, frame.id, frame.capture_ns, h, w,
        frame.truth is not None, *_fields(frame.truth),
    )  # fmt: skip
    return head + frame.image.tobytes()


def decode_frame(data: bytes) -> Frame:
    import numpy as np

    _expect(data, FRAME, FRAME_HEAD.size)
    _, _, _, frame_id, capture_ns, h, w, has_truth, *truth = FRAME_HEAD.unpack_from(data)
    if len(data) != FRAME_HEAD.size + h * w:
        raise WireError(f"frame {frame_id}: {len(data)} bytes, want {FRAME_HEAD.size + h * w}")
    image = np.frombuffer(data, np.uint8, h * w, FRAME_HEAD.size).reshape(h, w)
    return Frame(frame_id, capture_ns, image, Rect(*truth) if has_truth else None)


def encode_result(result: DetectionResult) -> bytes:
    return RESULT_MSG.pack(
        MAGIC, VERSION, RESULT, result.frame_id, result.capture_ns, result.received_ns,
        result.detected_ns, result.worker, result.rect is not None, *_fields(result.rect),
    )  # fmt: skip


def decode_result(data: bytes) -> DetectionResult:
    _expect(data, RESULT, RESULT_MSG.size, exact=True)
    _, _, _, frame_id, capture_ns, received, detected, worker, found, *rect = RESULT_MSG.unpack(
        data
    )
    return DetectionResult(
        frame_id, capture_ns, worker, Rect(*rect) if found else None, received, detected
    )


def encode_command(command: CameraCommand) -> bytes:
    return COMMAND_MSG.pack(
        MAGIC, VERSION, COMMAND, command.frame_id, command.capture_ns, command.command_ns,
        command.pan, command.tilt,
    )  # fmt: skip


def decode_command(data: bytes) -> CameraCommand:
    _expect(data, COMMAND, COMMAND_MSG.size, exact=True)
    _, _, _, frame_id, capture_ns, command_ns, pan, tilt = COMMAND_MSG.unpack(data)
    return CameraCommand(frame_id, capture_ns, command_ns, pan, tilt)


def encode_handled(h: Handled) -> bytes:
    return HANDLED_MSG.pack(
        MAGIC, VERSION, HANDLED, h.frame_id, h.result_ns, h.command_ns, h.received_ns,
        h.detected_ns, h.worker, h.rect is not None, h.estimate is not None,
        *_fields(h.rect), *_fields(h.estimate),
    )  # fmt: skip


def decode_handled(data: bytes) -> Handled:
    _expect(data, HANDLED, HANDLED_MSG.size, exact=True)
    (
        _,
        _,
        _,
        frame_id,
        result_ns,
        command_ns,
        received,
        detected,
        worker,
        found,
        has_estimate,
        *r,
    ) = HANDLED_MSG.unpack(data)
    return Handled(
        frame_id, worker, result_ns, command_ns, Rect(*r[:4]) if found else None,
        Rect(*r[4:]) if has_estimate else None, received, detected,
    )  # fmt: skip


def _expect(data: bytes, kind: int, size: int, exact: bool = False) -> None:
    got = kind_of(data)
    if got != kind:
        raise WireError(f"message kind {got}, want {kind}")
    if len(data) < size or (exact and len(data) != size):
        raise WireError(f"message kind {kind} of {len(data)} bytes, want {size}")
