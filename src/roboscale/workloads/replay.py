"""Message streams a sender replays at their recorded times: generated Stata-like sensor
streams, or a bag the lab turned into a stream file. Stdlib only (ros1 agents).

A stream is its topics and its frames: (offset from the first message in ns, topic,
the message as serialized bytes). Two sources:

- `stata`: the thesis's MIT Stata Center replay, generated (the data set is not
  shipped): `/base_scan` sensor_msgs/LaserScan at 20 Hz (about 4.25 KB: 1047 ranges of a
  room that drift smoothly as the robot moves, with Gaussian noise) and
  `/camera/rgb/image_raw` sensor_msgs/Image at 30 Hz (640x480 mono8, 307,200 B of pixels
  that pan frame to frame, with a band of fresh noise), 60 s, serialized for ROS 1 or
  as ROS 2's CDR (`encoding`: what the trial's backend carries);
- a stream file (`write_stream_file`) that the lab wrote from a bag (`roboscale.bags`):
  no pickle, no code, just a JSON header line and length-prefixed frames.

The sender aims frame i at `start + offset_i / rate_factor` (absolute deadlines, as
`stream.pace`), looping over the stream when asked; each body is built before its
deadline, so building it is never counted as latency.
"""

from __future__ import annotations

import json
import math
import os
import random
import struct
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from roboscale import safewrite
from roboscale.workloads.stream import pace_deadlines

STATA = "stata"
STREAM_MAGIC = b"ROBOSCALE-STREAM 1\n"
FRAME = struct.Struct("<qII")  # offset_ns, topic index, body length
MAX_HEADER = 1 << 20
SCAN_TOPIC, IMAGE_TOPIC = "/base_scan", "/camera/rgb/image_raw"
SCAN_RANGES = 1047  # about 4.25 KB serialized, as the thesis's bag
IMAGE_W, IMAGE_H = 640, 480
STATA_SECONDS = 60
SCAN_HZ, IMAGE_HZ = 20, 30
ENCODINGS = ("ros1", "cdr")  # ROS 1 serialization; ROS 2's CDR (little endian)
CDR_LE = b"\0\1\0\0"  # the encapsulation header of CDR, little endian, as ROS 2 sends


class StreamError(ValueError):
    """A stream file this roboscale cannot read."""


@dataclass(frozen=True)
class StreamTopic:
    """One topic of a stream: its name, message type and serialization (ros1 or cdr)."""

    name: str
    msgtype: str
    encoding: str
    definition: str = ""  # the type's full text, for recordings (ROS 1: with its deps)


