"""One roslaunch file, run by roslaunch and by `roboscale launch`: restart and loss, side by side.

The file is the same for both (a rospy node with respawn="true" respawn_delay="0", from
bench/baselines/ros_nodes.py), and so is everything around it: a private roscore per run,
the same observer. Each runner's node is SIGKILLed again and again:
- restart: kill until the new instance publishes (its latched /ready message carries the
  CLOCK_MONOTONIC time it started publishing);
- loss: a 1 kHz publisher and a respawning subscriber; the subscriber is killed, messages
  counted by sequence number (restart_baselines.count_loss).
Runners alternate per round (roslaunch, roboscale, roslaunch, ...), so that a change in
the machine's load falls on both.

    PYTHONPATH=src .venv/bin/python bench/restart_launch.py [--kills 10] [--rounds 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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

RUNNERS = ("roslaunch", "roboscale")
ROBOSCALE = Path(sys.executable).parent / "roboscale"


@contextlib.contextmanager
def launched(runner: str, work: Path, nodes: str) -> Iterator[dict[str, str]]:
    """A private roscore and `runner` running the launch file of `nodes`; both stopped."""
    script = (BASELINES / "ros_nodes.py").read_text()
    pkgs = make_package(work, PACKAGE, {"ros_nodes.py": script})
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


def loss(runner: str, kills: int, settle_s: float = 0.3) -> dict[str, Any]:
    """Messages a respawning subscriber misses at 1 kHz while it is SIGKILLed."""
    with tempfile.TemporaryDirectory(prefix=f"roboscale-{runner}-") as tmp:
        work = Path(tmp)
        pub_log, sub_log, stop = work / "pub.log", work / "sub.log", work / "stop"
        max_s = 60 + kills * RESPAWN_WAIT_S
        nodes = node_xml("seq_pub", f"pub {pub_log} {stop} {max_s:g}", respawn=False)
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
        return count_loss(pub_log.read_text(), sub_log.read_text(), kills)


def compare(kills: int, rounds: int, loss_kills: int) -> dict[str, Any]:
    """Both runners, alternating per round; the restart p50 ratio roboscale / roslaunch."""
    samples: dict[str, list[float]] = {r: [] for r in RUNNERS}
    for _ in range(rounds):
        for runner in RUNNERS:
            samples[runner] += restart_us(runner, kills)
    rows = [percentiles(f"{r} (same launch file)", samples[r]) for r in RUNNERS]
    losses = [{"system": f"{r} respawn", **loss(r, loss_kills)} for r in RUNNERS]
    ratio = rows[1]["p50_us"] / rows[0]["p50_us"]
    return {"rows": rows, "samples_us": samples, "loss": losses, "p50_ratio": ratio}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--kills", type=int, default=10, help="kills per runner per round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--loss-kills", type=int, default=5)
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
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
