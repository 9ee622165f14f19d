"""Payload bodies shared by backends. Stdlib only (ros1 agents run in system Python)."""

from __future__ import annotations

import struct

from roboscale.backends.base import MessageKind

TEXT = b"hello world"  # the thesis's StampedMessage payload, 11 bytes
HEADER = struct.Struct("<qq")  # seq, sender stamp in ns


def body(size: int, kind: str) -> bytes:
    """A deterministic body of `size` bytes; incompressible enough for any transport."""
    if kind == "text":
        return TEXT
    pattern = bytes((i * 131 + 7) & 0xFF for i in range(251))
    reps = size // len(pattern) + 1
    return (pattern * reps)[:size]


def wire_body(kind: MessageKind) -> bytes:
    """What a byte-carrying backend sends: a type of the user's as its sample's CDR (what
    ROS 2 over Zenoh or DDS puts on the wire), any other kind as `body`."""
    if kind.typed is not None:
        return kind.typed.sample("cdr")
    return body(kind.size, kind.kind)
