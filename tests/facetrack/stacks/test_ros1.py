"""The ROS 1 stack end to end: rospy nodes under roslaunch with respawn. Real ROS 1."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.facetrack.config import KillPlan, TrackerConfig
from roboscale.facetrack.stacks.ros1 import launch_nodes

from .conftest import check_kills_survived, check_run, kill_harness_midrun, run_stack

pytestmark = pytest.mark.ros1


def test_the_launch_file_respawns_workers_and_the_aggregator() -> None:
    nodes = launch_nodes(TrackerConfig(workers=2), 4242, 77, Path("/tmp/c.json"))
    lines = nodes.splitlines()
    assert len(lines) == 4
    assert 'name="camera"' in lines[0] and "respawn" not in lines[0]
    assert 'args="camera 4242 77 /tmp/c.json"' in lines[0]
    assert all('respawn="true" respawn_delay="0"' in line for line in lines[1:])
    assert 'args="worker 1 /tmp/c.json"' in lines[3]


def test_frames_flow_through_the_nodes(ros1: None, token: str, tmp_path: Path) -> None:
    cfg = TrackerConfig(workers=2, frames=20, fps=10, dispatch="round_robin")
    run, running = run_stack("ros1", cfg, tmp_path, token)
    assert any("roslaunch" in p for p in running)
    check_run(run, frames=20, workers=2)
    roles = {p.role for p in run.processes}
    assert {"roscore", "roslaunch", "camera", "worker", "aggregator"} <= roles


def test_kills_during_a_run_leave_the_nodes_alive(ros1: None, token: str, tmp_path: Path) -> None:
    cfg = TrackerConfig(
        workers=2, frames=80, fps=10, kills=KillPlan(count=2, method="sigkill", at_frame=5)
    )
    run, _ = run_stack("ros1", cfg, tmp_path, token, sigterm_first=0)
    check_kills_survived(run, kills=3, workers=2)
    assert [k.method for k in run.kills] == ["sigterm", "sigkill", "sigkill"]


def test_a_killed_harness_leaves_nothing_running(ros1: None, token: str, tmp_path: Path) -> None:
    kill_harness_midrun("ros1", tmp_path, timeout_s=180)
    # the token fixture checks that roscore, roslaunch and every node end


@pytest.mark.parametrize("method", ["sigterm", "sigkill"])
def test_the_aggregator_killed_is_respawned_and_timed(
    ros1: None, token: str, tmp_path: Path, method: str
) -> None:
    """The part of the paper's ROS main node that roslaunch respawns here."""
    kills = KillPlan(count=1, method=method, at_frame=5, target="aggregator")
    cfg = TrackerConfig(workers=2, frames=60, fps=10, kills=kills)
    run, _ = run_stack("ros1", cfg, tmp_path, token)
    (kill,) = run.kills
    assert kill.target == "aggregator" and kill.method == method
    assert kill.restart_ms is not None and 0 < kill.restart_ms < 60_000
