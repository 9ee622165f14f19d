"""The benchmarks are scripts in bench/ (not a package): make them importable here."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import require

BENCH = Path(__file__).resolve().parents[2] / "bench"
if str(BENCH) not in sys.path:
    sys.path.insert(0, str(BENCH))


@pytest.fixture
def run_bench(tmp_path: Path) -> Callable[[str, list[str]], dict[str, Any]]:
    """Run a benchmark script of bench/ with the given arguments; its JSON report."""

    def run(script: str, args: list[str]) -> dict[str, Any]:
        out = tmp_path / f"{Path(script).stem}.json"
        proc = subprocess.run(
            [sys.executable, str(BENCH / script), *args, "--json", str(out)],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
        report: dict[str, Any] = json.loads(out.read_text())
        return report

    return run


@pytest.fixture(scope="session")
def rust_baseline() -> Path:
    """The native baselines of scale.py, built once (about 5 minutes the first time); the
    Rust program."""
    import scale

    require(
        scale.cargo_path() is not None, "cargo is not installed (Rust 1.88+: https://rustup.rs)"
    )
    return scale.zenoh_rs_program()
