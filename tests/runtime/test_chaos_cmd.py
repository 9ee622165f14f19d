"""The chaos monkey: target choice, and real kills on real supervision trees (its spec:
test_chaosspec.py)."""

from __future__ import annotations

import io
import json
from argparse import Namespace
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from roboscale.errors import UserError
from roboscale.runtime.chaos import ChaosMonkey, Worker, find_targets
from roboscale.runtime.chaosspec import ChaosSpec, Method
from roboscale.runtime.cli import cmd_chaos
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.node import NodeRecipe
from roboscale.runtime.process import CommandChild
from roboscale.runtime.supervisor import ChildSpec, Recipe, Supervisor, SupervisorRecipe

EXAMPLE = Path(__file__).parents[2] / "examples" / "launch" / "workers.yaml"


@pytest.fixture(autouse=True)
def private_run_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # Launches publish their status there: keep tests out of the user's real run directory.
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))


def workers_tree(rt: Runtime, n: int, deadline_s: float | None = None) -> Supervisor:
    recipes = [NodeRecipe(f"w{i}", Worker, callback_deadline_s=deadline_s) for i in range(n)]
    workers = SupervisorRecipe(
        "workers", [ChildSpec(r) for r in recipes], intensity=Intensity(1000, 1)
    )
    return Supervisor(rt, "top", [ChildSpec(workers)], intensity=Intensity(1000, 1))


def test_targets_match_patterns_and_methods_must_apply(rt: Runtime) -> None:
    root = workers_tree(rt, 12)
    targets = find_targets(root, ChaosSpec(target="/workers/w1*"))
    assert sorted(t.path for t in targets) == [
        "/top/workers/w1",
        "/top/workers/w10",
        "/top/workers/w11",
    ]
    assert len(find_targets(root, ChaosSpec(target="/top/workers/*"))) == 12
    with pytest.raises(UserError, match=r"'/cameras/\*' matches no node; the tree has: /top/wo"):
        find_targets(root, ChaosSpec(target="/cameras/*"))
    with pytest.raises(
        UserError, match="chaos method hang: needs in-process nodes with deadline_s"
    ):
        find_targets(root, ChaosSpec(methods=((Method.HANG, 1.0),)))
    with pytest.raises(UserError, match="chaos method sigkill: needs OS-process targets"):
        find_targets(root, ChaosSpec(methods=((Method.SIGKILL, 1.0),)))


def read_log(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_one_second_of_exceptions_at_200_per_second_on_100_workers(
    rt: Runtime, tmp_path: Path
) -> None:
    root = workers_tree(rt, 100)
    rt.wait(root.start_async())
    spec = ChaosSpec(rate=200, duration=1, target="/workers/*", seed=3, log=tmp_path / "k.jsonl")
    report = rt.wait(ChaosMonkey(rt, root, spec).run(), timeout_s=60)
    assert report.ok and report.alive and report.not_running == []
    assert report.kills + report.skipped == 200 and report.kills > 150
    assert report.restarts == report.kills == len(report.restart_ms)
    log = read_log(tmp_path / "k.jsonl")
    kills = [r for r in log if r["event"] == "kill"]
    assert len(kills) == report.kills and {r["method"] for r in kills} == {"exception"}
    assert {r["reason"] for r in log if r["event"] == "exit"} == {"crash"}
    assert sum(1 for r in log if r["event"] == "restart" and "restart_ms" in r) == report.kills
    rt.wait(root.stop_async())


def test_hangs_are_caught_by_the_watchdog_and_restarted(rt: Runtime, tmp_path: Path) -> None:
    root = workers_tree(rt, 10, deadline_s=0.02)
    rt.wait(root.start_async())
    spec = ChaosSpec(rate=10, duration=1, methods=((Method.HANG, 1.0),), log=tmp_path / "k.jsonl")
    report = rt.wait(ChaosMonkey(rt, root, spec).run(), timeout_s=60)
    assert report.ok and report.kills > 0 and report.uncaught_hangs == 0
    assert report.restarts == report.kills
    exits = [r for r in read_log(tmp_path / "k.jsonl") if r["event"] == "exit"]
    assert len(exits) == report.kills and {r["reason"] for r in exits} == {"hung"}
    rt.wait(root.stop_async())


def test_signals_kill_process_children_which_are_restarted(rt: Runtime, tmp_path: Path) -> None:
    names = [f"d{i}" for i in range(3)]
    drivers = [Recipe(name, CommandChild, (name, ["sleep", "3600"])) for name in names]
    root = Supervisor(
        rt, "top", [ChildSpec(d, shutdown_s=1) for d in drivers], intensity=Intensity(1000, 1)
    )
    rt.wait(root.start_async(), timeout_s=30)
    methods = ((Method.SIGTERM, 1.0), (Method.SIGKILL, 1.0))
    spec = ChaosSpec(rate=10, duration=1, methods=methods, seed=1, log=tmp_path / "k.jsonl")
    report = rt.wait(ChaosMonkey(rt, root, spec).run(), timeout_s=60)
    assert report.ok and report.kills > 0 and report.restarts == report.kills
    assert set(report.by_method) <= {"sigterm", "sigkill"}
    assert all(root.child(name).alive() for name in names)
    rt.wait(root.stop_async(), timeout_s=30)
    assert not any(root.child(name).alive() for name in names)


def chaos_args(tmp_path: Path, **given: Any) -> Namespace:
    values: dict[str, Any] = dict.fromkeys(
        ("rate", "duration", "method", "target", "seed", "settle", "events")
    )
    values.update(file=EXAMPLE, log=tmp_path / "kills.jsonl", **given)
    return Namespace(**values)


def run_chaos(args: Namespace) -> tuple[int, str]:
    out = io.StringIO()
    code = cmd_chaos(args, Console(file=out, width=120))
    return code, out.getvalue()


def test_chaos_command_on_the_example_launch_file(tmp_path: Path) -> None:
    args = chaos_args(tmp_path, rate="200", duration="1", target="/workers/*")
    code, out = run_chaos(args)
    assert code == 0, out
    assert "alive, every child running" in out and "restart p50 / p99 / max" in out
    assert any(r["event"] == "restart" for r in read_log(tmp_path / "kills.jsonl"))


def assert_survived(code: int, out: str, log: Path, methods: set[str]) -> None:
    assert code == 0, out
    records = read_log(log)
    kills = [r for r in records if r["event"] == "kill"]
    timed = [r for r in records if r["event"] == "restart" and "restart_ms" in r]
    assert len(kills) >= 1900 and len(timed) == len(kills)  # 200/s for 10 s, every one back
    assert {r["method"] for r in kills} == methods


@pytest.mark.slow
def test_200_exceptions_per_second_for_10_s_leave_every_worker_running(tmp_path: Path) -> None:
    args = chaos_args(tmp_path, rate="200", duration="10", target="/workers/*")
    code, out = run_chaos(args)
    assert_survived(code, out, tmp_path / "kills.jsonl", {"exception"})


@pytest.mark.slow
def test_200_mixed_kills_per_second_for_10_s_leave_the_tree_alive(tmp_path: Path) -> None:
    # Every method: in-process nodes crash or hang, the two process drivers get signals (a
    # method is drawn among those that apply to the target drawn). A hang blocks the loop
    # until the watchdog fires (~40 ms), so hangs are kept rare.
    method = "exception:40+hang:1+sigterm+sigkill"
    code, out = run_chaos(chaos_args(tmp_path, rate="200", duration="10", method=method, seed="5"))
    assert_survived(
        code, out, tmp_path / "kills.jsonl", {"exception", "hang", "sigterm", "sigkill"}
    )
