"""Sustained one-way throughput between two processes: the runtime against rospy, Zenoh, dds.

One publisher process and one subscriber process per system, on loopback, at 4,250 B
and 307,200 B (bench/baselines/flood.py; raw Zenoh in Rust: baselines/zenoh_rs):

- runtime: two runtimes, one node each, joined by the runtime's Zenoh bridge (its native
  per-message path `_zbridge` where built, else the python link: the row says which);
- rospy: Debian's rospy under a private roscore;
- zenoh-python: two peers of the eclipse-zenoh wheel;
- dds: the project's dds backend (Cyclone DDS, its C take path), reliable, keep-all;
- zenoh (Rust): the same pair with no Python at all.

A step offers a rate R: the publisher sends N = R x step length messages (at least
MIN_COUNT, at most MAX_COUNT) paced on absolute deadlines, and the subscriber counts
them. A step is *sustained* when every message of it arrived, in order, and the rate
they arrived at (the subscriber's clock, first to last) is at least SHARE of R. The
search, per system and size: rates double from START_RATE until a step fails (or
MAX_RATE, a ceiling then reported as such); then `--repeats` times over, interleaved
across systems, one refinement: the highest rate sustained so far is stepped again (halved
until it holds, at most 3 times), then `--bisections` geometric bisections between it and
the first rate that failed. Each refinement's highest sustained rate is one sample: the
table gives their median and range, and the bisection's resolution. Every step is bounded
in count and time (the publisher stops at 2 N / R + 2 s; the subscriber is waited for
until it stops making progress for DRAIN_S).

Each row also gives the CPU time per message (user + system, every thread of the process,
from /proc) of the publisher and of the subscriber at the fastest step sustained.

Goal: at 4,250 B, the runtime's sustained rate at least 10x rospy's, judged on the
ratio of each refinement (the 95 % interval of its median, goals.from_rounds).

    .venv/bin/python bench/throughput.py [--quick] [--json bench/out/throughput.json]
        [--check] [--repeats 3] [--bisections 4] [--step-ms 1000] [--systems runtime,rospy]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import goals as judge
from common import attempt, counted_args, finish, header, table
from restart_baselines import BASELINES, LineReader
from roboscale.backends.base import free_port
from roboscale.errors import UserError
from scale import stop_group_term, zenoh_rs_program

SIZES = [4250, 307_200]
START_RATE = {4250: 500.0, 307_200: 50.0}
MAX_RATE = {4250: 512_000.0, 307_200: 12_800.0}  # 2.2 and 3.9 GB/s: a ceiling, not a goal
MAX_COUNT = {4250: 200_000, 307_200: 8_000}
MIN_COUNT = 50
# A sustained step arrives at no less than this share of the offered rate. The arrival
# span also holds the last message's latency minus the first's: rospy's publisher, Nagle
# on, lags by tens of ms, which alone costs 4 % of a 1 s step (and 12 % of a 0.3 s one).
SHARE = 0.90
DRAIN_S = 1.0  # the subscriber is done when its count has not moved for this long
LOWEST_FACTOR = 64  # below START_RATE / this, a system is reported as sustaining nothing
PROBE_TRIES = 30
READY_TIMEOUT_S = 60.0
GOAL_SIZE, GOAL_RATIO = 4250, 10.0
FLOOD = BASELINES / "flood.py"
ROW_COLUMNS = ["system", "bytes", "repeats", "median_per_s", "min_per_s", "max_per_s"]
ROW_COLUMNS += ["median_MB_per_s", "resolution", "ceiling", "steps", "pub_cpu_us", "sub_cpu_us"]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")  # /proc's unit of CPU time
FULL = {"repeats": 3, "bisections": 4, "step_ms": 1000}
QUICK = {"repeats": 1, "bisections": 2, "step_ms": 300}

RUNTIME, ROSPY, ZENOH, DDS, RUST = "runtime", "rospy", "zenoh-python", "dds", "zenoh (Rust)"
SYSTEMS = [RUNTIME, ROSPY, ZENOH, DDS, RUST]
KEYS = {RUNTIME: "runtime", ROSPY: "rospy", ZENOH: "zenoh", DDS: "dds", RUST: "rust"}


@dataclass
class Step:
    """One offered rate, as both sides saw it."""

    offered: float
    count: int
    sent: int
    received: int
    in_order: bool
    achieved: float  # messages per second at the subscriber, first to last arrival
    sustained: bool
    # CPU time (user + system, every thread, /proc) per message sent, µs: the publisher's
    # over the step, the subscriber's from the step's start until it drained.
    pub_cpu_us: float | None = None
    sub_cpu_us: float | None = None

    def row(self) -> dict[str, Any]:
        return self.__dict__.copy()


class Program:
    """One side of a pair: a flood program answering one JSON line per command."""

    def __init__(self, argv: list[str], env: dict[str, str], what: str) -> None:
        self.what = what
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        self.lines = LineReader(self.proc, what)
        if self.lines.next(READY_TIMEOUT_S) != "ready":
            raise UserError(f"{what} did not start")

    def ask(self, command: str, timeout_s: float) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()
        line = self.lines.next(timeout_s)
        try:
            answer: dict[str, Any] = json.loads(line)
        except ValueError as e:
            raise UserError(f"{self.what} answered {line[:200]!r}") from e
        return answer

    def cpu_s(self) -> float:
        """The program's CPU time so far, user + system, all its threads (0 once gone)."""
        try:
            with open(f"/proc/{self.proc.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return 0.0
        return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS

    def stop(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # end of input: the program ends its session
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(5.0)
        stop_group_term(self.proc)


@dataclass
class Pair:
    """A subscriber and a publisher of one system and size, and the steps they ran."""

    system: str
    size: int
    sub: Program
    pub: Program
    step_s: float
    steps: list[Step] = field(default_factory=list)
    next_step: int = 0

    def step(self, rate: float) -> Step:
        count = max(MIN_COUNT, min(MAX_COUNT[self.size], round(rate * self.step_s)))
        return self.run(rate, count)

    def run(self, rate: float, count: int) -> Step:
        self.next_step += 1
        max_s = 2 * count / rate + 2
        command = f"{self.next_step} {rate:.3f} {count} {self.size} {max_s:.3f}"
        pub_cpu, sub_cpu = self.pub.cpu_s(), self.sub.cpu_s()
        sent = int(self.pub.ask(command, max_s + 60)["sent"])
        pub_cpu = self.pub.cpu_s() - pub_cpu
        seen = self.drained(count)
        sub_cpu = self.sub.cpu_s() - sub_cpu
        received = seen["received"] if seen["step"] == self.next_step else 0
        span_s = (seen["last_ns"] - seen["first_ns"]) / 1e9
        achieved = (received - 1) / span_s if received > 1 and span_s > 0 else 0.0
        in_order = bool(seen["in_order"]) and received == count
        ok = sent == count and in_order and achieved >= SHARE * rate
        per = 1e6 / max(sent, 1)
        step = Step(
            rate, count, sent, received, in_order, achieved, ok, pub_cpu * per, sub_cpu * per
        )
        self.steps.append(step)
        mark = "sustained" if ok else "not sustained"
        print(
            f"  {self.system}, {self.size} B: {rate:,.0f}/s offered, {received}/{count} in "
            f"order={in_order}, {achieved:,.0f}/s arrived: {mark} (CPU per message: "
            f"publisher {pub_cpu * per:.1f} µs, subscriber {sub_cpu * per:.1f} µs)",
            flush=True,
        )
        return step

    def drained(self, count: int) -> dict[str, Any]:
        """The subscriber's counts once every message came or the count stopped moving."""
        last, moved = -1, time.monotonic()
        deadline = moved + 60.0
        while True:
            seen = self.sub.ask("report", 10.0)
            received = seen["received"] if seen["step"] == self.next_step else 0
            now = time.monotonic()
            if received >= count or now > deadline or now - moved > DRAIN_S:
                return seen
            if received != last:
                last, moved = received, now
            time.sleep(0.02)

    def probe(self) -> None:
        """Small slow steps until one arrives whole: both sides are connected."""
        for _ in range(PROBE_TRIES):
            if self.run(100.0, 20).received == 20:
                self.steps.clear()
                return
        raise UserError(f"{self.system}: no flood message arrived in {PROBE_TRIES} probes")


@dataclass
class Search:
    """A pair's bracket (highest sustained, lowest failed) and its refinements."""

    pair: Pair
    low: float | None = None
    high: float | None = None  # None: never failed up to MAX_RATE
    found: list[float] = field(default_factory=list)

    def bracket(self) -> None:
        start, ceiling = START_RATE[self.pair.size], MAX_RATE[self.pair.size]
        rate = start
        while rate <= ceiling:
            if not self.pair.step(rate).sustained:
                self.high = rate
                break
            self.low, rate = rate, rate * 2
        while self.low is None and rate >= start / LOWEST_FACTOR:
            rate /= 2
            if self.pair.step(rate).sustained:
                self.low = rate
            else:
                self.high = rate

    def refine(self, bisections: int) -> None:
        """One sample: the highest rate sustained in this refinement (0: none)."""
        low = self.low
        for _ in range(3):  # the bracket's rate must hold again
            if low is None or self.pair.step(low).sustained:
                break
            low = low / 2
        else:
            low = None
        if low is None:
            self.found.append(0.0)
            return
        high = self.high if self.high is not None else None
        for _ in range(bisections if high is not None else 0):
            assert high is not None
            mid = math.sqrt(low * high)
            if self.pair.step(mid).sustained:
                low = mid
            else:
                high = mid
        self.found.append(low)

    def resolution(self, bisections: int) -> float | None:
        """The factor between a found rate and the next one the bisection could find."""
        if self.low is None or self.high is None:
            return None
        return float((self.high / self.low) ** (0.5**bisections))


@contextmanager
def pair(system: str, size: int, step_s: float, rust: Path | None) -> Iterator[Pair]:
    """A subscriber then a publisher of `system` at `size`, stopped on the way out."""
    with ExitStack() as stack:
        env = {**os.environ}
        endpoint = f"tcp/127.0.0.1:{free_port()}"
        if system == RUST:
            if rust is None:
                raise UserError("the Rust baseline was not built")
            argv = [str(rust)]
        elif system == ROSPY:
            argv = [*rospy_env(stack, env), str(FLOOD), "rospy"]
        else:
            argv = [sys.executable, str(FLOOD), KEYS[system]]
        if system == DDS:
            from roboscale.backends.dds import lease_domain

            lease = lease_domain()
            stack.callback(lease.release)
            env.update(FLOOD_DDS_DOMAIN=str(lease.domain), FLOOD_DDS_SIZE=str(size))
        sub = Program([*argv, "sub", endpoint], env, f"{system} subscriber")
        stack.callback(sub.stop)
        pub = Program([*argv, "pub", endpoint], env, f"{system} publisher")
        stack.callback(pub.stop)
        made = Pair(system, size, sub, pub, step_s)
        made.probe()
        yield made


def rospy_env(stack: ExitStack, env: dict[str, str]) -> list[str]:
    """A private roscore for the pair (stopped with it): the env to reach it; the Python."""
    from roboscale.backends.ros1 import SYSTEM_PYTHON, Roscore
    from roboscale.backends.roslaunch import ros_env

    if not Path(SYSTEM_PYTHON).exists():
        raise UserError("ROS 1 is not installed", hint="sudo make ros1")
    tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="roboscale-flood-"))
    core = Roscore(Path(tmp))
    stack.callback(core.stop)
    env.update(ros_env(core.env))
    return [SYSTEM_PYTHON]


