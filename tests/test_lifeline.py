"""Nothing outlives its controller: SIGKILL the controller, every descendant goes with it.

Each test starts a controller as a subprocess (a bare one, `roboscale bench`, `launch`,
`chaos`), waits until its children exist (read from /proc: events, not sleeps), notes
every descendant and the lifeline token they carry, SIGKILLs the controller, and then
requires every one of them, and every holder of the token, to be gone.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from roboscale import lifeline
from roboscale.env.cleanup import MARKER_DIR, leftovers, process_start

GONE_WITHIN_S = 30.0  # a bound for a hang; the sweep takes well under a second
CHILDREN_WITHIN_S = 180.0  # interpreters, routers and agents starting on a loaded machine

# Commands that leave a grandchild in a session of its own: a group kill or
# PR_SET_PDEATHSIG on the command does not reach it; the lifeline must.
LAUNCH = """\
name: orphans
children:
  - node: camera
    class: roboscale.runtime.chaos:FrameSource
    params: {rate_hz: 10}
  - supervisor: drivers
    intensity: 1000
    period_s: 1
    children:
      - command: pan
        argv: [sh, -c, "setsid sleep 3600 & exec sleep 3601"]
        shutdown_s: 1
      - command: tilt
        argv: [sh, -c, "setsid sleep 3600 & exec sleep 3601"]
        shutdown_s: 1
"""

BENCH = """\
name: orphans
sweep:
  backend: {backend}
  rate_hz: 100
  hosts: {hosts}
  link: {link}
trial:
  duration_s: 600
env:
  verify_link: false
"""

BARE = """
import subprocess, sys
from roboscale import lifeline
lifeline.ensure()
subprocess.Popen(["sh", "-c", "setsid sleep 3600 & exec sleep 3601"], start_new_session=True)
print("READY", flush=True)
sys.stdin.read()
"""

CLI = "from roboscale.cli import main; main()"


def parents() -> dict[int, int]:
    """pid -> parent pid of every process now."""
    table = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            table[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    return table


def descendants(root: int) -> set[int]:
    table = parents()
    found: set[int] = set()
    frontier = {root}
    while frontier:
        frontier = {pid for pid, ppid in table.items() if ppid in frontier} - found
        found |= frontier
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def token_of(pid: int) -> str | None:
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    prefix = f"{lifeline.ENV_VAR}=".encode()
    return next((v[len(prefix) :].decode() for v in environ if v.startswith(prefix)), None)


def alive(pid: int, start: str | None) -> bool:
    """Still the same process (not a reused pid) and not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z" and process_start(pid) == start


def wait_for(
    what: str, ready: Callable[[], bool], timeout_s: float, proc: subprocess.Popen[str]
) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"the controller exited ({proc.returncode}) before {what}: {err[-2000:]}")
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:.0f} s"
        time.sleep(0.05)


def count_matching(root: int, text: str) -> int:
    """Descendants running `text` (a program and its first words) or a module named so."""
    return sum(
        cmdline(pid).startswith(text) or f" -m {text} " in cmdline(pid) for pid in descendants(root)
    )


# Syscall numbers as /proc/PID/syscall shows them: read, and clock_nanosleep (Python's
# time.sleep, which the sender's pacing loop sleeps in).
SYSCALLS = {"x86_64": ("0", "230"), "aarch64": ("63", "115")}[os.uname().machine]