class Stream:
    """Frames in time order; `body(i)` builds or returns frame i's serialized message."""

    def __init__(
        self,
        topics: tuple[StreamTopic, ...],
        offsets: list[int],
        topic_of: list[int],
        span_ns: int | None = None,
    ) -> None:
        """`span_ns`: one pass, after which a loop starts again (default: the last offset
        plus the mean gap, so that a loop keeps the rhythm)."""
        if not offsets:
            raise StreamError("the stream has no messages")
        self.topics = topics
        self.offsets = offsets
        self.topic_of = topic_of
        n, last = len(offsets), offsets[-1]
        self.span_ns = span_ns or last + (last // (n - 1) if n > 1 else 1_000_000)

    def __len__(self) -> int:
        return len(self.offsets)

    def body(self, i: int) -> bytes:
        raise NotImplementedError

    def prepare(self, frames: Iterable[int]) -> None:
        """Build ahead what would be slow to build on the way (before the trial starts)."""
        return None

    def schedule(
        self, total: int, loop: bool, topic: int | None = None
    ) -> Iterator[tuple[int, int]]:
        """(offset_ns, frame index) of the first `total` sends, looping or not; of one
        topic's frames only when `topic` is given (at their offsets in the whole stream)."""
        frames: Sequence[int] = range(len(self.offsets))
        if topic is not None:
            frames = [i for i, k in enumerate(self.topic_of) if k == topic]
        n = len(frames)
        if not n:
            return
        count = total if loop else min(total, n)
        span = self.span_ns
        for k in range(count):
            i = frames[k % n]
            yield (k // n) * span + self.offsets[i], i


class FileStream(Stream):
    def __init__(self, topics: tuple[StreamTopic, ...], frames: list[tuple[int, int, bytes]]):
        super().__init__(topics, [f[0] for f in frames], [f[1] for f in frames])
        self._bodies = [f[2] for f in frames]

    def body(self, i: int) -> bytes:
        return self._bodies[i]


def write_stream_file(
    path: Path, topics: list[StreamTopic], frames: list[tuple[int, int, bytes]]
) -> None:
    """Write a stream: a magic line, a JSON line of the topics, then frames."""
    with os.fdopen(safewrite.open_stream(path), "wb") as f:  # no link at `path` followed
        f.write(STREAM_MAGIC)
        f.write(json.dumps([asdict(t) for t in topics]).encode() + b"\n")
        for offset, topic, body in frames:
            f.write(FRAME.pack(offset, topic, len(body)))
            f.write(body)


def read_stream_file(path: Path) -> FileStream:
    data = path.read_bytes()
    if not data.startswith(STREAM_MAGIC):
        raise StreamError(f"{path}: not a roboscale stream file")
    end = data.find(b"\n", len(STREAM_MAGIC), len(STREAM_MAGIC) + MAX_HEADER)
    if end < 0:
        raise StreamError(f"{path}: no topic line")
    topics = tuple(StreamTopic(**t) for t in json.loads(data[len(STREAM_MAGIC) : end]))
    frames, pos = [], end + 1
    while pos < len(data):
        if pos + FRAME.size > len(data):
            raise StreamError(f"{path}: truncated frame header at byte {pos}")
        offset, topic, size = FRAME.unpack_from(data, pos)
        pos += FRAME.size
        if pos + size > len(data) or topic >= len(topics):
            raise StreamError(f"{path}: bad frame at byte {pos}")
        frames.append((offset, topic, data[pos : pos + size]))
        pos += size
    return FileStream(topics, frames)


# ROS 1 serialization of the two sensor messages (sensor_msgs/LaserScan and Image).
_U32 = struct.Struct("<I")
_STAMP = struct.Struct("<III")
_SCAN_FIELDS = struct.Struct("<7f")
_IMAGE_FIELDS = struct.Struct("<II")


def _string(text: str) -> bytes:
    raw = text.encode()
    return _U32.pack(len(raw)) + raw


def _header(seq: int, stamp_ns: int, frame_id: str) -> bytes:
    sec, nsec = divmod(stamp_ns, 1_000_000_000)
    return _STAMP.pack(seq & 0xFFFFFFFF, sec, nsec) + _string(frame_id)


class StataStream(Stream):
    """Generated MIT-Stata-like streams: a laser scan at 20 Hz and a camera at 30 Hz,
    serialized for ROS 1 (`ros1`) or as ROS 2's CDR (`cdr`)."""

    def __init__(self, seed: int = 0, encoding: str = "ros1") -> None:
        if encoding not in ENCODINGS:
            raise StreamError(f"unknown encoding {encoding!r}; allowed: {', '.join(ENCODINGS)}")
        self._cdr = encoding == "cdr"
        scans = [(k * 1_000_000_000 // SCAN_HZ, 0) for k in range(STATA_SECONDS * SCAN_HZ)]
        images = [(k * 1_000_000_000 // IMAGE_HZ, 1) for k in range(STATA_SECONDS * IMAGE_HZ)]
        merged = sorted(scans + images)
        offsets, topic_of = [m[0] for m in merged], [m[1] for m in merged]
        topics = stata_topics(encoding)
        super().__init__(topics, offsets, topic_of, STATA_SECONDS * 1_000_000_000)
        rng = random.Random(seed)
        self._rng = rng
        self._scene = rng.randbytes(IMAGE_W * IMAGE_H * 2)  # wider than a frame: it pans
        self._scans: dict[int, bytes] = {}

    def body(self, i: int) -> bytes:
        t_ns = self.offsets[i]
        if self.topic_of[i] == 1:
            return self._image(i, t_ns)  # about 30 us: a copy and a band of noise
        return self._scans.get(i) or self._scan(i, t_ns)

    def prepare(self, frames: Iterable[int]) -> None:
        """Scans take about 0.6 ms each (1047 ranges in Python): those of the trial are
        built before it (at most 1200, about 5 MB), so that 2 kHz of scans stay on time."""
        new = {i for i in frames if self.topic_of[i] == 0 and i not in self._scans}
        self._scans.update({i: self._scan(i, self.offsets[i]) for i in sorted(new)})

    def _scan(self, i: int, t_ns: int) -> bytes:
        """Walls 2-6 m away that move smoothly with the angle and as the robot drives,
        sampled with 1 cm of Gaussian noise."""
        t, gauss, sin = t_ns * 1e-9, self._rng.gauss, math.sin
        angles = (-2.35 + j * 4.7 / SCAN_RANGES for j in range(SCAN_RANGES))
        ranges = array(
            "f", (4 + 1.5 * sin(2 * a + 0.2 * t) + 0.5 * sin(5 * a - 0.35 * t) + gauss(0, 0.01)
                  for a in angles)
        )  # fmt: skip
        fields = _SCAN_FIELDS.pack(-2.35, 2.35, 4.7 / SCAN_RANGES, 0.0, 1 / SCAN_HZ, 0.05, 30.0)
        return (
            self._header(i, t_ns, "laser") + fields + _U32.pack(SCAN_RANGES) + ranges.tobytes()
            + _U32.pack(0)
        )  # fmt: skip

    def _header(self, seq: int, stamp_ns: int, frame_id: str) -> bytes:
        """std_msgs/Header: ROS 1's (seq, stamp, frame_id), or the CDR encapsulation and
        ROS 2's (stamp, frame_id, NUL-terminated, padded to 4 bytes: the fields after it
        need no more)."""
        if not self._cdr:
            return _header(seq, stamp_ns, frame_id)
        sec, nsec = divmod(stamp_ns, 1_000_000_000)
        return CDR_LE + _STAMP.pack(sec, nsec, len(frame_id) + 1) + _cdr_chars(frame_id)

    def _image(self, i: int, t_ns: int) -> bytes:
        """The camera pans across the scene a few pixels a frame; a band of sensor noise
        moves down the image."""
        size = IMAGE_W * IMAGE_H
        shift = (i * 7) % (len(self._scene) - size)
        pixels = bytearray(self._scene[shift : shift + size])
        band = (i * 16 * IMAGE_W) % size
        pixels[band : band + 16 * IMAGE_W] = self._rng.randbytes(16 * IMAGE_W)[: size - band]
        head = self._header(i, t_ns, "camera") + _IMAGE_FIELDS.pack(IMAGE_H, IMAGE_W)
        if self._cdr:  # "mono8" and its NUL, is_bigendian, 1 byte of padding, step
            encoding = _U32.pack(6) + b"mono8\0" + b"\0\0"
        else:
            encoding = _string("mono8") + b"\0"
        return head + encoding + _U32.pack(IMAGE_W) + _U32.pack(size) + pixels


def _cdr_chars(text: str) -> bytes:
    """A CDR string's characters and NUL, padded to 4 bytes (its length goes before)."""
    raw = text.encode() + b"\0"
    return raw + b"\0" * (-len(raw) % 4)


def stata_topics(encoding: str = "ros1") -> tuple[StreamTopic, ...]:
    return (
        StreamTopic(SCAN_TOPIC, "sensor_msgs/msg/LaserScan", encoding),
        StreamTopic(IMAGE_TOPIC, "sensor_msgs/msg/Image", encoding),
    )


def open_stream(source: str, seed: int = 0, encoding: str = "") -> Stream:
    """`stata` (generated in `encoding`, ROS 1 by default), or the path of a stream file
    the lab wrote (in the encoding the lab chose for the trial's backend)."""
    if source == STATA:
        return StataStream(seed, encoding or "ros1")
    return read_stream_file(Path(source))


def pace_stream(
    send: Callable[[int, int, int, bytes], None],
    schedule: list[tuple[int, int]],
    stream: Stream,
    rate_factor: float,
    t_intended: array[int],
    t_sent: array[int],
    start_ns: int,
) -> None:
    """Send frame after frame on absolute deadlines `start + offset / rate_factor`; each
    body is built before its wait. `send(seq, stamp, topic, body)`."""
    frame: list[Any] = [0, b""]  # the topic and body of the frame due next

    def deadlines() -> Iterator[int]:
        for offset, i in schedule:
            frame[:] = stream.topic_of[i], stream.body(i)
            yield start_ns + int(offset / rate_factor)

    def send_frame(seq: int, now: int) -> None:
        send(seq, now, frame[0], frame[1])

    pace_deadlines(send_frame, deadlines(), t_intended, t_sent)
