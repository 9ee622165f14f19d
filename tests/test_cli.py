"""The command line: bad input is a clear message and a non-zero exit, never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.cli import main

GOOD = "name: x\nsweep:\n  backend: zenoh\n  rate_hz: 10\ntrial:\n  messages: 5\n"


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def spec(tmp_path: Path, text: str) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return str(path)


def test_broken_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["bench", spec(tmp_path, "name: [x\n")], capsys)
    assert code == 2 and "s.yaml:" in err and "not valid YAML" in err
    assert "Traceback" not in err


def test_unknown_field_suggests(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = GOOD.replace("rate_hz", "rate_hzz")
    code, _, err = run(["bench", spec(tmp_path, bad)], capsys)
    assert code == 2 and "s.yaml:4: sweep.rate_hzz: unknown field" in err
    assert "did you mean 'rate_hz'" in err


def test_negative_rate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["bench", spec(tmp_path, GOOD.replace("10", "-5"))], capsys)
    assert code == 2 and "s.yaml:4: sweep.rate_hz" in err


def test_unknown_backend_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["bench", spec(tmp_path, GOOD), "--backend", "ros2"], capsys)
    assert code == 2 and "unknown backend 'ros2'" in err


def test_unwritable_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = str(blocker / "results")
    code, _, err = run(["bench", spec(tmp_path, GOOD), "--out", out], capsys)
    assert code == 2 and "cannot write results there" in err and "--out" in err


def test_report_of_unknown_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "run.json").write_text('{"format_version": 7}')
    code, _, err = run(["report", str(tmp_path)], capsys)
    assert code == 2 and "format_version: 7 is not supported" in err


def test_dry_run_lists_trials(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["bench", spec(tmp_path, GOOD), "--dry-run"], capsys)
    assert code == 0 and "t0000-zenoh-10hz-text-p1-r0" in out


def test_backend_not_installed_says_how_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PATH without roscore is a machine without ROS 1: the error names the packages."""
    monkeypatch.setenv("PATH", str(tmp_path))
    out = tmp_path / "out"
    code, _, err = run(
        ["bench", spec(tmp_path, GOOD), "--backend", "ros1", "--out", str(out)], capsys
    )
    assert code == 2 and "backend 'ros1' is not installed: roscore not found" in err
    assert "apt-get install ros-core python3-rospy" in err and "Traceback" not in err
    assert not out.exists()  # refused before anything ran


def test_resume_runs_only_the_unfinished_trials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    text = "name: r\nsweep:\n  backend: native\n  rate_hz: [50, 100]\n"
    text += "trial:\n  runs: 1\n  messages: 20\n"
    argv = ["bench", spec(tmp_path, text), "--out", str(tmp_path / "out")]
    code, _, err = run(argv, capsys)
    assert code == 0, err
    summary_path = tmp_path / "out" / "summary.json"
    summary = json.loads(summary_path.read_text())
    kept, dropped = summary["trials"]
    summary["trials"] = [kept]  # as if interrupted before the second trial was summarized
    summary_path.write_text(json.dumps(summary))
    code, _, err = run(argv, capsys)
    assert code == 2 and "holds results of 'r' already (1 of 2 trials finished)" in err
    code, out, err = run([*argv, "--resume"], capsys)
    assert code == 0, err
    assert "resuming: 1 finished trials kept, 2 planned" in out
    # Run again: only the dropped one (the headline may still name the kept one, as in
    # its warning of trials that ran beside other work on a loaded machine).
    progress = out.split("resuming")[1]
    ran = {
        line.split()[1].rstrip(":")
        for line in progress.splitlines()
        if line.lstrip()[:1] in ("✓", "✗")
    }
    assert dropped["trial"] in ran and kept["trial"] not in ran, progress
    after = json.loads(summary_path.read_text())["trials"]
    assert [e["trial"] for e in after] == [kept["trial"], dropped["trial"]]
    assert after[0] == kept  # the finished trial is kept as it was


def test_a_broken_msg_file_exits_2_before_anything_runs(tmp_path: Path) -> None:
    """The real command in a process of its own: exit 2, the .msg file's line and field,
    no traceback, no results folder, no process left behind."""
    import subprocess
    import sys

    pytest.importorskip("rosbags")  # the data extra, which make test installs
    broken = tmp_path / "msgs" / "robot_msgs" / "msg" / "Wheel.msg"
    broken.parent.mkdir(parents=True)
    broken.write_text("std_msgs/Header header\nfloat32[] currents\nuint8[ data\n")
    text = GOOD.replace("rate_hz: 10", "rate_hz: 10\n  payload: robot_msgs/Wheel")
    path = spec(tmp_path, text + "message_types: msgs\n")
    argv = [sys.executable, "-c", "from roboscale.cli import main; main()", "bench", path,
            "--out", str(tmp_path / "out")]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"s.yaml:8: message_types: {broken}:3: data: 'uint8[' is not a type" in proc.stderr
    assert not (tmp_path / "out").exists()
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, check=False)
    assert left.stdout == b""


@pytest.mark.parametrize(
    "command",
    ["bench", "report", "compare", "export", "backends", "stacks", "capacity", "hosts",
     "reproduce", "launch", "status", "chaos"],
)  # fmt: skip
def test_every_subcommands_help_says_what_it_does_and_shows_an_example(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`roboscale CMD --help` teaches: a description beyond the usage line, and an example
    that starts with `roboscale CMD`."""
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    description = text.split("\n\n")[1]
    assert not description.startswith(("positional arguments", "options")), text
    assert f"\n  roboscale {command} " in text or f"\n  roboscale {command}\n" in text, text