def syscall(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return []


def streaming(root: int) -> bool:
    """The bench's sender is pacing its stream: killed earlier, agents would end on
    their own at EOF of stdin, which would prove nothing.

    Every echoer is blocked reading stdin (it said READY and waits for STOP), and the
    sender, which after GO reads stdin no more, sleeps between messages.
    """
    read, sleep = SYSCALLS
    agents = [p for p in descendants(root) if "roboscale.workloads.agent" in cmdline(p)]
    senders = [p for p in agents if "/sender_" in cmdline(p)]
    echoers = [p for p in agents if "/echoer_" in cmdline(p)]
    return (
        bool(senders and echoers)
        and all(syscall(p)[:2] == [read, "0x0"] for p in echoers)
        and all(syscall(p)[:1] == [sleep] for p in senders)
    )


def kill_and_check(proc: subprocess.Popen[str]) -> set[int]:
    """SIGKILL the controller; every descendant and token holder is gone in a bounded wait."""
    family = {pid: process_start(pid) for pid in descendants(proc.pid)}
    tokens = {token_of(pid) for pid in family} - {None}
    assert tokens, "the controller's children carry no lifeline token"
    proc.kill()
    proc.wait(GONE_WITHIN_S)
    deadline = time.monotonic() + GONE_WITHIN_S
    left: list[str] = []
    while time.monotonic() < deadline:
        left = [cmdline(p) for p, start in family.items() if alive(p, start)]
        left += [cmdline(p) for p in parents() if token_of(p) in tokens]
        if not left:
            return set(family)
        time.sleep(0.05)
    pytest.fail(f"left running {GONE_WITHIN_S:.0f} s after SIGKILL of the controller: {left}")


_started: list[subprocess.Popen[str]] = []


@pytest.fixture(autouse=True)
def _no_controller_left() -> Iterator[None]:
    yield
    while _started:  # a failed test still ends its controller (and so, its family)
        proc = _started.pop()
        proc.kill()
        proc.wait(GONE_WITHIN_S)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()


def controller(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "XDG_RUNTIME_DIR": str(cwd / "xdg")}
    env.pop(lifeline.ENV_VAR, None)
    proc = subprocess.Popen(
        [sys.executable, *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _started.append(proc)
    return proc


def test_a_bare_controller_takes_its_grandchildren_in_other_sessions(tmp_path: Path) -> None:
    proc = controller(["-c", BARE], tmp_path)
    assert proc.stdout is not None and proc.stdout.readline() == "READY\n"
    wait_for("two sleeps", lambda: count_matching(proc.pid, "sleep 360") == 2, 30, proc)
    kill_and_check(proc)


def test_a_controller_that_ends_normally_leaves_nothing_either(tmp_path: Path) -> None:
    proc = controller(["-c", BARE], tmp_path)
    assert proc.stdout is not None and proc.stdout.readline() == "READY\n"
    family = {pid: process_start(pid) for pid in descendants(proc.pid)}
    proc.communicate("", timeout=GONE_WITHIN_S)  # stdin closed: it returns, leaving its sleeps
    deadline = time.monotonic() + GONE_WITHIN_S
    while any(alive(p, s) for p, s in family.items()):
        assert time.monotonic() < deadline, "the sleeps outlived a controller that just returned"
        time.sleep(0.05)


def test_a_forked_child_does_not_hold_its_parents_lifeline(tmp_path: Path) -> None:
    code = BARE.replace(
        'print("READY"',
        "import os, time\nforked = os.fork()\nif forked == 0:\n    time.sleep(3600)\n"
        'print(forked, flush=True)\nprint("READY"',
    )
    proc = controller(["-c", code], tmp_path)
    assert proc.stdout is not None
    forked = int(proc.stdout.readline())
    assert proc.stdout.readline() == "READY\n"
    started = process_start(forked)
    try:
        wait_for("the sleeps", lambda: count_matching(proc.pid, "sleep 3601") == 1, 30, proc)
        sleeps = {
            p: process_start(p) for p in descendants(proc.pid) if cmdline(p).startswith("sleep 360")
        }
        proc.kill()
        proc.wait(GONE_WITHIN_S)  # not communicate(): the fork holds the output pipes
        # The fork still lives, but closed its copy of the pipe: the guardian saw the
        # controller die and ended the sleeps all the same.
        deadline = time.monotonic() + GONE_WITHIN_S
        while any(alive(p, s) for p, s in sleeps.items()):
            assert time.monotonic() < deadline, "a live fork kept the controller's lifeline open"
            time.sleep(0.05)
        assert alive(forked, started)
    finally:
        os.kill(forked, signal.SIGKILL)


def test_on_death_refuses_code_outside_roboscale() -> None:
    with pytest.raises(ValueError, match="only roboscale functions"):
        lifeline.on_death("os:system")


@pytest.mark.parametrize("backend", ["native-proc", pytest.param("zenoh", marks=pytest.mark.zenoh)])
def test_bench_leaves_no_agent_behind(
    tmp_path: Path, backend: str, request: pytest.FixtureRequest
) -> None:
    if backend == "zenoh":
        request.getfixturevalue("zenoh")
    spec = tmp_path / "orphans.yaml"
    spec.write_text(BENCH.format(backend=backend, hosts=1, link="loopback"))
    proc = controller(["-c", CLI, "bench", str(spec), "--out", str(tmp_path / "out")], tmp_path)
    wait_for("the stream", lambda: streaming(proc.pid), CHILDREN_WITHIN_S, proc)
    assert count_matching(proc.pid, "roboscale.workloads.agent") >= 2
    kill_and_check(proc)


def test_launch_leaves_no_command_behind(tmp_path: Path) -> None:
    (tmp_path / "orphans.yaml").write_text(LAUNCH)
    proc = controller(["-c", CLI, "launch", "orphans.yaml"], tmp_path)
    wait_for("four sleeps", lambda: count_matching(proc.pid, "sleep 360") == 4, 60, proc)
    kill_and_check(proc)


# Process nodes forked from a zygote, restarted on a warm standby (the zygote keeps one
# per target), each starting a grandchild in a session of its own.
STANDBYS = """\
name: standbys
zygote: {preload: [lifeline_targets]}
children:
  - process: left
    target: lifeline_targets:node
    standby: true
  - process: right
    target: lifeline_targets:node
    standby: true
"""
TARGETS = """\
import subprocess, threading
def node(config, ready, prepared=None):
    subprocess.Popen(["sh", "-c", "setsid sleep 3600 & exec sleep 3601"], start_new_session=True)
    ready()
    threading.Event().wait()
node.prepare = lambda: "warm"
"""


def test_launch_leaves_no_zygote_standby_or_process_node_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL of `roboscale launch` mid-run: its zygote, both nodes, the warm standby
    and the nodes' grandchildren in sessions of their own all go."""
    (tmp_path / "lifeline_targets.py").write_text(TARGETS)
    (tmp_path / "standbys.yaml").write_text(STANDBYS)
    monkeypatch.setenv(
        "PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    )
    proc = controller(["-c", CLI, "launch", "standbys.yaml"], tmp_path)
    # the zygote, two nodes and the target's standby (one per target); two sleeps per node
    wait_for(
        "nodes, standby and sleeps",
        lambda: (
            count_matching(proc.pid, "roboscale.runtime.forkserver") >= 4
            and count_matching(proc.pid, "sleep 360") == 4
        ),
        CHILDREN_WITHIN_S,
        proc,
    )
    kill_and_check(proc)


def test_chaos_leaves_no_command_behind(tmp_path: Path) -> None:
    (tmp_path / "orphans.yaml").write_text(LAUNCH)
    argv = ["chaos", "orphans.yaml", "--method", "sigkill", "--target", "/drivers/*"]
    argv += ["--rate", "2", "--duration", "600", "--log", "kills.jsonl"]
    proc = controller(["-c", CLI, *argv], tmp_path)
    log = tmp_path / "kills.jsonl"
    # Kills have begun (the log has a kill) and the drivers are back: mid-run.
    wait_for(
        "a kill and four sleeps",
        lambda: (
            log.exists()
            and '"kill"' in log.read_text()
            and count_matching(proc.pid, "sleep 360") >= 4
        ),
        60,
        proc,
    )
    kill_and_check(proc)


@pytest.mark.netns
def test_bench_on_emulated_hosts_leaves_no_process_or_host(
    tmp_path: Path, root: None, zenoh: None
) -> None:
    spec = tmp_path / "orphans.yaml"
    spec.write_text(BENCH.format(backend="zenoh", hosts=2, link="ethernet"))
    proc = controller(["-c", CLI, "bench", str(spec), "--out", str(tmp_path / "out")], tmp_path)
    wait_for("the stream", lambda: streaming(proc.pid), CHILDREN_WITHIN_S, proc)
    assert count_matching(proc.pid, "roboscale.workloads.agent") >= 2
    markers = [json.loads(p.read_text()) for p in MARKER_DIR.glob("*.json")]
    (run_id,) = [m["netns"][0].split("-")[1] for m in markers if m.get("pid") == proc.pid]
    assert leftovers(run_id)
    kill_and_check(proc)
    deadline = time.monotonic() + GONE_WITHIN_S
    while leftovers(run_id):  # the guardian removes the hosts after the processes
        assert time.monotonic() < deadline, f"hosts left: {leftovers(run_id)}"
        time.sleep(0.05)
