"""The systems the runtime's restarts are compared with, measured for real on this machine.

0. For reference, the runtime's own process nodes (runtime/process.py) with a
   Zenoh session open: kill until the replacement is ready, forked from a zygote
   and, for contrast, started as a fresh interpreter.
1. Erlang/OTP: a one_for_one supervisor (intensity 1000 in 1 s) over 100
   permanent gen_server workers; a random worker gets exit(Pid, kill); the time
   until the replacement's init/1 runs (bench/baselines/otp_restart.erl).
2. ROS 1 roslaunch respawn="true" (respawn_delay 0), on a private roscore: a
   rospy node is SIGKILLed; the time until its replacement publishes on a latched
   topic (its own stamp) and until a subscriber receives that message.
3. ROS 1 message loss: a publisher at 1 kHz of sequenced messages and a
   respawning subscriber SIGKILLed K times; messages never delivered to any
   subscriber instance are lost, those delivered twice are duplicated.

Functions return raw samples (microseconds, counts); bench/restart.py calls them.

    .venv/bin/python bench/restart_baselines.py [--otp-kills 200] [--ros-kills 15]
                                 [--loss-kills 10] [--process-kills 50] [--json PATH]
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shutil
import signal
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import header, parser, stop_group, table, wait_for
from roboscale.backends.ros1 import SYSTEM_PYTHON
from roboscale.backends.roslaunch import Roslaunch, make_package
from roboscale.backends.roslaunch import node_xml as launch_node
from roboscale.errors import UserError

BASELINES = Path(__file__).resolve().parent / "baselines"
PACKAGE = "roboscale_bench"
RESPAWN_WAIT_S = 10.0  # one roslaunch respawn takes ~0.3 s; ten times that is a failure
STARTUP_WAIT_S = 30.0


# --------------------------------------------------------------------------- Erlang/OTP


def otp_restart_us(kills: int = 200, workers: int = 100) -> dict[str, Any]:
    """Kill-until-new-child-init of an OTP one_for_one supervisor, in microseconds."""
    erl, erlc = shutil.which("erl"), shutil.which("erlc")
    if erl is None or erlc is None:
        raise UserError("Erlang is not installed", hint="as root: apt-get install erlang-nox")
    with tempfile.TemporaryDirectory(prefix="roboscale-otp-") as tmp:
        subprocess.run(
            [erlc, "-o", tmp, str(BASELINES / "otp_restart.erl")],
            check=True,
            capture_output=True,
            timeout=120,
        )
        out = subprocess.run(
            [erl, "-noshell", "-pa", tmp, "-run", "otp_restart", "main", str(kills), str(workers)],
            capture_output=True,
            text=True,
            timeout=60 + kills * 0.1,
            cwd=tmp,  # a crash dump, if any, stays in the temp dir
            check=False,
        )
    if out.returncode != 0:
        raise UserError(f"otp_restart failed ({out.returncode}): {out.stderr.strip()[-300:]}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


# --------------------------------------------------------------------------- process nodes


def process_node_restart_us(
    kills: int = 50, zygote: bool = True, standby: bool = False, early: bool = False
) -> dict[str, Any]:
    """SIGKILL of a ProcessNode (Zenoh session open) until its replacement is ready.

    Restarted from inside on_exit, as a supervisor does; with `zygote=False` each
    restart is a fresh interpreter, the cost the zygote exists to avoid; with `standby`
    each restart is handed to the zygote's warm standby (forked, session already open);
    with `early` too, the node is restarted on its death notice (runtime/deathnotice.py),
    as a supervisor restarts a permanent child, rather than on the zygote's exit report.
    `stages`: each restart's steps in µs (RESTART_STAGES), from one host clock: the kill,
    the victim's pidfd readable (watched by this thread, otherwise idle until the
    restart), the stamps of the zygote and its client (`ForkedChild.stamps`), on_exit.
    """
    import select
    import threading

    from roboscale.runtime.child import ExitReason
    from roboscale.runtime.process import ProcessNode
    from roboscale.runtime.zygote import Zygote

    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(BASELINES), os.environ.get("PYTHONPATH")]))
    }
    samples: list[float] = []
    stages: list[dict[str, float]] = []
    on_standby = 0
    target = "process_target:zenoh_node"
    restarted = threading.Semaphore(0)
    t_kill = [0]
    t_on_exit = [0]
    with contextlib.ExitStack() as stack:
        preload = ["zenoh", "process_target"]  # the target module too: children skip its import
        z = stack.enter_context(Zygote(preload, env=env)) if zygote else None
        node = ProcessNode("bench", target, zygote=z, env=env, standby=standby, early_death=early)

        def on_exit(_name: str, _reason: ExitReason, _detail: str) -> None:
            nonlocal on_standby
            t_on_exit[0] = time.monotonic_ns()
            node.start(on_exit)
            samples.append((time.monotonic_ns() - t_kill[0]) / 1000)
            on_standby += node.started_via == "zygote standby"
            restarted.release()

        node.start(on_exit)
        stack.callback(node.stop, 2.0)
        for _ in range(kills):
            if standby and z is not None:
                # Killed again once its kind has a standby again (made in the background
                # after each hand-over): a restart measured in the steady state.
                wait_for(lambda r=node.pid: z.standbys.get(target) not in (None, r), RESPAWN_WAIT_S)
            pid, old = node.pid, node.process
            assert pid is not None and old is not None
            pidfd = os.pidfd_open(pid)
            t_kill[0] = time.monotonic_ns()
            os.kill(pid, signal.SIGKILL)
            select.select([pidfd], [], [], RESPAWN_WAIT_S)
            dead = time.monotonic_ns()
            os.close(pidfd)
            if not restarted.acquire(timeout=RESPAWN_WAIT_S):
                raise UserError(f"process node not restarted within {RESPAWN_WAIT_S:g} s")
            new = node.process
            assert new is not None
            marks = {"kill": t_kill[0], "dead": dead, **_prefixed(old.stamps, "exit", "notice")}
            marks |= {"on_exit": t_on_exit[0], **_prefixed(new.stamps, "ready", "handed")}
            stages.append(restart_stages(marks, samples[-1], early))
        via = node.started_via
    noticed = int(sum(s["via_notice"] for s in stages))  # restarted on the death notice
    result = {"kills": kills, "started_via": via, "on_standby": on_standby, "noticed": noticed}
    return {**result, "restart_us": samples, "stages": stages}


# A restart's steps, each timed from the one before it (µs); "ready" is start() returning.
# The supervisor's decision (on_exit) follows whichever came first: the death notice (a
# node restarted on it) or the zygote's exit report via the client's reader. The steps of
# the other way, when stamped by then, are shown for comparison.
RESTART_STAGES = [
    ("notice", "kill", "SIGKILL → the death notice (its waiter awake)"),
    ("dead", "kill", "SIGKILL → the victim is dead (its pidfd readable)"),
    ("exit_zygote", "dead", "dead → the zygote reaped it"),
    ("exit_seen", "exit_zygote", "→ the client's reader has the exit"),
    ("on_exit", "", "notice or exit at the reader → on_exit runs (the decision)"),
    ("handed_over", "on_exit", "→ the hand-over written to the standby"),
    ("ready_target", "handed_over", "→ the standby serving (its ready(), its own clock)"),
    ("ready_seen", "ready_target", "→ the client's reader has READY"),
    ("ready", "ready_seen", "→ start() returned"),
]


def _prefixed(stamps: dict[str, int], *prefixes: str) -> dict[str, int]:
    return {k: v for k, v in stamps.items() if k.startswith(prefixes)}


def restart_stages(marks: dict[str, int], total_us: float, early: bool) -> dict[str, float]:
    """Each stage of one restart in µs (those whose stamps exist), and the total. With
    `early`, on_exit followed the death notice unless the exit report came first."""
    marks = {**marks, "ready": marks["kill"] + int(total_us * 1000)}
    if "notice_seen" in marks:
        marks["notice"] = marks["notice_seen"]
    first = [k for k in ("notice", "exit_seen") if k in marks]
    trigger = min(first, key=lambda k: marks[k]) if early and first else "exit_seen"
    out = {
        name: (marks[name] - marks[since or trigger]) / 1000
        for name, since, _ in RESTART_STAGES
        if name in marks and (since or trigger) in marks
    }
    return {**out, "total": total_us, "via_notice": float(trigger == "notice")}


def stage_rows(stages: list[dict[str, float]]) -> list[dict[str, Any]]:
    """Per stage: n, p10, p50, p90 (µs) over the restarts that have it."""
    rows = []
    for name, _, text in [*RESTART_STAGES, ("total", "", "kill → start() returned (total)")]:
        got = sorted(s[name] for s in stages if name in s)
        if len(got) >= 2:
            dec = statistics.quantiles(got, n=10)
            med = statistics.median(got)
            rows.append({"stage": text, "n": len(got), "p10_us": round(dec[0], 1),
                         "p50_us": round(med, 1), "p90_us": round(dec[-1], 1)})  # fmt: skip
    return rows


# --------------------------------------------------------------------------- ROS 1


def node_xml(name: str, args: str, respawn: bool) -> str:
    return launch_node(name, PACKAGE, "ros_nodes.py", args, respawn)


@contextlib.contextmanager
def ros_launch(workdir: Path, nodes: str) -> Iterator[dict[str, str]]:
    """A private roscore and a roslaunch of `nodes`; both are stopped whatever happens."""
    script = (BASELINES / "ros_nodes.py").read_text()
    launch = Roslaunch(workdir, make_package(workdir, PACKAGE, {"ros_nodes.py": script}))
    try:
        launch.start(nodes, workdir / "roslaunch.log")
        yield launch.env
    finally:
        launch.stop()


class LineReader:
    """Lines of a child's stdout, each waited for with a deadline."""

    def __init__(self, proc: subprocess.Popen[bytes], name: str = "the ROS observer") -> None:
        assert proc.stdout is not None
        self.fd = proc.stdout.fileno()
        self.name = name
        self.buffer = b""

    def next(self, timeout_s: float) -> str:
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as sel:
            sel.register(self.fd, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise UserError(f"no answer from {self.name} within {timeout_s:g} s")
                chunk = os.read(self.fd, 65536)
                if not chunk:
                    raise UserError(f"{self.name} exited")
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode().strip()


def ros_respawn_us(kills: int = 15) -> dict[str, Any]:
    """SIGKILL of a roslaunch respawn="true" node until its replacement publishes."""
    publish_us: list[float] = []
    received_us: list[float] = []
    with (
        tempfile.TemporaryDirectory(prefix="roboscale-ros-") as tmp,
        ros_launch(Path(tmp), node_xml("worker", "worker", respawn=True)) as env,
    ):
        for t_pub, t_recv in kill_until_published(env, kills):
            publish_us.append(t_pub)
            received_us.append(t_recv)
    return {"kills": kills, "publish_us": publish_us, "received_us": received_us}


def kill_until_published(env: dict[str, str], kills: int) -> list[tuple[float, float]]:
    """SIGKILL the respawning worker `kills` times under the ROS observer; per kill, the µs
    until its replacement published and until the observer received that message."""
    observer = subprocess.Popen(
        [SYSTEM_PYTHON, str(BASELINES / "ros_nodes.py"), "observer"],
        env=env,
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    samples: list[tuple[float, float]] = []
    try:
        lines = LineReader(observer)
        if lines.next(STARTUP_WAIT_S) != "OBSERVING":
            raise UserError("the ROS observer did not start")
        pid = int(lines.next(STARTUP_WAIT_S).split()[0])
        for _ in range(kills):
            t_kill = time.monotonic_ns()
            os.kill(pid, signal.SIGKILL)
            pid, t_pub, t_recv = _next_instance(lines, pid)
            samples.append(((t_pub - t_kill) / 1000, (t_recv - t_kill) / 1000))
    finally:
        stop_group(observer)
    return samples


def _next_instance(lines: LineReader, old_pid: int) -> tuple[int, int, int]:
    deadline = time.monotonic() + RESPAWN_WAIT_S
    while True:
        pid, t_pub, t_recv = (int(x) for x in lines.next(deadline - time.monotonic()).split())
        if pid != old_pid:
            return pid, t_pub, t_recv


def ros_loss(kills: int = 10, settle_s: float = 0.3) -> dict[str, Any]:
    """Messages lost and duplicated at 1 kHz while a respawning subscriber is SIGKILLed."""
    with tempfile.TemporaryDirectory(prefix="roboscale-ros-") as tmp:
        work = Path(tmp)
        pub_log, sub_log, stop = work / "pub.log", work / "sub.log", work / "stop"
        max_s = 60 + kills * RESPAWN_WAIT_S
        nodes = node_xml("seq_pub", f"pub {pub_log} {stop} {max_s:g}", respawn=False)
        nodes += node_xml("seq_sub", f"sub {sub_log}", respawn=True)
        with ros_launch(work, nodes):
            killed: set[int] = set()
            pid = _wait_receiving(sub_log, killed, STARTUP_WAIT_S)
            for _ in range(kills):
                time.sleep(settle_s)  # the subscriber is in steady state when it is killed
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
                pid = _wait_receiving(sub_log, killed, RESPAWN_WAIT_S)
            time.sleep(settle_s)
            stop.touch()
            wait_for(lambda: pub_log.read_bytes().endswith(b"END\n"), 5.0)
            time.sleep(settle_s)  # the last messages reach the subscriber
        return count_loss(pub_log.read_text(), sub_log.read_text(), kills)


def _received(sub_log: Path) -> list[tuple[int, str]]:
    rows = []
    for line in sub_log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2:
            rows.append((int(parts[0]), parts[1]))
    return rows


def _wait_receiving(sub_log: Path, killed: set[int], timeout_s: float) -> int:
    """The pid of a subscriber instance, not one we killed, that received a message."""
    found: list[int] = []

    def receiving() -> bool:
        if not sub_log.exists():
            return False
        found[:] = [p for p, what in _received(sub_log) if what != "START" and p not in killed]
        return bool(found)

    if not wait_for(receiving, timeout_s):
        raise UserError(f"no respawned ROS subscriber received within {timeout_s:g} s")
    return found[-1]


def count_loss(pub_text: str, sub_text: str, kills: int) -> dict[str, Any]:
    """Loss counted from the first message any subscriber received to the last published."""
    published = [int(x) for x in pub_text.split() if x != "END"]
    got = Counter(int(s) for _, s in (ln.split() for ln in sub_text.splitlines()) if s != "START")
    instances = len({ln.split()[0] for ln in sub_text.splitlines() if ln.endswith("START")})
    first = min(got) if got else 0
    window = [s for s in published if s >= first]
    lost = sum(1 for s in window if s not in got)
    return {
        "kills": kills,
        "subscriber_instances": instances,
        "published": len(window),
        "received": sum(got.values()),
        "lost": lost,
        "duplicated": sum(n - 1 for n in got.values() if n > 1),
        "lost_per_kill": lost / kills if kills else 0.0,
    }


# --------------------------------------------------------------------------- report


def percentiles(name: str, samples: list[float]) -> dict[str, Any]:
    s = sorted(samples)
    return {
        "system": name,
        "n": len(s),
        "p50_us": statistics.median(s),
        "p99_us": s[int(0.99 * (len(s) - 1))],
        "max_us": s[-1],
        "mean_us": statistics.fmean(s),
    }


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument(
        "--otp-kills", type=int, default=200, help="Erlang/OTP worker kills (default 200)"
    )
    p.add_argument("--ros-kills", type=int, default=15, help="roslaunch respawns (default 15)")
    p.add_argument("--loss-kills", type=int, default=10, help="ROS 1 subscriber kills (default 10)")
    p.add_argument("--process-kills", type=int, default=50, help="process node kills (default 50)")
    args = p.parse_args()
    report = header()
    forked = process_node_restart_us(args.process_kills, zygote=True)
    fresh = process_node_restart_us(max(5, args.process_kills // 5), zygote=False)
    otp = otp_restart_us(args.otp_kills)
    respawn = ros_respawn_us(args.ros_kills)
    loss = ros_loss(args.loss_kills)
    rows = [
        percentiles("process node, zygote fork", forked["restart_us"]),
        percentiles("process node, fresh python", fresh["restart_us"]),
        percentiles(f"Erlang/OTP {otp['otp_release']} one_for_one", otp["restart_us"]),
        percentiles("roslaunch respawn: kill→publish", respawn["publish_us"]),
        percentiles("roslaunch respawn: kill→received", respawn["received_us"]),
    ]
    print("\nrestart time, kill until the new instance is ready:")
    table(rows, ["system", "n", "p50_us", "p99_us", "max_us", "mean_us"])
    print(f"\nROS 1 loss at 1 kHz, subscriber SIGKILLed {loss['kills']} times:")
    table([loss], ["kills", "published", "received", "lost", "duplicated", "lost_per_kill"])
    report["raw"] = {
        "process_zygote": forked,
        "process_fresh": fresh,
        "otp": otp,
        "ros_respawn": respawn,
        "ros_loss": loss,
    }
    report["results"] = rows
    # Baselines have no goals of their own (bench/restart.py compares against them),
    # so common.finish, which prints a goals table, is not used.
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2) + "\n")
        print(f"\njson: {args.json}")


if __name__ == "__main__":
    main()
