"""Smoke test of bench/facetrack.py with tiny counts on the in-process runtime: real runs,
no assertion on timing or memory."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import facetrack  # bench/facetrack.py, importable through tests/bench/conftest.py

RunBench = Callable[[str, list[str]], dict[str, Any]]

pytest.importorskip("cv2", reason="the facetrack extra (make test installs it)")


def test_unavailable_stacks_are_reported_never_estimated() -> None:
    missing: dict[str, str] = {}
    goals = facetrack.goals({"held": [], "memory": [], "chaos": []}, missing)
    assert [g["met"] for g in goals] == [False, False, False]
    assert all(g["measured"] is None for g in goals)
    assert all("not available" in g["why"] or "not measured" in g["why"] for g in goals)


def test_ratios_are_computed_from_measured_rows() -> None:
    results = {
        "held": [
            {"stack": "runtime", "workers_held": 64, "bound": ">="},
            {"stack": "ros1", "workers_held": 4, "bound": ""},
        ],
        "memory": [
            {"stack": "runtime", "ok": True, "pss_per_worker_mb": 2.0},
            {"stack": "erlang", "ok": True, "pss_per_worker_mb": 8.0},
        ],
        "chaos": [{"stack": "runtime", "kills": 9, "jaccard_no_kill": 0.8,
                   "jaccard_kills": 0.79, "jaccard_change_pct": -1.25, "frames_lost": 0}],
    }  # fmt: skip
    goals = facetrack.goals(results, {})
    assert [g["met"] for g in goals] == [True, True, True]
    assert ">=16.0x" in goals[0]["measured"] and "0.250x" in goals[1]["measured"]


@pytest.mark.slow
def test_quick_run_on_the_runtime_writes_json(run_bench: RunBench) -> None:
    args = ["--stacks", "runtime", "--max-workers", "2", "--mem-workers", "2",
            "--chaos-workers", "2"]  # fmt: skip
    report = run_bench("facetrack.py", args)
    results = report["results"]
    assert [r["stack"] for r in results["held"]] == ["runtime"]
    assert results["memory"][0]["ok"] and results["chaos"][0]["kills"] == 2
    assert {g["goal"].split(",")[0] for g in report["goals"]} >= {"workers held"}
    assert report["not_available"] == {}  # only the stack asked for was tried
