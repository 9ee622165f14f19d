"""Process nodes and command children with real OS processes."""

from __future__ import annotations

import os
import queue
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import EVENT_TIMEOUT_S

from roboscale.runtime.child import ChildHandle, ChildStartError, ExitCallback, ExitReason
from roboscale.runtime.process import CommandChild, ProcessNode
from roboscale.runtime.zygote import Zygote

TARGETS = """
import os, signal, sys, time

def idle(config, ready):
    ready()
    time.sleep(config.get("sleep", 30))
    return config.get("code", 0)

def crash(config, ready):
    ready()
    time.sleep(0.05)
    raise RuntimeError("node bug")

def never_ready(config, ready):
    time.sleep(30)

def stubborn(config, ready):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ready()
    time.sleep(30)
"""

Exits = queue.SimpleQueue[tuple[str, ExitReason, str]]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "proc_targets.py").write_text(TARGETS)
    return {"PYTHONPATH": str(tmp_path)}


@pytest.fixture
def zygote(env: dict[str, str]) -> Iterator[Zygote]:
    with Zygote(["zenoh"], env=env) as z:
        yield z


def recorder() -> tuple[Exits, ExitCallback]:
    exits: Exits = queue.SimpleQueue()

    def on_exit(name: str, reason: ExitReason, detail: str) -> None:
        exits.put((name, reason, detail))

    return exits, on_exit


def zombies_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] == "Z":
                found.append(int(entry))
    return found


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"


def wait_gone(pid: int, timeout_s: float = EVENT_TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.01)
    return False


def test_handles_satisfy_the_child_contract(env: dict[str, str]) -> None:
    assert isinstance(ProcessNode("n", "proc_targets:idle", env=env), ChildHandle)
    assert isinstance(CommandChild("c", ["true"]), ChildHandle)


@pytest.mark.zenoh
def test_zygote_node_kill_is_reported_as_killed(zygote: Zygote, env: dict[str, str]) -> None:
    exits, on_exit = recorder()
    node = ProcessNode("cam", "proc_targets:idle", zygote=zygote, env=env)
    node.start(on_exit)
    assert node.started_via == "zygote" and node.alive() and node.pid
    os.kill(node.pid, signal.SIGKILL)
    assert exits.get(timeout=EVENT_TIMEOUT_S) == ("cam", ExitReason.KILLED, "killed by SIGKILL")
    assert not node.alive()


def test_fresh_python_node_exit_code_is_a_crash(env: dict[str, str]) -> None:
    exits, on_exit = recorder()
    node = ProcessNode("n", "proc_targets:idle", {"sleep": 0.05, "code": 3}, env=env)
    node.start(on_exit)
    assert node.started_via == "python"
    assert exits.get(timeout=EVENT_TIMEOUT_S) == ("n", ExitReason.CRASH, "exit code 3")


@pytest.mark.zenoh
def test_exception_in_node_is_a_crash_with_its_output(zygote: Zygote, tmp_path: Path) -> None:
    exits, on_exit = recorder()
    log = tmp_path / "n.log"
    node = ProcessNode("n", "proc_targets:crash", zygote=zygote, log=log)
    node.start(on_exit)
    assert exits.get(timeout=EVENT_TIMEOUT_S) == ("n", ExitReason.CRASH, "exit code 1")
    assert "RuntimeError: node bug" in log.read_text()


@pytest.mark.zenoh
def test_normal_exit_is_normal(zygote: Zygote) -> None:
    exits, on_exit = recorder()
    ProcessNode("n", "proc_targets:idle", {"sleep": 0.01}, zygote=zygote).start(on_exit)
    assert exits.get(timeout=EVENT_TIMEOUT_S) == ("n", ExitReason.NORMAL, "exit code 0")


@pytest.mark.parametrize("via_zygote", [True, False])
def test_unknown_target_fails_start_with_the_reason(
    zygote: Zygote, env: dict[str, str], via_zygote: bool
) -> None:
    node = ProcessNode("n", "proc_targets:nope", zygote=zygote if via_zygote else None, env=env)
    with pytest.raises(ChildStartError, match="has no attribute 'nope'"):
        node.start(lambda *_: None)
    assert not node.alive()


@pytest.mark.zenoh
def test_not_ready_in_time_fails_start_and_kills_it(zygote: Zygote) -> None:
    node = ProcessNode("n", "proc_targets:never_ready", zygote=zygote, ready_timeout_s=0.3)
    with pytest.raises(ChildStartError, match=r"not ready within 0\.3 s"):
        node.start(lambda *_: None)
    assert not node.alive()


@pytest.mark.parametrize("via_zygote", [True, False])
def test_stop_is_graceful_and_reports_nothing(
    zygote: Zygote, env: dict[str, str], via_zygote: bool
) -> None:
    exits, on_exit = recorder()
    node = ProcessNode("n", "proc_targets:idle", zygote=zygote if via_zygote else None, env=env)
    node.start(on_exit)
    pid = node.pid
    assert pid is not None
    node.stop(timeout_s=5.0)
    assert not node.alive() and wait_gone(pid)
    time.sleep(0.05)  # a late notification would land here
    assert exits.empty()


@pytest.mark.zenoh
def test_stop_kills_a_node_that_ignores_sigterm(zygote: Zygote) -> None:
    exits, on_exit = recorder()
    node = ProcessNode("n", "proc_targets:stubborn", zygote=zygote)
    node.start(on_exit)
    pid = node.pid
    assert pid is not None
    node.stop(timeout_s=0.2)
    assert wait_gone(pid)
    assert exits.empty()