def run_size(
    size: int,
    systems: list[str],
    counts: dict[str, int],
    rust: Path | None,
    missing: dict[str, str],
) -> dict[str, Search]:
    """Every system's bracket, then the refinements interleaved: repeat 1 of each system,
    then repeat 2...; so a slower minute on the machine falls on every system alike."""
    searches: dict[str, Search] = {}
    with ExitStack() as stack:
        for system in systems:

            def start(system: str = system) -> Search:
                made = stack.enter_context(pair(system, size, counts["step_ms"] / 1000, rust))
                search = Search(made)
                search.bracket()
                return search

            found = attempt(f"{system} at {size} B", start, missing)
            if found is not None:
                searches[system] = found
        for repeat in range(counts["repeats"]):
            print(f"refinement {repeat + 1} of {counts['repeats']}, {size} B:", flush=True)
            for system, search in list(searches.items()):
                done = attempt(
                    f"{system} at {size} B, refinement {repeat + 1}",
                    lambda s=search: s.refine(counts["bisections"]),
                    missing,
                )
                if done is None and len(search.found) <= repeat:
                    del searches[system]  # a broken pair: its samples so far are dropped
    return searches


def summary(search: Search, bisections: int) -> dict[str, Any]:
    found, size = search.found, search.pair.size
    median = statistics.median(found)
    # CPU per message at the fastest step sustained: what each side spends per message
    # when busy (a slower step's figure also holds idle wake-ups).
    held = [s for s in search.pair.steps if s.sustained]
    top = max(held, key=lambda s: s.offered) if held else None
    return {
        "system": search.pair.system,
        "bytes": size,
        "repeats": len(found),
        "median_per_s": median,
        "min_per_s": min(found),
        "max_per_s": max(found),
        "median_MB_per_s": median * size / 1e6,
        "resolution": search.resolution(bisections),
        # "yes": never failed up to MAX_RATE, the figure is a lower bound
        "ceiling": "yes" if search.high is None else "no",
        "steps": len(search.pair.steps),
        "pub_cpu_us": top.pub_cpu_us if top is not None else None,
        "sub_cpu_us": top.sub_cpu_us if top is not None else None,
    }


