"""docs/reproduction.md is written from the committed summaries: regenerated here, it
must be the committed file, so no figure in it is typed by hand."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from roboscale.errors import UserError
from roboscale.reproduce.catalogue import EXPERIMENTS, FINDINGS
from roboscale.reproduce.document import estimate, render
from roboscale.reproduce.evidence import RECORD_FILE, Evidence

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_the_document_is_written_from_the_kept_summaries() -> None:
    expected = render(FINDINGS, EXPERIMENTS, Evidence(DOCS / "reproduction"))
    committed = (DOCS / "reproduction.md").read_text()
    assert committed == expected, "run `roboscale reproduce --document-only` and commit"


def test_every_finding_has_a_section_and_a_row() -> None:
    text = render(FINDINGS, EXPERIMENTS, Evidence(DOCS / "reproduction"))
    for f in FINDINGS:
        assert f"### {f.id}: " in text
        assert f"| [{f.id}](#" in text


def test_an_experiment_without_results_is_listed_not_dropped(tmp_path: Path) -> None:
    text = render(FINDINGS, EXPERIMENTS, Evidence(tmp_path / "none"))
    assert "### E7-256-1hz: not run" in text
    assert "Not run: `experiments/thesis-e7-256.yaml` (needs root, ros1)" in text
    assert "### LR-q5-freq-scaling: cannot run here" in text


def test_a_damaged_run_record_is_a_clear_error(tmp_path: Path) -> None:
    kept = sorted((DOCS / "reproduction").glob("*/run-1"))
    if not kept:
        pytest.skip("no kept runs yet")
    run = tmp_path / "ev" / kept[0].parent.name / "run-1"
    shutil.copytree(kept[0], run)
    record = json.loads((run / RECORD_FILE).read_text())
    record["load"]["before"] = "high"
    (run / RECORD_FILE).write_text(json.dumps(record))
    with pytest.raises(UserError, match=r"reproduce.json: load.before"):
        Evidence(tmp_path / "ev").runs(kept[0].parent.name)


def test_a_figure_shows_its_bootstrap_interval_and_runs() -> None:
    three = estimate({1: 1.0, 2: 2.0, 3: 3.0})
    assert three is not None and three.value == 2.0 and three.runs == 3
    assert three.low is not None and three.high is not None
    assert 1.0 <= three.low <= 2.0 <= three.high <= 3.0
    one = estimate({1: 2.5})
    assert one is not None and one.value == 2.5 and one.note == "single run"
    assert one.low is None and estimate({}) is None
