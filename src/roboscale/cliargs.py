"""Argument types of the command line: each refuses what it cannot mean, saying what is allowed.

argparse turns an `ArgumentTypeError` into `error: argument --rate: ...` and exit code 2,
the same code as every other bad input.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path


def path(text: str) -> Path:
    """A file or folder name; an empty one would silently mean the current folder."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; allowed: a file or folder name")
    if "\0" in text:
        raise argparse.ArgumentTypeError("a path with a NUL byte; allowed: a file or folder name")
    return Path(text)


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return value


def number(low: float, high: float = math.inf, *, low_open: bool = True) -> Callable[[str], float]:
    """A finite number above `low` (or from `low` when not `low_open`) and at most `high`."""
    above = f"above {low:g}" if low_open else f"from {low:g}"
    allowed = above + ("" if math.isinf(high) else f" and at most {high:g}")

    def parse(text: str) -> float:
        value = _finite(text)
        if value < low or (low_open and value == low) or value > high:
            raise argparse.ArgumentTypeError(f"{text} is out of range; allowed: {allowed}")
        return value

    parse.__name__ = "number"  # argparse names the type in its own messages
    return parse


def whole(low: int, high: int | None = None) -> Callable[[str], int]:
    """A whole number from `low` (to `high`); `2.5`, `nan` and `1e3` are refused."""
    allowed = f"a whole number from {low}" + ("" if high is None else f" to {high}")

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed; {allowed}") from None
        if value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text} is out of range; allowed: {allowed}")
        return value

    parse.__name__ = "whole number"
    return parse
