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


# Libraries of the others (no command line) and the scale scripts (their own owner).
NOT_SCRIPTS = {"common", "harness", "goals", "restart_rounds", "switches"}
SCRIPTS = sorted(
    p.name
    for p in Path(common.__file__).parent.glob("*.py")
    if p.stem not in NOT_SCRIPTS and not p.stem.startswith("scale")
)


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmarks_help_teaches_what_it_measures_and_how_to_run_it(script: str) -> None:
    """`--help`: its whole description (not one line of it), an example command line as
    written (not rewrapped into the prose)."""
    import subprocess
    import sys

    path = Path(common.__file__).parent / script
    done = subprocess.run([sys.executable, str(path), "--help"], capture_output=True,
                          text=True, timeout=120, check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    example = f".venv/bin/python bench/{script}"
    assert any(line.lstrip().startswith((example, f"PYTHONPATH=src {example}")) for line in lines)
    _, _, rest = done.stdout.partition("\n\n")
    assert len(rest.split("\noptions:")[0].splitlines()) >= 4, done.stdout
