"""`roboscale reproduce`: the dry run lists every finding with its trials and time; a bad
choice is an error line and exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.cli import main
from roboscale.reproduce.catalogue import FINDINGS

REPO = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(["reproduce", "--root", str(REPO), *argv])
    out, err = capsys.readouterr()
    return int(done.value.code or 0), out, err


def test_the_dry_run_lists_every_finding_with_trials_and_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "--dry-run", "--quick")
    assert code == 0
    for f in FINDINGS:
        assert f"{f.id}:" in out
    assert "thesis-e7-256: 12 trials (3 runs), about" in out
    assert "cannot run here" in out and "min for what can run here" in out


def test_a_seed_selects_its_findings(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--dry-run", "--seed", "paper", "--runs", "1")
    assert code == 0 and "P-restart:" in out and "E1-knee" not in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--finding", "E99"], "unknown finding 'E99'; known:"),
        (["--runs", "0"], "--runs 0: allowed: 1 to 100"),
    ],
)
def test_bad_choices_are_errors(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, _, err = run(capsys, "--dry-run", *argv)
    assert code == 2 and message in err
