"""bench/common.py: what every benchmark prints and writes."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

import common  # bench/common.py, importable through tests/bench/conftest.py


def test_a_goal_just_missed_does_not_print_as_its_target(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "report.json"
    goals = [{"goal": "ratio", "measured": 1.5004544, "target": "<= 1.5", "met": False}]
    common.finish({}, goals, argparse.Namespace(json=out, check=False))
    printed = capsys.readouterr().out
    assert "1.50045" in printed and "FAIL" in printed
    assert json.loads(out.read_text())["goals"][0]["measured"] == 1.5004544