def goals(results: dict[int, dict[str, Search]]) -> list[dict[str, Any]]:
    at = results.get(GOAL_SIZE, {})
    runtime, rospy = at.get(RUNTIME), at.get(ROSPY)
    goal = f"sustained rate at {GOAL_SIZE:,} B, runtime / rospy"
    target = f">= {GOAL_RATIO:g}"
    if runtime is None or rospy is None or not runtime.found or not rospy.found:
        return [judge.not_measured(goal, target)]
    ratios = [
        r / p if p > 0 else math.inf for r, p in zip(runtime.found, rospy.found, strict=False)
    ]
    pooled = statistics.median(runtime.found) / max(statistics.median(rospy.found), 1e-9)
    # The sample a side: the messages that arrived in the steps behind the refinements.
    n = tuple(sum(step.received for step in s.pair.steps) for s in (runtime, rospy))
    line = judge.from_rounds(goal, pooled, ratios, judge.at_least(GOAL_RATIO), (n[0], n[1]))
    return [{**line, "by_round": ", ".join(f"{r:.2f}" for r in ratios)}]


def bridge_path() -> str:
    """Which per-message path the runtime's bridges take here, and why."""
    from roboscale.runtime import zlink
    from roboscale.runtime.bridgeconfig import bridge_config

    config = bridge_config({"listen": ["tcp/127.0.0.1:7447"], "import": ["/flood"]})
    return ": ".join(zlink.link_path(config, load=False))


