"""One roslaunch file, run by roslaunch and by `roboscale launch`: restart and loss, side by side.

The file is the same for both (a rospy node with respawn="true" respawn_delay="0", from
bench/baselines/ros_nodes.py), and so is everything around it: a private roscore per run,
the same observer. Each runner's node is SIGKILLed again and again:
- restart: kill until the new instance publishes (its latched /ready message carries the
  CLOCK_MONOTONIC time it started publishing);
- loss: a 1 kHz publisher and a respawning subscriber; the subscriber is killed, messages
  counted by sequence number (restart_baselines.count_loss). Three ways in the same run:
  roslaunch's respawn, roboscale's, and roboscale's with the durable relay
  (runtime/rosrelay.py, a node of the same file) in front of the subscriber, which commits
  what it handled to its cursor (runtime/roscursor.py) and is replayed the rest.
Runners alternate per round (roslaunch, roboscale, roslaunch, ...), so that a change in
the machine's load falls on both.

    PYTHONPATH=src .venv/bin/python bench/restart_launch.py [--kills 10] [--rounds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import roboscale.runtime.roscursor
from common import stop_group, wait_for
from restart_baselines import (
    BASELINES,
    PACKAGE,
    RESPAWN_WAIT_S,
    STARTUP_WAIT_S,
    _wait_receiving,
    count_loss,
    kill_until_published,
    node_xml,
    percentiles,
)
from roboscale.backends.ros1 import Roscore
from roboscale.backends.roslaunch import make_package, ros_env
from roboscale.backends.roslaunch import node_xml as launch_node
from roboscale.safewrite import write_json

RUNNERS = ("roslaunch", "roboscale")
ROBOSCALE = Path(sys.executable).parent / "roboscale"
CURSOR_MODULE = Path(roboscale.runtime.roscursor.__file__)
# The relay as a node of the bench's package: roboscale's Python, the checkout's source.
RELAY = f"""#!/bin/sh
exec env PYTHONPATH={CURSOR_MODULE.parents[2]} {sys.executable} -m roboscale.runtime.rosrelay "$@"
"""


@contextlib.contextmanager
def launched(runner: str, work: Path, nodes: str) -> Iterator[dict[str, str]]:
    """A private roscore and `runner` running the launch file of `nodes`; both stopped."""
    scripts = {
        "ros_nodes.py": (BASELINES / "ros_nodes.py").read_text(),
        "roscursor.py": CURSOR_MODULE.read_text(),
        "ros_relay": RELAY,
    }
    pkgs = make_package(work, PACKAGE, scripts)
    launch = work / "nodes.launch"
    launch.write_text(f"<launch>\n{nodes}</launch>\n")
    core = Roscore(work / "core")
    env = ros_env({**core.env, "ROS_PACKAGE_PATH": f"{pkgs}:/usr/share"})
    if runner == "roslaunch":
        argv = ["roslaunch", str(launch)]
        run_env = env
    else:  # the CLI, as a user runs it, on the same master
        argv = [str(ROBOSCALE), "launch", "--master", core.uri, str(launch)]
        run_env = {**os.environ, **core.env, "ROS_PACKAGE_PATH": env["ROS_PACKAGE_PATH"]}
    log = (work / f"{runner}.log").open("wb")
    proc = subprocess.Popen(
        argv, env=run_env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True,
    )  # fmt: skip
    try:
        yield env
    finally:
        stop_group(proc)
        log.close()
        core.stop()


def restart_us(runner: str, kills: int) -> list[float]:
    """Kill until the replacement publishes, `kills` times, in µs."""
    with (
        tempfile.TemporaryDirectory(prefix=f"roboscale-{runner}-") as tmp,
        launched(runner, Path(tmp), node_xml("worker", "worker", respawn=True)) as env,
    ):
        samples = [t_pub for t_pub, _ in kill_until_published(env, kills)]
    return samples


def loss(runner: str, kills: int, durable: bool = False, settle_s: float = 0.3) -> dict[str, Any]:
    """Messages a respawning subscriber misses at 1 kHz while it is SIGKILLed; `durable`:
    behind the relay, replayed from its cursor."""
    with tempfile.TemporaryDirectory(prefix=f"roboscale-{runner}-") as tmp:
        work = Path(tmp)
        pub_log, sub_log, stop = work / "pub.log", work / "sub.log", work / "stop"
        max_s = 60 + kills * RESPAWN_WAIT_S
        nodes = node_xml("seq_pub", f"pub {pub_log} {stop} {max_s:g}", respawn=False)
        if durable:
            cursor = work / "sub.cursor"
            relay = f"--topic /seq --to /seq_durable --cursor {cursor}"
            nodes += launch_node("relay", PACKAGE, "ros_relay", relay, respawn=False)
            nodes += node_xml("seq_sub", f"dsub {sub_log} {cursor}", respawn=True)
        else:
            nodes += node_xml("seq_sub", f"sub {sub_log}", respawn=True)
        with launched(runner, work, nodes):
            killed: set[int] = set()
            pid = _wait_receiving(sub_log, killed, STARTUP_WAIT_S)
            for _ in range(kills):
                time.sleep(settle_s)
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
                pid = _wait_receiving(sub_log, killed, RESPAWN_WAIT_S)
            time.sleep(settle_s)
            stop.touch()
            wait_for(lambda: pub_log.read_bytes().endswith(b"END\n"), 5.0)
            time.sleep(settle_s)
            if durable:  # the replay may still be draining: wait for the last one published
                last = pub_log.read_text().split()[-2].encode()
                wait_for(lambda: sub_log.read_bytes().endswith(b" " + last + b"\n"), 10.0)
        return count_loss(pub_log.read_text(), sub_log.read_text(), kills)


def compare(kills: int, rounds: int, loss_kills: int) -> dict[str, Any]:
    """Both runners, alternating per round; the restart p50 ratio roboscale / roslaunch."""
    samples: dict[str, list[float]] = {r: [] for r in RUNNERS}
    for _ in range(rounds):
        for runner in RUNNERS:
            samples[runner] += restart_us(runner, kills)
    rows = [percentiles(f"{r} (same launch file)", samples[r]) for r in RUNNERS]
    losses = [{"system": f"{r} respawn", **loss(r, loss_kills)} for r in RUNNERS]
    durable = loss("roboscale", loss_kills, durable=True)
    losses.append({"system": "roboscale respawn + durable relay", **durable})
    ratio = rows[1]["p50_us"] / rows[0]["p50_us"]
    return {"rows": rows, "samples_us": samples, "loss": losses, "p50_ratio": ratio}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--kills", type=int, default=10, help="restart kills per runner per round (default 10)"
    )
    parser.add_argument(
        "--rounds", type=int, default=2, help="rounds, runners alternating (default 2)"
    )
    parser.add_argument(
        "--loss-kills", type=int, default=5, help="subscriber kills per loss run (default 5)"
    )
    parser.add_argument("--json", type=Path, help="write the raw figures here")
    args = parser.parse_args()
    print("command:", " ".join(sys.argv), "| loadavg:", os.getloadavg())
    result = compare(args.kills, args.rounds, args.loss_kills)
    for row in result["rows"]:
        print(row)
    for row in result["loss"]:
        print(row)
    print(f"restart p50 roboscale / roslaunch: {result['p50_ratio']:.3f}")
    if args.json is not None:
        write_json(args.json, result)


if __name__ == "__main__":
    main()
