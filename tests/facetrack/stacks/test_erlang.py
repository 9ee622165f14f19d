"""The Erlang/OTP stack end to end: the paper's tree, port programs, kills. Real Erlang."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from roboscale.facetrack.config import KillPlan, TrackerConfig

from .conftest import check_kills_survived, check_run, kill_harness_midrun, run_stack

pytestmark = pytest.mark.erlang


def test_frames_flow_through_the_tree(erlang: None, token: str, tmp_path: Path) -> None:
    cfg = TrackerConfig(workers=2, frames=20, fps=10, dispatch="round_robin")
    run, running = run_stack("erlang", cfg, tmp_path, token)
    assert any("beam" in p for p in running)
    check_run(run, frames=20, workers=2)
    assert {p.role for p in run.processes} == {"erlang-vm", "face_server", "aggregator_server"}
    assert run.counters["erlang_face_server_bytes"] > 0


def test_kills_during_a_run_leave_the_tree_alive(erlang: None, token: str, tmp_path: Path) -> None:
    cfg = TrackerConfig(
        workers=3, frames=60, fps=10, kills=KillPlan(count=3, method="sigkill", at_frame=5)
    )
    run, _ = run_stack("erlang", cfg, tmp_path, token, sigterm_first=1)
    check_kills_survived(run, kills=4, workers=3)
    assert [k.method for k in run.kills] == ["sigterm", "sigkill", "sigkill", "sigkill"]


def test_kills_an_interval_apart_are_spaced(erlang: None, token: str, tmp_path: Path) -> None:
    kills = KillPlan(count=3, method="sigkill", at_frame=5, interval_ms=40.0)
    run, _ = run_stack("erlang", TrackerConfig(workers=3, frames=40, fps=10, kills=kills),
                       tmp_path, token)  # fmt: skip
    check_kills_survived(run, kills=3, workers=3)
    struck = sorted(k.kill_ns for k in run.kills)
    # Lower bounds only: a loaded machine may space them more, never less.
    assert all(b - a >= 40e6 for a, b in itertools.pairwise(struck)), struck


def test_a_killed_harness_leaves_nothing_running(erlang: None, token: str, tmp_path: Path) -> None:
    kill_harness_midrun("erlang", tmp_path, timeout_s=120)
    # the token fixture checks that the VM and the port programs end


@pytest.mark.parametrize(
    ("target", "method"),
    [
        ("aggregator", "sigterm"),
        ("aggregator", "sigkill"),
        ("face_supervisor", "sigkill"),
        ("aggregator_supervisor", "sigkill"),
    ],
)
def test_a_main_process_killed_is_restarted_and_timed(
    erlang: None, token: str, tmp_path: Path, target: str, method: str
) -> None:
    """The paper's Table 5 rows beyond workers: the aggregator and the supervisors."""
    kills = KillPlan(count=1, method=method, at_frame=5, target=target)
    cfg = TrackerConfig(workers=2, frames=40, fps=10, kills=kills)
    run, _ = run_stack("erlang", cfg, tmp_path, token)
    (kill,) = run.kills
    assert kill.target == target and kill.worker == -1 and kill.method == method
    assert kill.restart_ms is not None and 0 < kill.restart_ms < 30_000
    assert run.alive_workers == 2
