"""Warm standbys and their death notices with real processes: a node restarted on its
notice (the zygote stopped, so nothing else can report the death), the exit report
that follows recognised and not reported twice, the fallback when no notice can be
made, and kill storms of `roboscale chaos` that never leave two live instances."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import threading
from argparse import Namespace
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console
from tests.conftest import EVENT_TIMEOUT_S
from tests.runtime.test_zygote import wait_until, write_targets

from roboscale.runtime import standby
from roboscale.runtime.chaos import ChaosMonkey, ChaosSpec, Method
from roboscale.runtime.child import ExitReason
from roboscale.runtime.cli import cmd_chaos
from roboscale.runtime.deathnotice import DeathNoticeError
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.process import NOTICED, ProcessNode
from roboscale.runtime.procservice import notifier
from roboscale.runtime.supervisor import ChildSpec, Recipe, Supervisor
from roboscale.runtime.zygote import Zygote

TARGET = "zyg_targets:ticking"
# Each instance writes "PID start" once handed over, then "PID tick N" every 2 ms from
# the thread that called ready() (the one holding its death notice), until it dies.
TICKING = """
import os, time
def ticking(config, ready, prepared=None):
    log = os.open(config["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    me = os.getpid()
    os.write(log, f"{me} start\\n".encode())
    ready()
    for n in range(100_000):
        os.write(log, f"{me} tick {n}\\n".encode())
        time.sleep(0.002)
ticking.prepare = lambda: "warm"

def early_ready(config, ready, prepared=None):
    import threading
    log = os.open(config["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.write(log, f"{os.getpid()} start\\n".encode())
    holder = threading.Thread(target=ready)  # its death notice's holder: ends at once
    holder.start()
    holder.join()
    for n in range(100_000):
        os.write(log, f"{os.getpid()} tick {n}\\n".encode())
        time.sleep(0.002)
early_ready.prepare = lambda: "warm"
"""


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[tuple[Zygote, list[SupervisionEvent]]]:
    events: list[SupervisionEvent] = []
    z = Zygote(["zyg_targets"], env=write_targets(tmp_path, TICKING), on_event=events.append)
    z.start()
    try:
        yield z, events
    finally:
        z.close()


def instances(log: Path) -> tuple[list[int], int]:
    """The instances in the order they started, and the lines an instance wrote after
    a later one had started (two live instances at once: must be 0)."""
    order: list[int] = []
    overlaps = 0
    for line in log.read_text().splitlines():
        pid = int(line.split()[0])
        if line.endswith(" start"):
            order.append(pid)
        elif order and pid != order[-1]:
            overlaps += 1
    return order, overlaps


def flushed() -> None:
    """Every on_exit posted so far has run (the notifier delivers in order)."""
    done = threading.Event()
    notifier().post(done.set)
    assert done.wait(EVENT_TIMEOUT_S)


def restarting(node: ProcessNode, details: list[str]) -> threading.Event:
    """Start `node` on a warm standby, restarting it from its on_exit."""
    z = node.zygote
    assert z is not None
    z.keep_standby(TARGET)
    assert wait_until(lambda: z.standbys.get(TARGET))
    restarted = threading.Event()

    def on_exit(_name: str, _reason: ExitReason, detail: str) -> None:
        details.append(detail)
        node.start(on_exit)  # as a supervisor does, from the exit callback
        restarted.set()

    node.start(on_exit)
    return restarted


def test_a_node_restarts_on_its_death_notice_while_the_zygote_cannot_report(
    zygote: tuple[Zygote, list[SupervisionEvent]], tmp_path: Path
) -> None:
    z, events = zygote
    log = tmp_path / "n.log"
    node = ProcessNode("n", TARGET, {"log": str(log)}, zygote=z, standby=True, early_death=True)
    details: list[str] = []
    restarted = restarting(node, details)
    old = node.process
    assert old is not None and node.started_via == "zygote standby"
    assert wait_until(lambda: z.standbys.get(TARGET) not in (None, old.pid))
    os.kill(z.pid, signal.SIGSTOP)  # it can neither reap nor report: only the notice can
    try:
        os.kill(old.pid, signal.SIGKILL)
        assert restarted.wait(EVENT_TIMEOUT_S)
        assert old.dead.is_set() and not old.exited.is_set()
        assert node.process is not old and node.alive() and node.started_via == "zygote standby"
    finally:
        os.kill(z.pid, signal.SIGCONT)
    assert old.exited.wait(EVENT_TIMEOUT_S)  # its exit report, recognised by its pid
    node.stop(5.0)
    z.close()  # the reader is joined: every exit report was handled
    flushed()
    assert details == [NOTICED]  # reported once, on the notice
    assert instances(log)[1] == 0 and events == []


def test_without_a_notice_the_exit_report_restarts_it_and_an_event_says_why(
    zygote: tuple[Zygote, list[SupervisionEvent]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As on a kernel without memfd: the notice cannot be made."""

    def no_memfd() -> None:
        raise DeathNoticeError("no memfd: not on this kernel")

    monkeypatch.setattr(standby, "NoticeMutex", no_memfd)
    z, events = zygote
    node = ProcessNode(
        "n", TARGET, {"log": str(tmp_path / "n.log")}, zygote=z, standby=True, early_death=True
    )
    details: list[str] = []
    restarted = restarting(node, details)
    old = node.process
    assert old is not None
    assert wait_until(lambda: z.standbys.get(TARGET) not in (None, old.pid))
    os.kill(old.pid, signal.SIGKILL)
    assert restarted.wait(EVENT_TIMEOUT_S)
    node.stop(5.0)
    flushed()
    assert details == ["killed by SIGKILL"] and not old.dead.is_set()
    assert events and {e.kind for e in events} == {"death_notice"}
    assert "no memfd" in events[0].detail


def test_kill_storms_never_leave_two_live_instances_of_a_node(
    zygote: tuple[Zygote, list[SupervisionEvent]], rt: Runtime, tmp_path: Path
) -> None:
    """`roboscale chaos` SIGKILLs permanent process nodes on their warm standbys; each is
    restarted on its death notice (the supervisor allows it for permanent children).
    No instance writes after a later instance of its node started."""
    z, events = zygote
    names = ["a", "b"]
    recipes = [
        Recipe(n, ProcessNode, (n, TARGET, {"log": str(tmp_path / f"{n}.log")}),
               {"zygote": z, "standby": True})
        for n in names
    ]  # fmt: skip
    specs = [ChildSpec(r, shutdown_s=2) for r in recipes]
    root = Supervisor(rt, "top", specs, intensity=Intensity(10_000, 1))
    z.keep_standby(TARGET)
    assert wait_until(lambda: z.standbys.get(TARGET))
    rt.wait(root.start_async(), timeout_s=EVENT_TIMEOUT_S)
    kills = tmp_path / "kills.jsonl"
    methods = ((Method.SIGKILL, 1.0),)
    chaos = ChaosSpec(rate=20, duration=2, methods=methods, seed=7, settle=30, log=kills)
    try:
        report = rt.wait(ChaosMonkey(rt, root, chaos).run(), timeout_s=120)
    finally:
        rt.wait(root.stop_async(), timeout_s=EVENT_TIMEOUT_S)
    assert report.ok and report.kills > 0 and report.restarts == report.kills
    started = 0
    for name in names:
        order, overlaps = instances(tmp_path / f"{name}.log")
        assert overlaps == 0 and len(order) > 1, name
        started += len(order)
    assert started == report.kills + len(names)  # one instance per start, none lost
    assert events == []  # every instance held its notice
    # Decided on the notice ("crash": its status unknown yet) rather than on the exit
    # report ("killed"), save perhaps where the report came first.
    exits = [json.loads(line) for line in kills.read_text().splitlines()]
    reasons = [e["reason"] for e in exits if e["event"] == "exit"]
    assert len(reasons) == report.kills and "crash" in reasons, reasons


def test_roboscale_chaos_on_a_launch_file_of_standby_nodes_keeps_one_instance_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same through `roboscale chaos`: process children with `standby: true`."""
    monkeypatch.setenv("PYTHONPATH", write_targets(tmp_path, TICKING)["PYTHONPATH"])
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "xdg"))  # its status file
    names = ["a", "b"]
    children = "".join(
        f"  - process: {n}\n    target: {TARGET}\n    standby: true\n"
        f"    config: {{log: {tmp_path / f'{n}.log'}}}\n"
        for n in names
    )
    launch = tmp_path / "standby.yaml"
    launch.write_text(
        "name: robot\nintensity: 10000\nperiod_s: 1\nzygote: {preload: [zyg_targets]}\n"
        f"children:\n{children}"
    )
    given = dict.fromkeys(("target", "seed", "settle", "events"))
    args = Namespace(**given, file=launch, log=tmp_path / "kills.jsonl")
    args.rate, args.duration, args.method = "20", "2", "sigkill"
    out = io.StringIO()
    code = cmd_chaos(args, Console(file=out, width=120))
    assert code == 0, out.getvalue()
    assert "alive, every child running" in out.getvalue()
    records = [json.loads(line) for line in (tmp_path / "kills.jsonl").read_text().splitlines()]
    kills = [r for r in records if r["event"] == "kill"]
    assert kills and len([r for r in records if r["event"] == "restart"]) == len(kills)
    for name in names:
        order, overlaps = instances(tmp_path / f"{name}.log")
        assert overlaps == 0 and len(order) > 1, name


def test_a_notice_from_a_thread_that_ended_kills_the_instance_it_came_from(
    zygote: tuple[Zygote, list[SupervisionEvent]], tmp_path: Path
) -> None:
    """The notice follows the thread that called ready(): here one that ends while its
    process goes on. Reported as the instance's death, so that instance must not live on
    beside the next one: it is killed."""
    z, _ = zygote
    target = "zyg_targets:early_ready"
    z.keep_standby(target)
    assert wait_until(lambda: z.standbys.get(target))
    node = ProcessNode(
        "n", target, {"log": str(tmp_path / "n.log")}, zygote=z, standby=True, early_death=True
    )
    noticed = threading.Event()
    details: list[str] = []

    def on_exit(_name: str, _reason: ExitReason, detail: str) -> None:
        details.append(detail)
        noticed.set()

    node.start(on_exit)
    old = node.process
    assert old is not None and noticed.wait(EVENT_TIMEOUT_S)
    assert old.exited.wait(EVENT_TIMEOUT_S)  # without the kill it would tick on for minutes
    assert old.status is not None and old.status.signal == signal.SIGKILL
    flushed()
    assert details == [NOTICED]


def test_a_standbys_pidfd_is_kept_only_while_it_is_there_so_a_reused_pid_is_never_killed() -> None:
    """The notice kills the old instance through the pidfd opened when its standby
    announced itself. A standby already gone (its socket at EOF) whose pid a stranger
    took meanwhile gets no pidfd: the stranger lives, and the kill falls back to the
    zygote (which signals only pids it has not reaped)."""
    stranger = subprocess.Popen(["sleep", "30"])
    try:
        mine, theirs = socket.socketpair()
        theirs.close()  # the standby died: EOF
        gone = standby.Standby("t", stranger.pid, mine)
        gone.open_pidfd()
        assert gone.pidfd == -1 and not gone.kill()
        gone.close()
        assert stranger.poll() is None
        mine, theirs = socket.socketpair()  # a standby still there: its pidfd is kept
        there = standby.Standby("t", stranger.pid, mine)
        there.open_pidfd()
        assert there.kill()
        assert stranger.wait(EVENT_TIMEOUT_S) == -signal.SIGKILL
        there.close()
        theirs.close()
        assert there.pidfd == -1
    finally:
        stranger.kill()
        stranger.wait()