@pytest.mark.zenoh
def test_fifty_kills_restarted_from_on_exit_leave_no_zombie(zygote: Zygote) -> None:
    """A supervisor may restart inside on_exit: nothing deadlocks, nothing is left behind."""
    node = ProcessNode("w", "proc_targets:idle", zygote=zygote)
    restarted = threading.Semaphore(0)
    kills = 50

    def on_exit(name: str, reason: ExitReason, detail: str) -> None:
        assert reason is ExitReason.KILLED
        node.start(on_exit)
        restarted.release()

    node.start(on_exit)
    for _ in range(kills):
        pid = node.pid
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        assert restarted.acquire(timeout=EVENT_TIMEOUT_S)
    assert node.started_via == "zygote"
    node.stop(timeout_s=2.0)
    assert zombies_of(zygote.pid) == []
    assert zombies_of(os.getpid()) == []


@pytest.mark.zenoh
def test_node_falls_back_to_python_when_the_zygote_is_dead(
    zygote: Zygote, env: dict[str, str]
) -> None:
    zygote.close()
    node = ProcessNode("n", "proc_targets:idle", zygote=zygote, env=env)
    node.start(lambda *_: None)
    assert node.started_via == "python"
    node.stop(timeout_s=2.0)


def test_command_ready_on_an_output_line(tmp_path: Path) -> None:
    script = "echo starting; sleep 0.05; echo 'node up on port 7'; exec sleep 30"
    child = CommandChild("cmd", ["sh", "-c", script], ready_line=r"up on port \d+")
    exits, on_exit = recorder()
    child.start(on_exit)
    assert child.alive()
    child.stop(timeout_s=2.0)
    assert not child.alive() and exits.empty()


def test_command_ready_by_probe(tmp_path: Path) -> None:
    flag = tmp_path / "up"
    child = CommandChild("cmd", ["sh", "-c", f"sleep 0.1; touch {flag}; exec sleep 30"])
    child.probe = flag.exists
    child.start(lambda *_: None)
    assert flag.exists()
    child.stop(timeout_s=2.0)


def test_command_exiting_before_ready_fails_with_its_output() -> None:
    child = CommandChild("cmd", ["sh", "-c", "echo cannot open device; exit 4"], ready_line="up")
    with pytest.raises(ChildStartError, match=r"exit code 4 before it was ready.*cannot open"):
        child.start(lambda *_: None)


def test_missing_command_is_a_start_error() -> None:
    # setpriv execs it, so the error is its output; without setpriv, Popen raises.
    child = CommandChild("cmd", ["/nonexistent/rosrun"], ready_line="up")
    with pytest.raises(ChildStartError, match=r"nonexistent/rosrun"):
        child.start(lambda *_: None)


def test_command_crash_by_signal_kills_its_orphans(tmp_path: Path) -> None:
    bg = tmp_path / "bg.pid"
    script = f"sleep 30 & echo $! > {bg}; echo up; sleep 0.2; kill -SEGV $$"
    child = CommandChild("cmd", ["sh", "-c", script], ready_line="up")
    exits, on_exit = recorder()
    child.start(on_exit)
    assert exits.get(timeout=EVENT_TIMEOUT_S) == ("cmd", ExitReason.CRASH, "killed by SIGSEGV")
    assert wait_gone(int(bg.read_text()))  # its background job did not outlive it
    assert zombies_of(os.getpid()) == []


def test_stop_ends_the_whole_process_group(tmp_path: Path) -> None:
    bg = tmp_path / "bg.pid"
    child = CommandChild("cmd", ["sh", "-c", f"sleep 30 & echo $! > {bg}; echo up; wait"])
    child.ready_line = re.compile("up")
    child.start(lambda *_: None)
    child.stop(timeout_s=2.0)
    assert wait_gone(int(bg.read_text()))


@pytest.mark.zenoh
def test_children_run_in_their_own_process_group(zygote: Zygote) -> None:
    node = ProcessNode("n", "proc_targets:idle", zygote=zygote)
    node.start(lambda *_: None)
    assert node.pid is not None
    assert os.getpgid(node.pid) == node.pid != os.getpgid(0)
    node.stop(timeout_s=2.0)


def test_python_is_the_running_interpreter() -> None:
    assert ProcessNode("n", "m:f").python == sys.executable


def test_children_that_write_and_die_at_once_leave_the_monitor_watching() -> None:
    """A child's pidfd and its output pipe ready in one select round: reaping it (pidfd
    first) unregisters the pipe, whose key the round must then skip. It did not, once:
    'KeyError: 75 is not registered' ended the monitor thread in CI, and every process
    child after it was left unwatched (a hung-heartbeat restart never came)."""
    exits, on_exit = recorder()
    for k in range(200):
        # It exits as its own child writes: the pidfd and the pipe ready together.
        script = "echo up; (sleep 0.01; echo late words) & sleep 0.01"
        child = CommandChild(f"burst{k}", ["sh", "-c", script], ready_line="up")
        child.start(on_exit)
    ended = {exits.get(timeout=EVENT_TIMEOUT_S)[0] for _ in range(200)}
    assert ended == {f"burst{k}" for k in range(200)}
    # It outlives its start (a command with no ready line is ready while it runs: `true`
    # could be reaped before start() looked, on a loaded machine), then its exit is seen.
    CommandChild("after", ["sleep", "1"]).start(on_exit)
    assert exits.get(timeout=EVENT_TIMEOUT_S)[0] == "after"
