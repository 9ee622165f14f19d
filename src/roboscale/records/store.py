"""Record tables: built from a node's columns, and read back from Parquet with their
schema checked. Only the results folder (records/folder.py) opens the files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from roboscale.errors import UserError
from roboscale.records.schema import RECORD_COLUMNS
from roboscale.yamlfile import check_regular

_COLUMNS = ", ".join(RECORD_COLUMNS)
RECORD_SCHEMA = pa.schema(
    [
        ("trial", pa.string()),
        ("node", pa.string()),
        ("host", pa.string()),
        ("seq", pa.int64()),
        ("bytes", pa.int64()),
        ("t_intended", pa.int64()),
        ("t_sent", pa.int64()),
        ("t_echoed", pa.int64()),
        ("t_received", pa.int64()),
    ]
)
Int64Array = np.ndarray[Any, np.dtype[np.int64]]


def records_table(
    trial: str, node: str, host: str, payload_bytes: int, columns: dict[str, Int64Array]
) -> pa.Table:
    """Build a record table; zeros in t_echoed/t_received mean 'never arrived' (null)."""
    n = len(columns["seq"])

    def nullable(name: str) -> pa.Array:
        values = columns[name]
        return pa.array(values, type=pa.int64(), mask=values == 0)

    return pa.table(
        {
            "trial": pa.array([trial] * n, pa.string()),
            "node": pa.array([node] * n, pa.string()),
            "host": pa.array([host] * n, pa.string()),
            "seq": pa.array(columns["seq"], pa.int64()),
            "bytes": pa.array(np.full(n, payload_bytes, dtype=np.int64), pa.int64()),
            "t_intended": pa.array(columns["t_intended"], pa.int64()),
            "t_sent": pa.array(columns["t_sent"], pa.int64()),
            "t_echoed": nullable("t_echoed"),
            "t_received": nullable("t_received"),
        },
        schema=RECORD_SCHEMA,
    )


def read_table(path: Path) -> pa.Table:
    """A records file, refusing a truncated file or one of another schema."""
    check_regular(path, "records file")
    try:
        table = pq.read_table(path)
    except (pa.ArrowException, OSError) as e:
        raise UserError(
            f"{path}: not a readable Parquet file ({str(e).splitlines()[0][:200]})",
            hint="the trial's records are damaged; rerun it (bench --resume reruns what is "
            "missing once the folder is deleted)",
        ) from None
    for want in RECORD_SCHEMA:
        if want.name not in table.schema.names:
            raise UserError(f"{path}: column {want.name!r} is missing; allowed: {_COLUMNS}")
        got = table.schema.field(want.name).type
        if got != want.type:
            raise UserError(f"{path}: column {want.name!r} is {got}, allowed: {want.type}")
    return table.select(RECORD_SCHEMA.names)
