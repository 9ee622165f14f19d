"""`roboscale launch / status / chaos`: help, bad input (exit 2, no traceback), live status."""

from __future__ import annotations

import argparse
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console

from roboscale.errors import UserError
from roboscale.runtime.cli import COMMANDS, add_parsers
from roboscale.runtime.statusfile import read_statuses, run_dir, status_path

EXAMPLE = Path(__file__).parents[2] / "examples" / "launch" / "workers.yaml"

# The main command's contract (src/roboscale/cli.py): UserError is one line and exit code 2.
MAIN = """\
import argparse, sys
from rich.console import Console
from roboscale.errors import UserError
from roboscale.runtime.cli import COMMANDS, add_parsers
parser = argparse.ArgumentParser(prog="roboscale")
add_parsers(parser.add_subparsers(dest="command", required=True))
args = parser.parse_args(sys.argv[1:])
try:
    code = COMMANDS[args.command](args, Console(soft_wrap=True))
except UserError as e:
    print(f"error: {e}", file=sys.stderr)
    code = 2
sys.exit(code)
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="roboscale")
    add_parsers(p.add_subparsers(dest="command", required=True))
    return p


def run(argv: list[str]) -> tuple[int, str]:
    """Run a subcommand as the main command does; return (exit code, stdout and error)."""
    out = io.StringIO()
    try:
        args = parser().parse_args(argv)
        code = COMMANDS[args.command](args, Console(file=out, width=120))
    except UserError as e:
        return 2, f"error: {e}"
    return code, out.getvalue()


@pytest.mark.parametrize("command", ["launch", "status", "chaos"])
def test_help_has_examples(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        parser().parse_args([command, "--help"])
    assert caught.value.code == 0
    assert f"roboscale {command}" in capsys.readouterr().out.split("examples:")[1]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["chaos", str(EXAMPLE), "--method", "poison"],
            "error: --method: unknown method 'poison'; allowed: sigterm | sigkill | exception",
        ),
        (
            ["chaos", str(EXAMPLE), "--rate", "-5"],
            "error: --rate: '-5' is not allowed; a number > 0 and <= 10000",
        ),
        (["chaos", str(EXAMPLE), "--rate", "lots"], "error: --rate: 'lots' is not allowed"),
        (["chaos", "nowhere.yaml"], "error: nowhere.yaml: no such launch file"),
        (["launch", "nowhere.yaml"], "error: nowhere.yaml: no such launch file"),
        (
            ["launch", str(EXAMPLE), "--chaos", "rate=200,method=poison"],
            "error: --chaos: method: unknown method 'poison'",
        ),
        (
            ["chaos", str(EXAMPLE), "--target", "/cameras/*"],
            "error: chaos target '/cameras/*' matches no node",
        ),
        (
            ["chaos", str(EXAMPLE), "--method", "hang", "--target", "/drivers/*"],
            "error: chaos method hang: needs in-process nodes with deadline_s",
        ),
    ],
)
def test_bad_input_is_a_clear_error_with_exit_code_2(argv: list[str], message: str) -> None:
    code, out = run(argv)
    assert code == 2
    assert out.startswith(message), out


def test_bad_input_through_a_real_process_has_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: robot\nchildren:\n  - node: w\n    class: nowhere:Thing\n")
    for argv in (["chaos", str(EXAMPLE), "--method", "poison"], ["launch", str(bad)]):
        proc = subprocess.run(
            [sys.executable, "-c", MAIN, *argv], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 2
        assert proc.stderr.startswith("error: ") and "Traceback" not in proc.stderr
    assert f"{bad}:4: children[0].class: cannot import nowhere" in proc.stderr


def test_status_reports_a_stale_file_and_removes_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    code, out = run(["status"])
    assert code == 1 and out.startswith("no running launch (looked in ")
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = status_path(run_dir(), "robot", dead.pid)
    stale.write_text("{}")
    code, out = run(["status", "robot"])
    assert code == 1 and f"robot (pid {dead.pid}): stale, process {dead.pid} is not running" in out
    assert not stale.exists()


def test_live_status_of_a_running_launch_then_ctrl_c(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    launch = subprocess.Popen(
        [sys.executable, "-c", MAIN, "launch", str(EXAMPLE)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not any(s.doc and s.doc["topics"] for s in read_statuses(name="tracker")):
            assert launch.poll() is None, launch.communicate()
            assert time.monotonic() < deadline, "no status file within 30 s"
            time.sleep(0.1)
        code, out = run(["status", "tracker"])
        assert code == 0
        assert f"tracker pid {launch.pid}  alive" in out
        assert "/tracker/workers/w99" in out and "/frames" in out
        code, out = run(["status", "--json"])
        (doc,) = json.loads(out)
        assert doc["pid"] == launch.pid and len(doc["rows"]) == 105  # 4 + 1 + 100
        assert {t["topic"] for t in doc["topics"]} == {"/frames", "/results"}
    finally:
        launch.send_signal(signal.SIGINT)
        _, err = launch.communicate(timeout=60)
    assert launch.returncode == 0, err
    assert read_statuses() == []  # removed at the end


def test_watch_ends_with_the_launch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    code, out = run(["status", "--watch"])
    assert code == 1 and "no running launch" in out  # nothing to watch: does not wait
    env = {**os.environ, "XDG_RUNTIME_DIR": str(tmp_path)}
    chaos = [
        sys.executable,
        "-c",
        MAIN,
        "chaos",
        str(EXAMPLE),
        "--duration",
        "1",
        "--log",
        str(tmp_path / "k.jsonl"),
    ]
    proc = subprocess.Popen(chaos, env=env, stdout=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not read_statuses(name="tracker"):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        code, out = run(["status", "tracker", "--watch"])  # returns when the launch ends
        assert code == 0 and out.rstrip().endswith("the launch ended")
        assert "chaos:" in out and "/tracker/workers/w0" in out  # its last view stays
    finally:
        stdout, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "alive, every child running" in stdout


def test_the_chaos_keys_in_help_are_the_ones_parsed() -> None:
    from roboscale.runtime import chaos, cli

    assert cli.KEYS == chaos.KEYS
