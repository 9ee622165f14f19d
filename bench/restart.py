"""Restarts and durable delivery of the runtime against Erlang/OTP and ROS 1, in one run.

1. Restart time, kill until the new instance is ready:
   - in-process nodes: a one_for_one supervisor over 100 permanent nodes; a random
     node's callback raises; until the new instance's on_start (runtime/measure.py);
   - process nodes: SIGKILL until the replacement, forked from the zygote with a
     Zenoh session open, reports ready (restart_baselines.process_node_restart_us);
     and the same handed to the zygote's warm standby (forked, target imported, session
     opened before the kill; each kill once the next standby is waiting), restarted on
     the victim's early death notice (runtime/deathnotice.py: a robust mutex its
     callback thread held, released as that thread begins to die), and, for the A/B in
     the same run, on the zygote's exit report as before the notice;
   - Erlang/OTP one_for_one, 100 workers, exit(Pid, kill) until the new init/1;
   - ROS 1 roslaunch respawn="true": SIGKILL until the new node publishes.
2. Messages lost and duplicated on a durable topic published at 1 kHz while its
   subscriber is killed, counted by sequence number:
   - in-process (--kills, default 1000): the subscriber node is killed at random
     moments (0-2 ms after it is ready); its on_start waits 0-2 ms before it
     subscribes, so messages really arrive while it is down and must be buffered;
   - across processes (--bridge-kills, default 200, each restart is milliseconds):
     publisher and subscriber in two processes joined by the Zenoh bridge; the
     subscriber is a zygote-forked process node, SIGKILLed at random moments;
   - ROS 1 under the same treatment (--ros-loss-kills, default 20: each respawn
     takes ~0.3 s); compare the loss per kill.
3. One roslaunch file run by roslaunch and by `roboscale launch` (bench/restart_launch.py):
   a rospy node's restart, kill until it publishes again, as a p50 ratio, and the
   messages a respawning rospy subscriber misses under each.

With `--rounds N` only the close goals run (in-process against OTP, the warm standby
against 1 ms and roslaunch, with its exit-report A/B): the systems interleaved N times,
every goal judged by its interval over rounds, with the range of the per-round figures
(bench/restart_rounds.py). Every goal line gives its figure's 95 % interval and sample,
and says "not judged" when the interval straddles the target or the sample is too short
(bench/goals.py).

    .venv/bin/python bench/restart.py [--quick] [--json bench/out/restart.json] [--check]
        [--rounds 5]
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import goals as judge
from common import attempt, counted_args, finish, header, stop_group, table, wait_for
from restart_baselines import (
    BASELINES,
    LineReader,
    otp_restart_us,
    percentiles,
    process_node_restart_us,
    ros_loss,
    ros_respawn_us,
    stage_rows,
)
from restart_launch import compare as same_launch_file
from restart_rounds import PROCESS_TARGET, STANDBY_GOAL
from roboscale.backends.base import free_port
from roboscale.errors import UserError
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.measure import inprocess_restart_samples
from roboscale.runtime.node import Node, NodeHandle, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor

NEVER_GIVE_UP = Intensity(max_restarts=10**9, period_s=1.0)
MAX_DOWN_S = 0.002  # the in-process subscriber's on_start waits up to this long
MAX_ALIVE_S = 0.002  # a subscriber instance is killed up to this long after it is ready
DRAIN_WAIT_S = 10.0
BRIDGE_MAX_ALIVE_S = 0.05

# A goal from one run needs 100 samples a side (bench/goals.py): roslaunch is killed 100
# times (about a minute) and the same launch file 50 times a round, in 2 rounds.
FULL = {"restarts": 10_000, "process_kills": 200, "otp_kills": 1000, "ros_kills": 100}
FULL |= {"kills": 1000, "bridge_kills": 200, "ros_loss_kills": 20}
QUICK = {"restarts": 1000, "process_kills": 30, "otp_kills": 200, "ros_kills": 5}
QUICK |= {"kills": 1000, "bridge_kills": 10, "ros_loss_kills": 3}
FULL |= {"launch_kills": 50, "launch_loss_kills": 5}
QUICK |= {"launch_kills": 3, "launch_loss_kills": 2}


# --------------------------------------------------------------------------- in-process durable


class _Log:
    """Shared by the measured nodes: what was published and received, and who is ready."""

    def __init__(self) -> None:
        self.published = 0
        self.stop = False
        self.received: list[int] = []
        self.ready: Node | None = None
        self.instances = 0
        self.pick = random.Random(3)


class _Source(Node):
    def on_start(self) -> None:
        self.log: _Log = self.get_param("log")
        self.pub = self.publisher("/data")
        self.timer(0.001, self.tick)

    def tick(self) -> None:
        log = self.log
        if not log.stop:
            log.published += 1
            self.pub.publish(log.published)


class _Sink(Node):
    async def on_start(self) -> None:
        log: _Log = self.get_param("log")
        await asyncio.sleep(log.pick.uniform(0.0, MAX_DOWN_S))  # down: the inbox buffers
        self.subscribe("/data", log.received.append, durable=True, queue_size=1_000_000)
        log.ready = self
        log.instances += 1


def inprocess_durable_loss(kills: int) -> dict[str, Any]:
    """Kill the subscriber of a durable 1 kHz topic `kills` times; count by sequence number."""
    runtime = Runtime()
    try:
        return runtime.run(_durable_run(runtime, kills))
    finally:
        runtime.close()


async def _durable_run(runtime: Runtime, kills: int) -> dict[str, Any]:
    log = _Log()
    sink = NodeRecipe("sink", _Sink, {"log": log})
    source = NodeRecipe("source", _Source, {"log": log})
    # The sink starts first: it is subscribed before the first message is published.
    children = [ChildSpec(sink), ChildSpec(source)]
    sup = Supervisor(runtime, "durable", children, intensity=NEVER_GIVE_UP)
    await sup.start_async()
    t0 = time.monotonic()
    deadline = t0 + 60.0 + kills * 0.05
    done = 0
    try:
        while done < kills:
            await asyncio.sleep(log.pick.uniform(0.0, MAX_ALIVE_S))
            if time.monotonic() > deadline:
                raise UserError(f"durable benchmark: only {done} of {kills} kills in time")
            running: NodeHandle = sup.child("sink")  # a new instance at each restart
            node = running.node
            if node is not None and node is log.ready and node.alive:
                running.kill()
                done += 1
        log.stop = True
        elapsed = time.monotonic() - t0
        wait_until = time.monotonic() + DRAIN_WAIT_S
        # Until everything arrived and the last instance is up (not stopped mid-start).
        while time.monotonic() < wait_until and (
            len(set(log.received)) < log.published or sup.child("sink").node is not log.ready
        ):
            await asyncio.sleep(0.01)
        inbox = sup.child("sink").durables["/data"]
        overflow = inbox.dropped
    finally:
        await sup.stop_async()
    return {
        **count_seqs(list(range(1, log.published + 1)), log.received, kills),
        "seconds": elapsed,
        "instances": log.instances,
        "inbox_dropped": overflow,
    }


def count_seqs(published: list[int], received: list[int], kills: int) -> dict[str, Any]:
    """Lost, duplicated and out-of-order messages, by sequence number."""
    seen: set[int] = set()
    duplicated = out_of_order = last = 0
    for seq in received:
        if seq in seen:
            duplicated += 1
            continue
        seen.add(seq)
        out_of_order += seq < last
        last = max(last, seq)
    missing = [s for s in published if s not in seen]
    return {
        "kills": kills,
        "published": len(published),
        "received": len(received),
        "lost": len(missing),
        "duplicated": duplicated,
        "out_of_order": out_of_order,
        "lost_per_kill": len(missing) / kills if kills else 0.0,
        "first_lost": missing[:20],  # where to look when a goal is missed
    }


# --------------------------------------------------------------------------- cross-process


def bridge_durable_loss(kills: int, standby: bool = False) -> dict[str, Any]:
    """The same across processes: runtime + Zenoh bridge, zygote-forked subscriber SIGKILLed
    (with `standby`: each restart handed to the zygote's warm standby, on the victim's
    death notice). `overlaps` counts
    the lines of an instance written after a later instance had written: two live
    instances at once (must be 0)."""
    from roboscale.runtime.process import NOTICED, ProcessNode
    from roboscale.runtime.zygote import Zygote

    env = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(BASELINES), os.environ.get("PYTHONPATH")]))
    }
    pick = random.Random(5)
    with (
        tempfile.TemporaryDirectory(prefix="roboscale-durable-") as tmp,
        contextlib.ExitStack() as st,
    ):
        work = Path(tmp)
        stop, count, log = work / "stop", work / "count", work / "sub.log"
        listen = f"tcp/127.0.0.1:{free_port()}"
        publisher = _start_publisher(listen, stop, count)
        st.callback(stop_group, publisher)
        z = st.enter_context(Zygote(["zenoh", "runtime_durable"], env=env))
        config = {"connect": listen, "cursor": str(work / "cursor"), "log": str(log)}
        node = ProcessNode(
            "sink", "runtime_durable:sink", config, zygote=z, env=env, standby=standby,
            early_death=standby,  # on a standby: restarted on its death notice
        )  # fmt: skip
        restarted = threading.Semaphore(0)

        on_notice = [0]  # restarts decided on the death notice (not the exit report)

        def on_exit(_name: str, _reason: object, detail: str) -> None:
            on_notice[0] += detail == NOTICED
            node.start(on_exit)  # as a supervisor does, from the exit callback
            restarted.release()

        node.start(on_exit)
        st.callback(node.stop, 2.0)
        _wait_for(lambda: log.exists() and log.stat().st_size > 0, 30.0, "first message")
        for _ in range(kills):
            time.sleep(pick.uniform(0.0, BRIDGE_MAX_ALIVE_S))
            pid = node.pid
            if pid is None:
                raise UserError("durable subscriber process is not running")
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            if not restarted.acquire(timeout=10.0):
                raise UserError("durable subscriber not restarted within 10 s")
        stop.touch()
        _wait_for(count.exists, 10.0, "publisher's count")
        published = int(count.read_text())
        # Lost messages are counted, not waited for: the last one may be among them.
        wait_for(lambda: _max_seq(log) >= published, DRAIN_WAIT_S)
        taken = [tuple(map(int, line.split())) for line in log.read_text().splitlines()]
        via = node.started_via
    received = [seq for _, seq in taken]
    counts = count_seqs(list(range(1, published + 1)), received, kills)
    never = set(range(1, published + 1)) - set(received)
    # The message after each killed instance's last one was handed over as it died.
    last = {pid: seq for pid, seq in taken}
    in_flight = {seq + 1 for pid, seq in last.items() if pid != taken[-1][0]}
    counts["lost_in_flight"] = len(never & in_flight)
    order = list(dict.fromkeys(pid for pid, _ in taken))  # instances by their first line
    rank = {pid: i for i, pid in enumerate(order)}
    latest = overlaps = 0
    for pid, _ in taken:
        overlaps += rank[pid] < latest
        latest = max(latest, rank[pid])
    return {**counts, "started_via": via, "overlaps": overlaps, "on_notice": on_notice[0]}


def _start_publisher(listen: str, stop: Path, count: Path) -> subprocess.Popen[bytes]:
    argv = [sys.executable, str(BASELINES / "runtime_durable.py"), "pub", listen]
    proc = subprocess.Popen(
        [*argv, str(stop), str(count)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        if LineReader(proc, "the durable publisher").next(30.0) != "ready":
            raise UserError("the durable publisher did not start")
    except BaseException:
        stop_group(proc)
        raise
    return proc


def _max_seq(log: Path) -> int:
    lines = log.read_text().splitlines()
    return max((int(ln.split()[1]) for ln in lines if len(ln.split()) == 2), default=0)


def _wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    if not wait_for(condition, timeout_s):
        raise UserError(f"durable benchmark: no {what} within {timeout_s:g} s")


# --------------------------------------------------------------------------- the run


def main() -> None:
    def rounds_option(p: Any) -> None:
        p.add_argument(
            "--rounds",
            type=int,
            help="only the close goals (in-process/OTP, the warm standby's 1 ms), N "
            "interleaved rounds of each system with the counts given per round",
        )

    args, n = counted_args(__doc__ or "", FULL, QUICK, rounds_option)
    report = header()
    report["counts"] = n
    if args.rounds:
        import restart_rounds

        report["rounds"] = args.rounds
        finish(report, restart_rounds.run(args.rounds, n, report), args, ["by_round"])
        return
    missing: dict[str, str] = {}
    inproc = inprocess_restart_samples(n["restarts"], workers=100, kill="exception")
    zyg = attempt("process nodes", lambda: process_node_restart_us(n["process_kills"]), missing)
    warm = attempt(
        "process nodes, warm standby",
        lambda: process_node_restart_us(n["process_kills"], standby=True, early=True),
        missing,
    )
    warm_exit = attempt(
        "process nodes, warm standby on the exit report",
        lambda: process_node_restart_us(n["process_kills"], standby=True),
        missing,
    )
    otp = attempt("Erlang/OTP", lambda: otp_restart_us(n["otp_kills"]), missing)
    ros = attempt("roslaunch respawn", lambda: ros_respawn_us(n["ros_kills"]), missing)
    loss = [
        {"system": "runtime in-process", **inprocess_durable_loss(n["kills"])},
        {"system": "runtime + Zenoh bridge"},
        {"system": "ROS 1 (no durability)"},
    ]
    bridged = attempt("bridge durable", lambda: bridge_durable_loss(n["bridge_kills"]), missing)
    loss[1].update(bridged or {"kills": "not available"})
    # The same on the warm standby, each restart decided on the death notice: a row of
    # the table (never two live instances: "overlaps"), not a goal of its own.
    warm_loss = attempt(
        "bridge durable, warm standby",
        lambda: bridge_durable_loss(n["bridge_kills"], standby=True),
        missing,
    )
    loss.insert(2, {"system": "runtime + Zenoh bridge, warm standby (death notice)"})
    loss[2].update(warm_loss or {"kills": "not available"})
    ros_l = attempt("ROS 1 loss", lambda: ros_loss(n["ros_loss_kills"]), missing)
    loss[3].update(ros_l or {"kills": "not available"})
    rows = [percentiles("runtime in-process node", inproc)]
    samples: dict[str, list[float]] = {"inproc": inproc}
    for key, result, name, field in (
        ("process", zyg, "runtime process node (zygote)", "restart_us"),
        ("standby", warm, "runtime process node (warm standby, death notice)", "restart_us"),
        ("standby_exit", warm_exit, "same, on the exit report (A/B)", "restart_us"),
        ("otp", otp, f"Erlang/OTP {(otp or {}).get('otp_release')} one_for_one", "restart_us"),
        ("ros", ros, "roslaunch respawn (kill→publish)", "publish_us"),
    ):
        if result:
            rows.append(percentiles(name, result[field]))
            samples[key] = result[field]
    print("\nrestart time, kill until the new instance is ready (µs):")
    table(rows, ["system", "n", "p50_us", "p99_us", "max_us", "mean_us"])
    for result, how in ((warm, "on the death notice"), (warm_exit, "on the exit report")):
        if result:
            print(f"\nwarm standby restarted {how}, stage by stage (µs, each from the step")
            print(f"before; {result['noticed']} of {result['kills']} decided on the notice):")
            table(stage_rows(result["stages"]), ["stage", "n", "p10_us", "p50_us", "p90_us"])
    print("\ndurable topic at 1 kHz, subscriber killed (counted by sequence number):")
    cols = ["system", "kills", "published", "received", "lost", "duplicated", "out_of_order"]
    table(loss, [*cols, "lost_per_kill", "overlaps", "on_notice"])
    if loss[1].get("lost"):
        print(
            f"bridge: {loss[1]['lost_in_flight']} of {loss[1]['lost']} lost messages were each "
            "the one in flight at a SIGKILL (handed over, the process killed before its "
            "callback acted: at-most-once for that message)"
        )
    for what, why in missing.items():
        print(f"not available: {what}: {why}")
    same = _same_launch_file(n, missing)
    report["raw"] = {"inprocess_us": inproc, "process": zyg, "otp": otp, "ros_respawn": ros}
    report["raw"] |= {"standby": warm, "standby_exit_report": warm_exit}
    report["results"] = {"restart": rows, "durable_loss": loss, "not_available": missing}
    report["results"]["same_launch_file"] = same
    finish(report, [*goals(samples, loss), *_same_launch_goal(same)], args)


def _same_launch_file(n: dict[str, int], missing: dict[str, str]) -> dict[str, Any] | None:
    """roslaunch and roboscale on one launch file, alternating rounds (restart_launch.py)."""
    kills, loss_kills = n["launch_kills"], n["launch_loss_kills"]
    same = attempt("same launch file", lambda: same_launch_file(kills, 2, loss_kills), missing)
    if same:
        print("\none roslaunch file, run by roslaunch and by roboscale (kill → publish, µs):")
        table(same["rows"], ["system", "n", "p50_us", "p99_us", "max_us", "mean_us"])
        table(same["loss"], ["system", "kills", "published", "received", "lost", "lost_per_kill"])
        print(f"restart p50 roboscale / roslaunch: {same['p50_ratio']:.3f}")
    return same


def _same_launch_goal(same: dict[str, Any] | None) -> list[dict[str, Any]]:
    goal, target = "roboscale launch / roslaunch restart p50 (one file)", judge.at_most(1)
    if not same:
        return [judge.not_measured(goal, target)]
    by = same["samples_us"]
    return [judge.latency_ratio(goal, by["roboscale"], by["roslaunch"], target)]


def goals(samples: dict[str, list[float]], loss: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The issue's goals, judged by bench/goals.py: latency goals by the interval of their
    p50 (or ratio of p50s) from every restart measured side by side in this run, the
    durable topics' counts exactly."""
    out = [
        _ratio("in-process restart p50 / OTP p50", samples, "inproc", "otp"),
        judge.latency(STANDBY_GOAL, samples["standby"], PROCESS_TARGET)
        if samples.get("standby")
        else judge.not_measured(STANDBY_GOAL, PROCESS_TARGET),
        _ratio("process-node restart p50 / roslaunch p50", samples, "standby", "ros"),
        _ratio("restart p50, death notice / exit report (A/B)", samples, "standby", "standby_exit"),
    ]
    for row in loss[:2]:
        goal = f"durable lost, duplicated: {row['system']}"
        if row.get("lost") is None:
            out.append(judge.not_measured(goal, "0, 0"))
            continue
        measured = f"{row['lost']}, {row['duplicated']}"
        sample = f"{row['kills']} kills, {row['published']:,} published"
        met = (row["lost"], row["duplicated"]) == (0, 0)
        out.append(judge.exact(goal, measured, "0, 0", met, sample))
    return out


def _ratio(goal: str, samples: dict[str, list[float]], top: str, bottom: str) -> dict[str, Any]:
    target = judge.at_most(1)
    if not samples.get(top) or not samples.get(bottom):
        return judge.not_measured(goal, target)
    return judge.latency_ratio(goal, samples[top], samples[bottom], target)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # every child was already stopped on the way out
        sys.exit("interrupted")
