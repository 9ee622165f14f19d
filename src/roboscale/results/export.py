"""`roboscale export DIR --format csv|json|markdown`: a results folder's tables for other
tools. Each table is the one `roboscale.results` gives (`--table`, default summary: one
row per trial, nested figures as dotted columns such as `rtt_us.p50`), read back by
pandas as written (`pandas.read_csv`, `pandas.read_json(orient="records")`). Lists (a
graph trial's paths, a face tracker's per-frame series) are JSON text in CSV and
Markdown cells."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import pyarrow as pa
from rich.console import Console

from roboscale import safewrite
from roboscale.cliargs import path
from roboscale.results import TABLES, load

FORMATS = ("csv", "json", "markdown")


def _cell(value: Any) -> Any:
    """A value as one cell: lists and mappings as JSON text, a missing value empty."""
    if isinstance(value, list | dict):
        return json.dumps(value)
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    return value


def _rows(table: pa.Table) -> tuple[list[str], list[list[Any]]]:
    columns = table.column_names
    data = table.to_pydict()
    return columns, [[_cell(data[c][i]) for c in columns] for i in range(table.num_rows)]


def to_csv(table: pa.Table) -> str:
    import pandas as pd

    columns, rows = _rows(table)
    text: str = pd.DataFrame(rows, columns=columns).to_csv(index=False)
    return text


def to_json(table: pa.Table) -> str:
    """One JSON object per row, in a list; infinities as strings (JSON has none)."""
    rows = [{k: _json_value(v) for k, v in row.items()} for row in table.to_pylist()]
    return json.dumps(rows, indent=1) + "\n"


def _json_value(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else str(value)
    return value


def to_markdown(table: pa.Table) -> str:
    columns, rows = _rows(table)

    def text(value: Any) -> str:
        shown = "" if value is None else (f"{value:.6g}" if isinstance(value, float) else value)
        return str(shown).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(text(c) for c in columns) + " |"]
    lines.append("|" + "---|" * len(columns))
    lines += ["| " + " | ".join(text(v) for v in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


WRITERS = {"csv": to_csv, "json": to_json, "markdown": to_markdown}


def add_parser(sub: Any) -> None:
    e = sub.add_parser(
        "export",
        help="write a results folder's table as CSV, JSON or Markdown",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument("results", type=path, help="a results folder written by `roboscale bench`")
    e.add_argument("--format", choices=FORMATS, default="csv", help="default csv")
    e.add_argument("--table", choices=TABLES, default="summary",
                   help="which table (default summary: one row per trial)")  # fmt: skip
    e.add_argument("-o", "--out", type=path, metavar="FILE", help="write here, not to stdout")


def main(args: argparse.Namespace, console: Console) -> int:
    results = load(args.results)
    table = results.records() if args.table == "records" else getattr(results, args.table)
    text = WRITERS[args.format](table)
    if args.out is None:
        sys.stdout.write(text)
    else:
        safewrite.write_text(args.out, text)
        console.print(f"{args.table}: {table.num_rows} rows -> {args.out}")
    return 0
