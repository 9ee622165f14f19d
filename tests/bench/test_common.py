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


def test_a_ratio_prints_on_its_side_of_the_rule() -> None:
    at_most = lambda r: r <= 1.5  # noqa: E731
    assert common.ratio_text(1.4951, at_most) == "1.50"  # met, and 1.50 is met too
    assert common.ratio_text(1.5004, at_most) == "1.5004"
    assert common.ratio_text(0.4996, lambda r: 0.5 <= r <= 2.0) == "0.4996"
    assert common.ratio_text(1.234, lambda r: 0.5 <= r <= 2.0) == "1.23"


def test_a_ratio_in_rounds_is_judged_by_its_interval(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    at_most = lambda r: r <= 1.5  # noqa: E731
    assert common.judge_rounds(1.3, [1.27, 1.30, 1.37], at_most)[0] is True
    assert common.judge_rounds(1.9, [1.8, 1.9, 2.0], at_most)[0] is False
    assert common.judge_rounds(1.45, [1.2, 1.45, 1.7], at_most)[0] == "not judged"
    # bench/dds.py --quick: one round of 60 messages at 1.98x decides nothing.
    assert common.judge_rounds(1.98, [1.98], at_most) == ("not judged", "one round: spread unknown")
    goals = [{"goal": "ratio", "measured": 1.98, "interval": "one round: spread unknown",
              "target": "<= 1.5", "met": "not judged"}]  # fmt: skip
    common.finish({}, goals, argparse.Namespace(json=None, check=True))  # no exit 1
    printed = capsys.readouterr().out
    assert "not judged" in printed and "PASS" not in printed and "FAIL" not in printed
