"""bench/report.py: synthetic results folders rendered by `roboscale report`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import report  # bench/report.py, importable through tests/bench/conftest.py
from roboscale.records.folder import ResultsFolder

RunBench = Callable[[str, list[str]], dict[str, Any]]  # tests/bench/conftest.py


def test_a_synthetic_folder_is_a_results_folder_the_report_reads(tmp_path: Path) -> None:
    report.make_folder(tmp_path / "f", trials=12, records=300)
    folder = ResultsFolder(tmp_path / "f")
    summary = folder.summary()
    assert len(summary.trials) == 12 and folder.records(summary.trials[3].trial).num_rows == 300
    # one trial in seven holds a growing queue: the verdict catches it
    assert not summary.trials[3].sustained
    figures = report.render(tmp_path / "f")
    assert figures["html_mb"] > 0 and figures["peak_rss_mb"] > 0
    assert (tmp_path / "f" / "report.html").exists()


def test_the_thousand_trial_goal_is_not_judged_without_them() -> None:
    rows = [{"trials": 10, "seconds": 1.0, "html_mb": 5.0},
            {"trials": 100, "seconds": 2.0, "html_mb": 6.0}]  # fmt: skip
    time_goal, size_goal = report.goals(rows)
    assert time_goal["met"] == "not judged" and size_goal["met"] is True
    rows.append({"trials": 1000, "seconds": 25.0, "html_mb": 21.0})
    time_goal, size_goal = report.goals(rows)
    assert time_goal["measured"] == pytest.approx(12.5) and time_goal["met"] is False
    assert size_goal["met"] is False and np.isclose(size_goal["measured"], 21.0)


@pytest.mark.slow
def test_quick_run_writes_its_rows(run_bench: RunBench) -> None:
    out = run_bench("report.py", ["--quick"])
    assert [r["trials"] for r in out["rows"]] == [10, 100]
    assert all(r["html_mb"] > 0 for r in out["rows"]) and "load_average" in out
