"""Named payloads of the seed research and parsing of sizes such as '4KB'."""

from __future__ import annotations

import re

# The thesis's three message kinds (seed notes): the 11 B "hello world" text, a
# LaserScan of about 4.25 KB, and a 640x480 mono8 camera image (307,200 B of pixels).
NAMED_PAYLOADS: dict[str, int] = {"text": 11, "laserscan": 4250, "image": 307200}
MIN_BYTES = 1
MAX_BYTES = 4 * 1024 * 1024

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(B|KB|KIB|MB|MIB)?\s*$", re.IGNORECASE)
_UNITS = {"": 1, "B": 1, "KB": 1024, "KIB": 1024, "MB": 1024 * 1024, "MIB": 1024 * 1024}


# Kinds whose payload is an array of numbers (LaserScan's float32 ranges). ROS 1
# serializes those element by element through Python floats, while text, images
# and raw bytes are copied as one block: per byte, a scan costs about ten times
# more CPU (docs/capacity.md), so capacity models price its bytes apart.
NUMERIC_PAYLOADS = frozenset({"laserscan"})


def is_numeric(name: str) -> bool:
    """Whether a payload (by name) is an array of numbers rather than a block of bytes."""
    return name in NUMERIC_PAYLOADS


def payload_kind(name: str) -> str:
    """The message kind a backend builds: a named kind, or raw bytes for a plain size."""
    return name if name in NAMED_PAYLOADS else "bytes"


def parse_payload(value: object) -> tuple[str, int]:
    """Return (name, bytes) for 'text'/'laserscan'/'image', an int, or '256B', '4KB', '4MB'."""
    if isinstance(value, bool):
        raise ValueError(_allowed(value))
    if isinstance(value, str) and value.strip().lower() in NAMED_PAYLOADS:
        name = value.strip().lower()
        return name, NAMED_PAYLOADS[name]
    if isinstance(value, int):
        size = value
    elif isinstance(value, str) and (m := _SIZE.match(value)):
        size = int(float(m.group(1)) * _UNITS[(m.group(2) or "").upper()])
    else:
        raise ValueError(_allowed(value))
    if not MIN_BYTES <= size <= MAX_BYTES:
        raise ValueError(f"{value!r} is {size} bytes; allowed: sizes from {MIN_BYTES} B to 4 MB")
    return format_size(size), size


def format_size(size: int) -> str:
    for unit, factor in (("MB", 1024 * 1024), ("KB", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


def _allowed(value: object) -> str:
    names = ", ".join(NAMED_PAYLOADS)
    return (
        f"{value!r} is not a payload; allowed: one of {names}, "
        "or a size from 1 B to 4 MB such as 256, '256B', '4KB', '4MB'"
    )
