"""Named payloads of the seed research and parsing of sizes such as '4KB'."""

from __future__ import annotations

import re
from fractions import Fraction

from roboscale.msgtypes import TYPE_FIELDS, TYPE_NAME

# The thesis's three message kinds (seed notes): the 11 B "hello world" text, a
# LaserScan of about 4.25 KB, and a 640x480 mono8 camera image (307,200 B of pixels).
NAMED_PAYLOADS: dict[str, int] = {"text": 11, "laserscan": 4250, "image": 307200}
MIN_BYTES = 1
MAX_BYTES = 4 * 1024 * 1024

# Matched in full; ASCII digits only (`\d` would take any script's digits).
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(B|KB|KIB|MB|MIB)?\s*", re.IGNORECASE)
MAX_DIGITS = 40  # a size's digits; 4 MB needs 7
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
    """The message kind a backend builds: a named kind, a type of the user's (`custom`),
    or raw bytes for a plain size."""
    if name in NAMED_PAYLOADS:
        return name
    return "custom" if TYPE_NAME.fullmatch(name) else "bytes"


def _custom(value: object) -> tuple[str, int] | None:
    """A payload naming a type: ('package/msg/Type[@size]', 0); the spec loader sizes it
    once the types are loaded (spec/msgtypes_check.py)."""
    if isinstance(value, dict):
        unknown = sorted(set(value) - set(TYPE_FIELDS))
        if unknown or not isinstance(value.get("type"), str):
            raise ValueError(f"{value!r} is not a payload; a message type is written "
                             "{type: package/msg/Type, size: 64KB} (size optional)")  # fmt: skip
        size = value.get("size")
        suffix = "" if size is None else "@" + format_size(_size(size, value))
        return _custom(value["type"].strip() + suffix)
    if isinstance(value, str) and (m := TYPE_NAME.fullmatch(value.strip())):
        size = f"@{format_size(_size(m.group(3), value))}" if m.group(3) else ""
        return (f"{m.group(1)}/msg/{m.group(2)}{size}", 0)
    return None


def parse_payload(value: object) -> tuple[str, int]:
    """Return (name, bytes) for 'text'/'laserscan'/'image', an int, or '256B', '4KB', '4MB';
    a message type of the user's gives (its name, 0) until the spec loader sizes it."""
    if isinstance(value, bool):
        raise ValueError(_allowed(value))
    if (typed := _custom(value)) is not None:
        return typed
    if isinstance(value, str) and value.strip().lower() in NAMED_PAYLOADS:
        name = value.strip().lower()
        return name, NAMED_PAYLOADS[name]
    size = _size(value, value)
    return format_size(size), size


def _size(value: object, given: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        size = Fraction(value)
    elif isinstance(value, str) and (m := _SIZE.fullmatch(value)):
        # Exact arithmetic: a size of hundreds of digits is out of range, not an overflow.
        digits = m.group(1)
        if len(digits) > MAX_DIGITS:
            raise ValueError(f"{_shown(value)} is not a size; allowed: sizes from "
                             f"{MIN_BYTES} B to 4 MB")  # fmt: skip
        size = Fraction(digits) * _UNITS[(m.group(2) or "").upper()]
    else:
        raise ValueError(_allowed(given))
    if not MIN_BYTES <= size <= MAX_BYTES:
        amount = "far more than 4 MB" if size > 10**15 else f"{float(size):.15g} bytes"
        raise ValueError(f"{_shown(value)} is {amount}; allowed: sizes from {MIN_BYTES} B "
                         "to 4 MB")  # fmt: skip
    if size.denominator != 1:
        raise ValueError(f"{_shown(value)} is {float(size):g} bytes; allowed: a whole number "
                         "of bytes")  # fmt: skip
    return int(size)


def _shown(value: object, limit: int = 40) -> str:
    if isinstance(value, int) and value.bit_length() > 4 * limit:
        return f"a number of {len(str(abs(value)))} digits"  # repr is bounded too
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text)} characters)"


def format_size(size: int) -> str:
    for unit, factor in (("MB", 1024 * 1024), ("KB", 1024)):
        if size >= factor and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


def _allowed(value: object) -> str:
    names = ", ".join(NAMED_PAYLOADS)
    return (
        f"{_shown(value)} is not a payload; allowed: one of {names}, "
        "a size from 1 B to 4 MB such as 256, '256B', '4KB', '4MB', or a message type of "
        "message_types (package/msg/Type, or {type: package/msg/Type, size: 64KB})"
    )
