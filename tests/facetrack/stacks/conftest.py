"""Shared checks of the stacks that start processes of their own (ROS 1, Erlang/OTP).

A test's processes are found by a token in their environment: every process a stack
starts (roscore, roslaunch, nodes, the Erlang VM, port programs) inherits it.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from roboscale import lifeline
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.records import TrackerRun
from roboscale.facetrack.stack import get_stack

TOKEN_VAR = "ROBOSCALE_TEST_RUN"

# Starts a stack, says READY, then runs long enough to be killed mid-run.
HARNESS = """
import sys
from pathlib import Path
from roboscale import lifeline
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.stack import get_stack
tracker = get_stack(sys.argv[1]).start(TrackerConfig(workers=2, frames=3000), Path(sys.argv[2]))
print("READY", flush=True)
tracker.run()
"""


def processes_with(token: str) -> list[str]:
    """Command lines of the live processes whose environment holds the token."""
    needle = f"{TOKEN_VAR}={token}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if state != "Z":
            found.append(f"{entry.name}: {cmdline}")
    return found


def wait_gone(token: str, timeout_s: float = 30.0) -> list[str]:
    """Wait until no process holds the token; those still there after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while (left := processes_with(token)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.fixture
def token(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    lifeline.ensure()  # this process's guardian lives on after the test: not in its token
    value = uuid.uuid4().hex
    monkeypatch.setenv(TOKEN_VAR, value)
    yield value
    assert wait_gone(value) == [], "processes of the test outlived it"


def run_stack(
    stack: str, cfg: TrackerConfig, workdir: Path, token: str, sigterm_first: int | None = None
) -> tuple[TrackerRun, list[str]]:
    """Start, optionally SIGTERM one worker and await its restart, run, stop: the run and
    the command lines of the test's processes while the stack was up."""
    tracker = get_stack(stack).start(cfg, workdir)
    try:
        running = processes_with(token)
        if sigterm_first is not None:
            tracker.kill(sigterm_first, "sigterm")
            assert tracker.wait_restarted(60.0)
        return tracker.run(), running
    finally:
        tracker.stop()


def check_run(run: TrackerRun, frames: int, workers: int) -> None:
    """Every frame answered, by every worker, with detections scored against the truth."""
    assert len(run.frames) == frames
    assert [f.frame_id for f in run.frames if f.lost] == []
    assert {f.worker for f in run.frames} == set(range(workers))
    assert all(f.latency_ms is not None and f.latency_ms > 0 for f in run.frames)
    assert any(f.jaccard is not None and f.jaccard > 0.5 for f in run.frames)
    assert run.alive_workers == workers
    worker_processes = [p for p in run.processes if p.workers == 1]
    assert len(worker_processes) == workers
    assert all(p.rss_bytes > 0 and p.pss_bytes > 0 for p in worker_processes)
    assert run.counters["malformed"] == 0


def check_kills_survived(run: TrackerRun, kills: int, workers: int) -> None:
    """Every kill restarted its worker (started, then ready), and the tree is whole."""
    assert len(run.kills) == kills
    for kill in run.kills:
        assert kill.initialized_ns is not None and kill.restarted_ns is not None, kill
        assert kill.kill_ns < kill.initialized_ns <= kill.restarted_ns
    assert run.alive_workers == workers
    back = max(k.restarted_ns or 0 for k in run.kills)
    assert [f.frame_id for f in run.frames if f.dispatch_ns > back and f.lost] == []


def kill_harness_midrun(stack: str, workdir: Path, timeout_s: float) -> None:
    """Start a stack in a harness process, SIGKILL the harness once it runs."""
    harness = subprocess.Popen(
        [sys.executable, "-c", HARNESS, stack, str(workdir)],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        assert harness.stdout is not None
        ready, _, _ = select.select([harness.stdout], [], [], timeout_s)
        assert ready and harness.stdout.readline() == b"READY\n", "the stack did not start"
    finally:
        os.killpg(harness.pid, signal.SIGKILL)
        harness.wait()
