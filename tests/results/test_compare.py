"""roboscale compare: two real runs of one spec pass; a slowdown injected into a copy of
one fails with exit 1, naming the configurations that regressed.

The two runs are the alternate runs of one sweep (trial.runs: 6; runs 0, 2, 4 against
1, 3, 5): on this shared machine, load changes from one minute to the next, and two sweeps
one after the other would compare the load, not roboscale (two separate demo runs under
a load average of 12 differed by up to 9.6x in p50)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from rich.console import Console

from roboscale.cli import main
from roboscale.lab.runner import run_sweep
from roboscale.records.folder import ResultsFolder
from roboscale.results.compare import bootstrap, compare
from roboscale.spec.loader import load_spec
from roboscale.spec.planner import plan

SPEC = """\
name: gate
sweep:
  backend: native
  rate_hz: [200, 500]
  workload: [echo, chain]
  chain_length: 3
trial:
  messages: 200
  warmup: 5
  drain_s: 1
  runs: 6
"""


def real_run(folder: Path, name: str) -> Path:
    spec_path = folder / "spec.yaml"
    spec_path.write_text(SPEC)
    spec = load_spec(spec_path)
    out = folder / name
    outcome = run_sweep(spec, plan(spec), out, SPEC, "test", Console(quiet=True))
    assert outcome.failed == 0
    return out


def keep_runs(folder: Path, runs: set[int]) -> Path:
    """The folder with only the summary entries of `runs`."""
    results = ResultsFolder(folder)
    summary = results.summary()
    kept = [e for e in summary.trials if e.run in runs]
    results.write_summary(summary.model_copy(update={"trials": kept}))
    return folder


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two runs of the same spec on the native backend, each of three runs a configuration,
    interleaved in time."""
    folder = tmp_path_factory.mktemp("gate")
    whole = real_run(folder, "whole")
    base = keep_runs(shutil.copytree(whole, folder / "base"), {0, 2, 4})
    again = keep_runs(shutil.copytree(whole, folder / "again"), {1, 3, 5})
    return base, again


def slowed(base: Path, out: Path, factor: float, rate_hz: float) -> Path:
    """A copy of `base` whose trials at `rate_hz` took `factor` times as long to arrive."""
    shutil.copytree(base, out)
    folder = ResultsFolder(out)
    for entry in folder.summary().trials:
        if entry.rate_hz != rate_hz:
            continue
        table = folder.records(entry.trial)
        sent = table.column("t_sent").to_numpy().astype(np.int64)
        for name in ("t_echoed", "t_received"):
            got = table.column(name).to_numpy(zero_copy_only=False)
            late = sent + np.round((got - sent) * factor)
            column = pa.array(late, type=pa.int64(), mask=np.isnan(got))
            table = table.set_column(table.schema.get_field_index(name), name, column)
        folder.write_trial(entry.trial, [table], folder.metadata(entry.trial))
    return out


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(argv)
    out = capsys.readouterr()
    return int(done.value.code or 0), " ".join((out.out + out.err).split())


# Two real sets of runs of one spec, even interleaved, need not pass: on this 2-core VM an
# idle CI run saw chain 500 Hz at 1.30x [1.11, 1.68] between them (and 1.57x beside
# `make test-loaded`'s CPU hog), a real difference the gate reports as it should. What must
# always hold is that no change at all is never called a regression: runs against their
# own copy.
@pytest.mark.slow
def test_a_set_of_runs_against_its_own_copy_passes(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, _ = runs
    copy = shutil.copytree(base, tmp_path / "copy")
    code, text = run_cli(["compare", str(base), str(copy)], capsys)
    assert code == 0, text
    assert "no regression beyond 10% in 4 configurations" in text


def test_injected_slowdown_fails_naming_the_configurations(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, _ = runs
    slow = slowed(base, tmp_path / "slow", factor=3.0, rate_hz=500.0)
    code, text = run_cli(["compare", str(base), str(slow), "--json", str(tmp_path / "c.json")],
                         capsys)  # fmt: skip
    assert code == 1, text
    assert "2 of 4 configurations regressed (slower beyond 10%, or no longer" in text
    assert "echo native text 500 Hz: 3.0" in text
    assert "chain native text 500 Hz chain_length=3: 3.0" in text
    outcome = compare(base, slow)
    assert [r.configuration for r in outcome.regressed] == [
        "echo native text 500 Hz",
        "chain native text 500 Hz chain_length=3",
    ]
    for row in outcome.regressed:
        assert row.ratio == pytest.approx(3.0, rel=0.02)
        assert row.low is not None and row.high is not None and 1.1 < row.low < 3.0 < row.high
    assert (tmp_path / "c.json").is_file()


@pytest.mark.slow  # its intervals are as wide as the real runs' spread: see above
def test_a_slowdown_within_the_threshold_passes(runs: tuple[Path, Path], tmp_path: Path) -> None:
    base, _ = runs
    slow = slowed(base, tmp_path / "slow", factor=3.0, rate_hz=200.0)
    assert compare(base, slow, threshold=5.0).regressed == []
    assert len(compare(base, slow, threshold=0.1).regressed) == 2


def test_folders_without_a_common_configuration_are_refused(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "other"
    shutil.copytree(runs[0], other)
    summary = (other / "summary.json").read_text().replace('"native"', '"zenoh"')
    (other / "summary.json").write_text(summary)
    code, text = run_cli(["compare", str(runs[0]), str(other)], capsys)
    assert code == 2 and "share no configuration" in text


def test_bootstrap_over_runs_widens_with_their_spread() -> None:
    rng = np.random.default_rng(0)
    same = [rng.normal(100, 5, 500) for _ in range(3)]
    spread = [rng.normal(m, 5, 500) for m in (80, 100, 120)]
    p50 = np.median
    narrow = np.ptp(np.percentile(bootstrap(same, p50, 400, rng), [2.5, 97.5]))
    wide = np.ptp(np.percentile(bootstrap(spread, p50, 400, rng), [2.5, 97.5]))
    assert wide > 5 * narrow


def test_too_few_runs_a_side_are_shown_but_not_judged(
    runs: tuple[Path, Path], tmp_path: Path
) -> None:
    """Two runs a side: resampled, they give intervals too narrow; nothing is judged."""
    base = keep_runs(shutil.copytree(runs[0], tmp_path / "base"), {0, 2})
    slow = keep_runs(slowed(runs[0], tmp_path / "slow", factor=3.0, rate_hz=500.0), {0, 2})
    outcome = compare(base, slow)
    assert outcome.regressed == []
    slower = [r for r in outcome.rows if r.ratio is not None and r.ratio > 2.5]
    assert len(slower) == 2 and not any(r.judged or r.significant for r in slower)
    assert all("latency not judged" in r.note for r in outcome.rows)
