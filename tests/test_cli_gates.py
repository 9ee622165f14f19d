"""The command line's small promises: hints printed whole, refused trials marked in a dry
run, and `bench --fail-on` failing a CI job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from roboscale.cli import main

SRC = Path(__file__).resolve().parents[1] / "src"


def hide(tmp_path: Path, *modules: str) -> dict[str, str]:
    """An environment whose Python cannot import `modules` (as on a machine without the
    extra): a package of that name that refuses to import comes first on the path."""
    for name in modules:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('{name} hidden')\n")
    return {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{SRC}"}


def roboscale(argv: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-c", "from roboscale.cli import main; main()", *argv]
    return subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, check=False)


def test_backends_and_stacks_print_install_hints_whole(tmp_path: Path) -> None:
    env = {**hide(tmp_path, "cyclonedds", "cv2"), "COLUMNS": "300"}
    backends = roboscale(["backends"], env)
    assert backends.returncode == 0, backends.stderr
    assert "pip install 'roboscale[dds]'" in backends.stdout
    stacks = roboscale(["stacks"], env)
    assert stacks.returncode == 0, stacks.stderr
    assert "pip install 'roboscale[facetrack]'" in stacks.stdout


def test_dry_run_marks_trials_that_would_be_refused(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: x\nsweep:\n  backend: [native, dds]\n  rate_hz: 10\n"
                    "trial:\n  runs: 1\n  messages: 5\n")  # fmt: skip
    env = {**hide(tmp_path, "cyclonedds"), "COLUMNS": "300"}
    done = roboscale(["bench", str(spec), "--dry-run"], env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    native = next(line for line in lines if "-native-" in line)
    dds = next(line for line in lines if "-dds-" in line)
    assert "would be refused" not in native
    assert "would be refused: backend 'dds' is not installed" in dds
    assert "roboscale[dds]" in dds
    assert "1 of 2 trials would be refused" in done.stdout


def test_dry_run_marks_a_placement_the_backend_cannot_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text("name: x\nsweep:\n  backend: native\n  rate_hz: 10\n  hosts: 2\n")
    with pytest.raises(SystemExit):
        main(["bench", str(spec), "--dry-run"])
    out = " ".join(capsys.readouterr().out.split())
    assert "would be refused:" in out
    assert "cannot spread a pair over 2 hosts" in out or "need root" in out


# A late bound of 1 µs no round trip meets (the p99 ceiling needs 100 messages to be
# judged): both trials are not sustained.
SPEC = """\
name: g
sweep: {backend: native, rate_hz: [50, 100]}
trial: {runs: 1, messages: 40}
verdict: {late_cap_ms: 0.001}
"""


@pytest.mark.parametrize(("fail_on", "code"), [(None, 0), ("failed", 0), ("unsustained", 1)])
def test_fail_on_unsustained_fails_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fail_on: str | None, code: int
) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(SPEC)
    argv = ["bench", str(spec), "--out", str(tmp_path / "out")]
    with pytest.raises(SystemExit) as done:
        main([*argv, "--fail-on", fail_on] if fail_on else argv)
    out = " ".join(capsys.readouterr().out.split())
    assert done.value.code == code, out
    if code:
        assert "--fail-on unsustained: 2 trial(s): t0000-native-50hz" in out


def test_fail_on_refuses_other_words(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["bench", "x.yaml", "--fail-on", "slow"])
    assert (
        done.value.code == 2 and "'slow'; allowed: unsustained, failed" in capsys.readouterr().err
    )


def test_a_run_with_replace_can_run_again_in_its_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `make demo` does, twice in a row: the second run replaces the first's results."""
    spec = tmp_path / "s.yaml"
    spec.write_text("name: d\nsweep:\n  backend: native\n  rate_hz: 50\n"
                    "trial:\n  runs: 1\n  messages: 20\n")  # fmt: skip
    argv = ["bench", str(spec), "--out", str(tmp_path / "demo"), "--replace"]
    for _ in range(2):
        with pytest.raises(SystemExit) as done:
            main(argv)
        assert done.value.code == 0, capsys.readouterr()
    summary = (tmp_path / "demo" / "summary.json").read_text()
    assert summary.count('"trial": "t0000-native-50hz-text-p1-r0"') == 1
    with pytest.raises(SystemExit) as done:
        main([*argv, "--resume"])
    assert done.value.code == 2 and "choose one" in capsys.readouterr().err