def chosen_systems(args: argparse.Namespace) -> list[str]:
    if not args.systems:
        return SYSTEMS
    by_key = {key: system for system, key in KEYS.items()}
    picked = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [s for s in picked if s not in by_key]
    if unknown:
        raise UserError(f"unknown system {', '.join(unknown)}; allowed: {', '.join(by_key)}")
    return [by_key[s] for s in picked]


def main() -> None:
    def systems_option(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--systems",
            help="a subset, e.g. runtime,rospy (keys: " + ", ".join(KEYS.values()) + ")",
        )

    args, counts = counted_args(__doc__ or "", FULL, QUICK, systems_option)
    systems = chosen_systems(args)
    report = header()
    report["counts"] = counts
    report["settings"] = {
        "share": SHARE,
        "start_rate": START_RATE,
        "max_rate": MAX_RATE,
        "max_count": MAX_COUNT,
        "min_count": MIN_COUNT,
        "bridge_path": bridge_path(),
        "load_average_start": os.getloadavg(),
    }
    missing: dict[str, str] = {}
    rust = None
    if RUST in systems:
        rust = attempt("build of the native baselines", zenoh_rs_program, missing)
    results = {size: run_size(size, systems, counts, rust, missing) for size in SIZES}
    report["settings"]["load_average_end"] = os.getloadavg()
    rows = [summary(s, counts["bisections"]) for by in results.values() for s in by.values()]
    print(f"\nhighest sustained one-way rate (messages/s; bridge path {bridge_path()}):")
    table(
        rows,
        [*ROW_COLUMNS],
    )
    for what, why in missing.items():
        print(f"not available: {what}: {why}")
    report["raw"] = {
        str(size): {
            system: {
                "found": s.found,
                "low": s.low,
                "high": s.high,
                "steps": [step.row() for step in s.pair.steps],
            }
            for system, s in by.items()
        }
        for size, by in results.items()
    }
    report["results"] = {"rows": rows, "not_available": missing}
    finish(report, goals(results), args, ["by_round"])


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted")
    except UserError as e:
        sys.exit(f"error: {e}")
