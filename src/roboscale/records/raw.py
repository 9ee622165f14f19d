"""The raw file a node agent writes at the end of a trial.

Stdlib only: ros1 agents run in Debian's system Python. Columns are int64 arrays
filled in place during the run (no allocation on the hot path) and dumped once.
Layout: MAGIC, a 4-byte little-endian header length, a JSON header, then each
column as `count` little-endian int64 values in the header's column order.
"""

from __future__ import annotations

import json
import struct
import sys
from array import array
from collections.abc import Mapping
from pathlib import Path

from roboscale import safewrite

MAGIC = b"RSRAW1\n"
MISSING = 0  # CLOCK_MONOTONIC is never 0 on a running system


def new_column(count: int) -> array[int]:
    return array("q", bytes(8 * count))


def write_raw(path: Path, header: Mapping[str, object], columns: dict[str, array[int]]) -> None:
    names = list(columns)
    counts = {len(c) for c in columns.values()}
    if len(counts) > 1:
        raise ValueError(f"raw columns differ in length: {sorted(counts)}")
    meta = dict(header, columns=names, count=counts.pop() if counts else 0)
    blob = json.dumps(meta).encode()
    parts = [MAGIC, struct.pack("<I", len(blob)), blob]
    for name in names:
        col = columns[name]
        if sys.byteorder != "little":
            col = array("q", col)
            col.byteswap()
        parts.append(col.tobytes())
    # A new file renamed into place: never written through a link planted at the name.
    safewrite.write_bytes(path, b"".join(parts))


def read_raw(path: Path) -> tuple[dict[str, object], dict[str, array[int]]]:
    """A node's header (checked by the reader: records/models.py NodeHeader) and columns."""
    data = path.read_bytes()
    if not data.startswith(MAGIC):
        raise ValueError(f"{path}: not a roboscale raw record file")
    (hlen,) = struct.unpack_from("<I", data, len(MAGIC))
    start = len(MAGIC) + 4
    header = json.loads(data[start : start + hlen])
    if not isinstance(header, dict):
        raise ValueError(f"{path}: the header is not a JSON object")
    count, names = header.get("count"), header.get("columns")
    if not isinstance(count, int) or count < 0:
        raise ValueError(f"{path}: the header's count is {count!r}, not a whole number")
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        raise ValueError(f"{path}: the header's columns are {names!r}, not a list of names")
    pos = start + hlen
    columns: dict[str, array[int]] = {}
    for name in names:
        col = array("q")
        col.frombytes(data[pos : pos + 8 * count])
        if sys.byteorder != "little":
            col.byteswap()
        columns[name] = col
        pos += 8 * count
    return header, columns


def shift_times(path: Path, offset_ns: int) -> None:
    """Move a node's timestamps (columns `t_*`) from its host's clock to this machine's:
    `local = remote - offset_ns`; missing values stay missing. The header keeps the
    offset applied, so it is done once."""
    header, columns = read_raw(path)
    if "clock_offset_ns" in header:
        raise ValueError(f"{path}: its clock was already shifted")
    for name, col in columns.items():
        if name.startswith("t_"):
            for i, value in enumerate(col):
                if value != MISSING:
                    col[i] = value - offset_ns
    kept = {k: v for k, v in header.items() if k not in ("columns", "count")}
    write_raw(path, {**kept, "clock_offset_ns": offset_ns}, columns)
