"""Payload bodies shared by backends. Stdlib only (ros1 agents run in system Python)."""

from __future__ import annotations

import struct

TEXT = b"hello world"  # the thesis's StampedMessage payload, 11 bytes
HEADER = struct.Struct("<qq")  # seq, sender stamp in ns


def body(size: int, kind: str) -> bytes:
    """A deterministic body of `size` bytes; incompressible enough for any transport."""
    if kind == "text":
        return TEXT
    pattern = bytes((i * 131 + 7) & 0xFF for i in range(251))
    reps = size // len(pattern) + 1
    return (pattern * reps)[:size]
