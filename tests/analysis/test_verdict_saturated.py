"""The verdict on real saturated runs, one per backend that runs a process per node: images
(307,200 B) echoed at 10 kHz, 3 GB/s each way, which no Python node keeps up with on any
machine. Each must be called not sustained, naming a failed rule with its figure."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SPEC = """name: saturated
description: images at 10 kHz, beyond any backend here
sweep:
  backend: {backend}
  rate_hz: 10000
  payload: image
trial:
  runs: 1
  messages: 2000
  warmup: 20
  drain_s: 2
"""


def run_saturated(tmp_path: Path, backend: str) -> dict[str, object]:
    spec = tmp_path / "saturated.yaml"
    spec.write_text(SPEC.format(backend=backend))
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-c", "from roboscale.cli import main; main()", "bench", str(spec),
         "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (entry,) = json.loads((out / "summary.json").read_text())["trials"]
    assert isinstance(entry, dict)
    return entry


def check(entry: dict[str, object]) -> None:
    assert entry["sustained"] is False
    verdict = entry["verdict"]
    assert isinstance(verdict, dict)
    failed = [r for r in verdict["rules"] if not r["ok"]]
    assert failed and all(r["judged"] and r["figure"] for r in failed)
    # at 10 kHz the period is 100 µs: a round trip of a 300 KB image is always too late
    assert {"too_late", "rate", "send_lag"} & {r["rule"] for r in failed}


@pytest.mark.slow
@pytest.mark.zenoh
@pytest.mark.usefixtures("zenoh")
@pytest.mark.parametrize("backend", ["native-proc", "zenoh"])
def test_zenoh_backends_at_saturation(tmp_path: Path, backend: str) -> None:
    check(run_saturated(tmp_path, backend))


@pytest.mark.slow
@pytest.mark.ros1
@pytest.mark.usefixtures("ros1")
def test_ros1_at_saturation(tmp_path: Path) -> None:
    check(run_saturated(tmp_path, "ros1"))


@pytest.mark.slow
@pytest.mark.dds
@pytest.mark.usefixtures("dds")
def test_dds_at_saturation(tmp_path: Path) -> None:
    check(run_saturated(tmp_path, "dds"))
