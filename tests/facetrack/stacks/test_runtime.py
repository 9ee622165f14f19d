"""The runtime stacks end to end: a few seconds of frames, kills during the run."""

import itertools
from pathlib import Path

import pytest

from roboscale.facetrack.config import KillPlan, TrackerConfig
from roboscale.facetrack.records import summarize
from roboscale.facetrack.stack import get_stack, run_tracker

pytest.importorskip("cv2", reason="the facetrack extra (make test installs it)")
pytest.importorskip("skimage")


def test_inprocess_workers_survive_kills_and_lose_no_frame(tmp_path: Path) -> None:
    cfg = TrackerConfig(workers=6, frames=30, fps=15, kills=KillPlan(4, "sigkill", 10))
    run = run_tracker("runtime", cfg, tmp_path)
    figures = summarize(run)
    assert run.stack == "runtime"
    assert figures.frames == 30 and figures.frames_lost == 0
    assert figures.kills == 4 and figures.restarted == 4
    assert run.alive_workers == 6
    assert figures.mean_jaccard > 0.5
    assert {p.role for p in run.processes} == {"host"}


def test_crash_kills_restart_in_process(tmp_path: Path) -> None:
    cfg = TrackerConfig(workers=3, frames=15, fps=15, kills=KillPlan(3, "crash", 5))
    run = run_tracker("runtime", cfg, tmp_path)
    assert [k.restarted_ns is not None for k in run.kills] == [True] * 3
    assert summarize(run).frames_lost == 0 and run.alive_workers == 3


def test_kills_an_interval_apart_are_spaced_and_each_restarted(tmp_path: Path) -> None:
    kills = KillPlan(3, "crash", 5, interval_ms=40.0)  # the paper's restart timing: 5 ms
    run = run_tracker("runtime", TrackerConfig(workers=3, frames=30, fps=15, kills=kills), tmp_path)
    struck = sorted(k.kill_ns for k in run.kills)
    assert len(struck) == 3 and all(k.restarted_ns is not None for k in run.kills)
    # Lower bounds only: a loaded machine may space them more, never less.
    assert all(b - a >= 40e6 for a, b in itertools.pairwise(struck)), struck


@pytest.mark.zenoh
@pytest.mark.slow
def test_process_workers_survive_sigkill_and_sigterm(tmp_path: Path, zenoh: None) -> None:
    stack = get_stack("runtime-proc")
    cfg = TrackerConfig(workers=3, frames=40, fps=10, kills=KillPlan(2, "sigkill", 10))
    tracker = stack.start(cfg, tmp_path)
    try:
        assert tracker.kill(0, "sigterm") > 0  # from outside, before the run
        run = tracker.run()
    finally:
        tracker.stop()
    figures = summarize(run)
    assert figures.frames_lost == 0 and figures.kills == figures.restarted == 3
    assert run.alive_workers == 3
    assert sorted(p.role for p in run.processes) == ["host", "worker", "worker", "worker", "zygote"]
    assert all(p.pss_bytes > 0 for p in run.processes)


def test_a_stack_refuses_a_kill_method_it_has_not(tmp_path: Path) -> None:
    from roboscale.facetrack.config import ConfigError

    cfg = TrackerConfig(workers=2, frames=5, kills=KillPlan(1, "crash", 1))
    with pytest.raises(ConfigError, match=r"kills\.method: stack runtime-proc cannot kill"):
        run_tracker("runtime-proc", cfg, tmp_path)
