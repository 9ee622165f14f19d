"""The face tracker as a lab workload: spec errors, planning, and real runs of the lab."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roboscale.errors import SpecError, SpecErrors, UserError
from roboscale.spec.loader import load_spec
from roboscale.spec.planner import plan

REPO = Path(__file__).resolve().parents[2]
SPEC = """\
name: ft
sweep:
  workload: facetrack
  rate_hz: 10
  stack: runtime
  workers: 2
  deque_len: [1, 5]
  kills: [0, 2]
  kill_method: [sigterm, sigkill]
trial:
  runs: 1
  messages: 12
  warmup: 0
  drain_s: 1
"""


def spec_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as info:
        load_spec(path)
    err = info.value
    errors = err.errors if isinstance(err, SpecErrors) else [err]
    assert all(isinstance(e, SpecError) for e in errors)
    return errors[0].message.replace(str(path), "F")


@pytest.mark.parametrize(
    ("old", "new", "field"),
    [
        ("stack: runtime", "stack: ros3", "F:5: sweep.stack"),
        ("deque_len: [1, 5]", "deque_len: [0, 5]", "F:7: sweep.deque_len"),
        ("workers: 2", "workers: 0", "F:6: sweep.workers"),
        ("kill_method: [sigterm, sigkill]", "kill_method: nuke", "F:9: sweep.kill_method"),
    ],
)
def test_bad_axes_name_file_line_and_field(tmp_path: Path, old: str, new: str, field: str) -> None:
    message = spec_error(tmp_path, SPEC.replace(old, new))
    assert message.startswith(field), message


def test_unknown_stack_lists_the_known_ones(tmp_path: Path) -> None:
    assert "known: runtime, runtime-proc" in spec_error(tmp_path, SPEC.replace("runtime", "x"))


def test_tracker_axes_need_the_facetrack_workload(tmp_path: Path) -> None:
    text = SPEC.replace("workload: facetrack", "workload: echo")
    assert "applies to workload facetrack only" in spec_error(tmp_path, text)


def test_plan_crosses_the_tracker_axes(tmp_path: Path) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    trials = plan(load_spec(path))
    # deque 1, 5 x (no kill, 2 kills by sigterm, 2 by sigkill): no-kill runs once.
    assert len(trials) == 6
    assert {(t.deque_len, t.kills, t.kill_method) for t in trials} == {
        (d, k, m) for d in (1, 5) for k, m in ((0, "sigterm"), (2, "sigterm"), (2, "sigkill"))
    }
    assert all(t.stack == "runtime" and t.workers == 2 and t.messages == 12 for t in trials)


def test_node_names_are_valid_for_every_stack(tmp_path: Path) -> None:
    from roboscale.facetrack.stack import known_stacks
    from roboscale.runtime.names import check_name
    from roboscale.workloads.facetrack import node_name

    path = tmp_path / "spec.yaml"
    path.write_text(SPEC.replace("stack: runtime", f"stack: [{', '.join(known_stacks())}]"))
    for t in plan(load_spec(path)):
        check_name(node_name(t), "node")


def bench(tmp_path: Path, text: str) -> tuple[subprocess.Popen[str], Path]:
    """`roboscale bench` of the spec `text` in the background; the process and its --out."""
    pytest.importorskip("cv2", reason="the facetrack extra (make test installs it)")
    spec, out = tmp_path / "spec.yaml", tmp_path / "out"
    spec.write_text(text)
    main = "import sys; from roboscale.cli import main; main(sys.argv[1:])"
    argv = [sys.executable, "-c", main, "bench", str(spec), "--out", str(out)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return proc, out


@pytest.mark.slow
def test_a_run_writes_results_and_the_papers_tables(tmp_path: Path) -> None:
    proc, out = bench(tmp_path, SPEC.replace("kills: [0, 2]", "kills: [0]"))
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    summary = json.loads((out / "summary.json").read_text())
    entries = summary["trials"]
    assert len(entries) == 2 and all(e["facetrack"]["summary"]["frames_lost"] == 0 for e in entries)
    assert entries[0]["received"] == 12
    html = (out / "report.html").read_text()
    assert "Face tracker: stacks side by side" in html
    assert "Face quality beside the paper" in html


@pytest.mark.slow
def test_ctrl_c_keeps_finished_trials(tmp_path: Path) -> None:
    proc, out = bench(tmp_path, SPEC.replace("messages: 12", "messages: 40"))
    summary = out / "summary.json"
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if summary.exists() and json.loads(summary.read_text())["trials"]:
            break
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGINT)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, output
    kept = json.loads(summary.read_text())["trials"]
    assert 1 <= len(kept) < 6
    assert (out / "report.html").exists()
