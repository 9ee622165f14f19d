"""How far the runtime scales: idle nodes, many publishers, echo against rospy and Zenoh.

1. 10,000 idle in-process nodes (one subscription each) started under one supervisor
   in a fresh Python process: start time and memory per node. The goal uses the
   growth of that process's resident set (RSS, /proc/self/statm) while the nodes
   start: it counts C allocations too. tracemalloc's Python-heap figure is shown
   beside it for reference (it misses C allocations).
2. 1,000 nodes on one runtime, each publishing a timestamp at 1 Hz on its own topic
   (phases spread over the first second) and subscribed to its neighbour's: delivery
   latency from publish to the subscriber's callback, and messages delivered.
3. Echo round-trip time, same payload sizes (11 B, 4,250 B, 307,200 B, 1 MiB, 4 MiB) in
   one run. Between processes of one host the bridge and the Zenoh baselines move
   payloads of 3 KB or more through shared memory (runtime/zenoh_config.py), rospy
   through its TCP socket:
   - runtime in-process: ping and echo nodes on one loop (runtime/measure.py);
   - runtime between processes: two runtimes joined by the Zenoh bridge
     (bench/baselines/runtime_echo.py) on its native per-message path where it was built
     (`make native`), and again on its python link ($ROBOSCALE_BRIDGE_PATH=python);
   - the same native pair on Zenoh's lowlatency transport (bridge `transport: lowlatency`,
     opt-in): the sizes up to its 48,000 B cap only (it does not fragment), with its own
     goal lines beside the default's;
   - rospy: two processes under a private roscore, tcp_nodelay (baselines/rospy_echo.py);
   - raw zenoh-python: two peers on explicit tcp/127.0.0.1 endpoints, scouting off,
     FIFO channel handlers (baselines/zenoh_echo.py);
   - zenoh-python + event loop: the same, with each sample handed from a reader thread to
     an event loop that replies (zenoh_echo.py echo-loop/ping-loop): the floor of any
     runtime that runs callbacks on one loop per process;
   - Zenoh through a minimal native binding + event loop: zenoh_min (baselines/zenoh_pyo3),
     whose Zenoh callback wakes the loop through an eventfd, no Python thread between
     (zenoh_native_echo.py): what Zenoh and one Python loop per hop cost, no runtime code;
   - raw Zenoh in Rust: the same pair with no Python at all (baselines/zenoh_rs): what
     Zenoh costs any runtime that hands each sample to a thread of its own, in any language.
   The two native baselines are built first with cargo into bench/out/zenoh-rs (about 5
   minutes the first time). The floors' ratios to rospy are printed: they bound the
   bridge/rospy goal.
   Every pair pings one message at a time and times the round trip on the ping side.
   Context switches per round trip (bench/switches.py): every thread of the echo process
   while the ping ran, and the ping process (waited for: its start-up included), each
   divided by the round trips timed (warm-up and probes count in the switches, not in
   the division: an upper bound by a few percent). CPU time per round trip the same way
   (user + system, every thread; over all the sizes a pair ran, so `--sizes 11` for the
   small messages' own): what a latency bought with CPU would show there.

With `--rounds N` only the close latency goals run: the bridge (native, python link,
lowlatency transport) and rospy pairs interleaved N times, so every system is measured
in every minute alike (`--baseline-src DIR` adds the native pair of another checkout's
src, e.g. the code before a change, after this code's in every round: an A/B; `--floor`
adds the floors zenoh_min + event loop and raw Zenoh in Rust); goals on the pooled p50s,
judged over rounds, with the range of the per-round ratios (bench/scale_rounds.py).
Every goal line gives its figure's 95 % interval and sample, and says "not judged" when
the interval straddles the target or the sample is too short (bench/goals.py).

With `--against-dds` it measures the goal against dds instead (bench/scale_dds.py, its
own options: `--against-dds --help`): the lab's dds, native-proc and lowlatency trials at
the demo's sizes, at 10 Hz and 1 kHz, with the floors at the same rates, interleaved.

    .venv/bin/python bench/scale.py [--quick] [--json bench/out/scale.json] [--check]
        [--rounds 5 [--baseline-src DIR] [--floor]] [--sizes 11,4250]
    .venv/bin/python bench/scale.py --against-dds [--quick] [--rounds 3] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import goals as judge
import switches
from common import attempt, counted_args, finish, header, stop_group, table
from restart_baselines import BASELINES, LineReader, percentiles
from roboscale.backends.base import free_port
from roboscale.backends.ros1 import SYSTEM_PYTHON, Roscore
from roboscale.backends.roslaunch import ros_env
from roboscale.errors import UserError
from roboscale.runtime.executor import Runtime
from roboscale.runtime.measure import inprocess_echo_samples
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor

SIZES = [11, 4250, 307_200, 1 << 20, 4 << 20]
# The bridge's p50 over rospy's, per size: at most rospy's at the demo's sizes, and at
# most a fifth of it at 4 MiB, where shared memory spares the bridge its socket copies.
RATIO_GOALS = {11: 1.0, 4250: 1.0, 307_200: 1.0, 4 << 20: 0.2}
PING_BYTES_PER_S = 20e6  # the slowest copy rate a ping's time allowance assumes
FLOOR = "zenoh-python + event loop"
NATIVE_FLOOR = "zenoh (minimal binding) + event loop"
BRIDGE = "runtime + Zenoh bridge"
PY_LINK = "runtime + Zenoh bridge (python link)"
# The bridge on Zenoh's lowlatency transport (opt-in, `transport: lowlatency`): payloads up
# to its cap only (runtime.zenoh_config.LOWLATENCY_MAX_PAYLOAD); larger sizes are skipped.
LOWLAT = "runtime + Zenoh bridge, lowlatency transport"
RUST = "zenoh (Rust)"
ROSPY = "rospy (tcp_nodelay)"
RUST_WORKSPACE = BASELINES / "Cargo.toml"  # zenoh_rs and zenoh_pyo3
RUST_TARGET = Path(__file__).resolve().parent / "out" / "zenoh-rs"
NATIVE_MODULE = RUST_TARGET / "python" / "zenoh_min.so"  # where zenoh_native_echo.py looks
RUST_BUILD_TIMEOUT_S = 1800
NODE_BYTES_GOAL = 20_000
INPROC_P50_GOAL_US = 20.0
INPROC_GOAL_SIZES = [11, 4250, 307_200]  # in-process a payload is handed over, not copied
READY_TIMEOUT_S = 30.0
WARMUP = 200  # round trips discarded in-process (the other pairs discard 20 each)
FULL = {"idle_nodes": 10_000, "publishers": 1000, "publish_s": 20, "echoes": 2000}
QUICK = {"idle_nodes": 10_000, "publishers": 1000, "publish_s": 3, "echoes": 200}

IDLE_PROGRAM = """
import json, sys
from roboscale.runtime.measure import idle_node_memory
print(json.dumps(idle_node_memory(int(sys.argv[1]))))
"""


# --------------------------------------------------------------------------- idle nodes


def idle_nodes(n: int) -> dict[str, Any]:
    """idle_node_memory(n) in a fresh interpreter, so the RSS growth is this test's alone."""
    out = subprocess.run(
        [sys.executable, "-c", IDLE_PROGRAM, str(n)],
        capture_output=True,
        text=True,
        timeout=120 + n * 0.01,
        check=False,
    )
    if out.returncode != 0:
        raise UserError(f"idle-node measurement failed: {out.stderr.strip()[-500:]}")
    result: dict[str, Any] = json.loads(out.stdout)
    return result


# --------------------------------------------------------------------------- 1 Hz publishers


class _Tally:
    """Shared by the publishing nodes: counts and latencies, no allocation per message."""

    def __init__(self) -> None:
        self.published = 0
        self.latency_us: list[float] = []
        self.stop = False


class _Ticker(Node):
    def on_start(self) -> None:
        i, n = int(self.get_param("i")), int(self.get_param("n"))
        self.tally: _Tally = self.get_param("tally")
        self.pub = self.publisher(f"/t{i}")
        self.subscribe(f"/t{(i + 1) % n}", self._got)
        # Without a phase all 1,000 timers would fire in the same millisecond every second.
        self.runtime.loop.call_later(float(self.get_param("phase")), self._begin)

    def _begin(self) -> None:
        if self.alive:
            self.timer(1.0, self._tick)
            self._tick()

    def _tick(self) -> None:
        if not self.tally.stop:
            self.tally.published += 1
            self.pub.publish(time.perf_counter_ns())

    def _got(self, stamp_ns: int) -> None:
        self.tally.latency_us.append((time.perf_counter_ns() - stamp_ns) / 1000.0)


def publishers(n: int, seconds: float) -> dict[str, Any]:
    runtime = Runtime()
    try:
        return runtime.run(_publish(runtime, n, seconds))
    finally:
        runtime.close()


async def _publish(runtime: Runtime, n: int, seconds: float) -> dict[str, Any]:
    import asyncio

    tally, pick = _Tally(), random.Random(7)
    recipes = [
        NodeRecipe(f"t{i}", _Ticker, {"i": i, "n": n, "tally": tally, "phase": pick.random()})
        for i in range(n)
    ]
    sup = Supervisor(runtime, "publishers", [ChildSpec(r) for r in recipes])
    await sup.start_async()
    try:
        await asyncio.sleep(seconds)
        tally.stop = True
        await asyncio.sleep(0.2)  # the last messages reach their subscribers
    finally:
        await sup.stop_async()
    return {
        "nodes": n,
        "seconds": seconds,
        "published": tally.published,
        "latency": tally.latency_us,
    }


# --------------------------------------------------------------------------- echo pairs


@dataclass
class EchoRun:
    """One echo pair's round trips (µs per payload size) and its context switches."""

    rtt_us: dict[int, list[float]]
    echo_switches: int  # every thread of the echo process, while the ping ran
    ping_switches: int  # the ping process, its start-up included
    echo_cpu_s: float = 0.0  # CPU time (user + system) of the echo process, while the ping ran
    ping_cpu_s: float = 0.0  # the ping process's, its start-up included

    def per_round_trip(self) -> dict[str, float]:
        n = max(1, sum(len(v) for v in self.rtt_us.values()))
        return {
            "cs_echo_per_rt": self.echo_switches / n,
            "cs_ping_per_rt": self.ping_switches / n,
            "cpu_echo_us_per_rt": self.echo_cpu_s * 1e6 / n,
            "cpu_ping_us_per_rt": self.ping_cpu_s * 1e6 / n,
        }


def inprocess_echo(count: int, size: int) -> list[float]:
    """In-process round trips after WARMUP discarded ones (as the other pairs discard theirs)."""
    return inprocess_echo_samples(WARMUP + count, size)[WARMUP:]


def inprocess_run(count: int) -> EchoRun:
    """In-process pairs: both sides in this process (its switches in the echo column)."""
    before = switches.of_self()
    rtt = {s: inprocess_echo(count, s) for s in SIZES}
    return EchoRun(rtt, switches.of_self() - before, 0)


def program_name(argv: list[str]) -> str:
    """The script a Python runs, or the binary itself."""
    return Path(argv[1] if Path(argv[0]).name.startswith("python") else argv[0]).name


@contextmanager
def echo_process(argv: list[str], env: dict[str, str] | None = None) -> Iterator[int]:
    """An echo program that prints "ready"; its process group is killed on the way out.
    Yields its pid."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env, start_new_session=True
    )
    try:
        if LineReader(proc, "the echo program").next(READY_TIMEOUT_S) != "ready":
            raise UserError(f"{program_name(argv)} did not start")
        yield proc.pid
    finally:
        stop_group_term(proc)


def ping(argv: list[str], count: int, env: dict[str, str] | None = None) -> dict[int, list[float]]:
    """Run a ping program; its JSON lines, one per payload size."""
    proc = subprocess.Popen(
        [*argv, str(count), *map(str, SIZES)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    timeout_s = 3 * READY_TIMEOUT_S + sum(
        (count + 30) * (0.02 + size / PING_BYTES_PER_S) for size in SIZES
    )
    out = wait_group(proc, timeout_s, f"{program_name(argv)} ping")
    rows = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    return {row["size"]: row["rtt_us"] for row in rows}


def measured_pair(
    echo: list[str], pinger: list[str], count: int, env: dict[str, str] | None = None
) -> EchoRun:
    """An echo program, then its ping program: round trips and context switches."""
    with echo_process(echo, env) as pid, switches.Watch(pid) as echo_side:
        before_ping, cpu_before = switches.of_children(), (cpu_of(pid), children_cpu())
        rtt = ping(pinger, count, env)
        echo_cpu = cpu_of(pid) - cpu_before[0]
    ping_switches = switches.of_children() - before_ping
    return EchoRun(rtt, echo_side.total(), ping_switches, echo_cpu, children_cpu() - cpu_before[1])


def cpu_of(pid: int) -> float:
    """User + system CPU seconds of a live process, all its threads (/proc/PID/stat; the
    kernel's tick, 10 ms: over a whole ping run, a few percent)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    """User + system CPU seconds of the children this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def endpoint_pair(
    program: list[str], count: int, suffix: str = "", env: dict[str, str] | None = None
) -> EchoRun:
    """`program echo{suffix} ENDPOINT` and `program ping{suffix} ENDPOINT COUNT SIZE...`."""
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    return measured_pair(
        [*program, f"echo{suffix}", endpoint], [*program, f"ping{suffix}", endpoint], count, env
    )


def wait_group(proc: subprocess.Popen[bytes], timeout_s: float, what: str) -> bytes:
    """Wait for a program started in a group of its own, then stop what is left of the
    group; its stdout if it succeeded."""
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        raise UserError(f"{what} did not finish in {timeout_s:g} s") from e
    finally:
        stop_group_term(proc)
    if proc.returncode != 0:
        why = (err or b"").decode().strip()[-500:] or "its errors are above"
        raise UserError(f"{what} failed: {why}")
    return out or b""


def zenoh_pair(count: int, suffix: str = "") -> EchoRun:
    """Raw zenoh-python; suffix "-loop": each sample crosses to an event loop (the floor)."""
    return endpoint_pair([sys.executable, str(BASELINES / "zenoh_echo.py")], count, suffix)


def cargo_path() -> str | None:
    """cargo on PATH, or where rustup puts it (often not on PATH)."""
    found = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    return found if os.access(found, os.X_OK) else None


def zenoh_rs_program() -> Path:
    """Build the native baselines (cargo is incremental: a no-op once built); the Rust
    program's path. zenoh_min, built for this Python, is put where its pair finds it."""
    cargo, binary = cargo_path(), RUST_TARGET / "release" / "zenoh-echo-rs"
    if cargo is None:
        raise UserError("cargo is not installed", hint="Rust 1.88+ from https://rustup.rs")
    build = [cargo, "build", "--release", "--locked", "--manifest-path", str(RUST_WORKSPACE)]
    build += ["--target-dir", str(RUST_TARGET)]
    if binary.exists() and NATIVE_MODULE.exists():
        build.append("--quiet")
    else:  # cargo's progress bar shows on a terminal
        print("  cargo build --release: the first build takes about 5 minutes", flush=True)
    env = {**os.environ, "PYO3_PYTHON": sys.executable}  # the binding's Python
    # cargo's errors go to this terminal; its own group, so that a timeout stops rustc too
    proc = subprocess.Popen(build, stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    wait_group(proc, RUST_BUILD_TIMEOUT_S, f"cargo build of {RUST_WORKSPACE}")
    NATIVE_MODULE.parent.mkdir(exist_ok=True)
    shutil.copyfile(RUST_TARGET / "release" / "libzenoh_min.so", NATIVE_MODULE)
    return binary


def zenoh_rs_pair(count: int, program: Path) -> EchoRun:
    """Raw Zenoh in Rust (the binary zenoh_rs_program built), shaped as zenoh_pair."""
    return endpoint_pair([str(program)], count)


def zenoh_native_pair(count: int) -> EchoRun:
    """zenoh_min + event loop (built by zenoh_rs_program), shaped as the -loop zenoh_pair."""
    return endpoint_pair([sys.executable, str(BASELINES / "zenoh_native_echo.py")], count)


def runtime_pair(
    count: int, path: str = "auto", src: str | None = None, transport: str = "queued"
) -> EchoRun:
    """The runtime's echo over the bridge; `path` native (an error where not built),
    python or auto ($ROBOSCALE_BRIDGE_PATH); `src`: run the runtime of that source tree
    (another checkout's `src`, its extension included) instead of this one; `transport`:
    the bridges' Zenoh transport (lowlatency: the sizes up to its cap only)."""
    from roboscale.runtime import zlink  # ImportError: reported as missing

    if path == "native" and zlink.native_module() is None:
        raise UserError("the bridge's native path was not built", hint="make native")
    env = {**os.environ, zlink.PATH_ENV: path, "ROBOSCALE_ECHO_TRANSPORT": transport}
    if src is not None:
        if not (Path(src) / "roboscale" / "runtime").is_dir():
            raise UserError(f"--baseline-src {src}: no roboscale/runtime in it")
        env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
    return endpoint_pair([sys.executable, str(BASELINES / "runtime_echo.py")], count, env=env)


def lowlatency_pair(count: int) -> EchoRun:
    """The bridge's echo (native path) on Zenoh's lowlatency transport."""
    return runtime_pair(count, "native", transport="lowlatency")


def ratio_goal_sizes(system: str) -> dict[int, float]:
    """The sizes of RATIO_GOALS measured (--sizes) that `system` carries: the
    lowlatency transport only those up to its cap."""
    from roboscale.runtime.zenoh_config import LOWLATENCY_MAX_PAYLOAD

    most = LOWLATENCY_MAX_PAYLOAD if system == LOWLAT else None
    return {
        size: bound
        for size, bound in RATIO_GOALS.items()
        if size in SIZES and (most is None or size <= most)
    }


def ratio_goal_name(system: str, size: int) -> str:
    suffix = ", lowlatency transport" if system == LOWLAT else ""
    return f"between processes p50 / rospy p50, {size} B{suffix}"


def rospy_pair(count: int) -> EchoRun:
    if not Path(SYSTEM_PYTHON).exists():
        raise UserError("ROS 1 is not installed", hint="sudo make ros1")
    program = [SYSTEM_PYTHON, str(BASELINES / "rospy_echo.py")]
    with tempfile.TemporaryDirectory(prefix="roboscale-rospy-") as tmp:
        core = Roscore(Path(tmp))
        try:
            env = ros_env(core.env)
            return measured_pair([*program, "echo"], [*program, "ping"], count, env)
        finally:
            core.stop()


# --------------------------------------------------------------------------- the run


def stop_group_term(proc: subprocess.Popen[Any]) -> None:
    """The echo programs end on SIGTERM."""
    stop_group(proc, signal.SIGTERM, 3.0)


def main() -> None:
    if "--against-dds" in sys.argv[1:]:  # its own options (bench/scale_dds.py)
        sys.modules.setdefault("scale", sys.modules[__name__])  # one copy of this module
        import scale_dds

        scale_dds.main([a for a in sys.argv[1:] if a != "--against-dds"])
        return

    def rounds_option(p: Any) -> None:
        p.add_argument(
            "--against-dds",
            action="store_true",
            help="the echo goal against dds at the demo's sizes, 10 Hz and 1 kHz, "
            "interleaved with the floors (bench/scale_dds.py; its options: "
            "--against-dds --help)",
        )
        p.add_argument("--rounds", type=int, help="only the close latency goals, N rounds")
        p.add_argument(
            "--baseline-src",
            help="with --rounds: also the bridge pair of another checkout's src folder "
            "(the code before a change), interleaved: an A/B in the same minutes",
        )
        p.add_argument(
            "--floor",
            action="store_true",
            help="with --rounds: also the floors in every round, Zenoh's minimal binding "
            "+ event loop and raw Zenoh in Rust (built first)",
        )
        p.add_argument(
            "--sizes",
            type=sizes_option,
            help=f"payload sizes of the echo pairs, comma-separated (default {SIZES})",
        )

    args, n = counted_args(__doc__ or "", FULL, QUICK, rounds_option)
    if args.sizes:
        SIZES[:] = args.sizes
    report = header()
    report["counts"] = n
    report["sizes"] = SIZES
    report["load_average"] = {"start": os.getloadavg()}  # 1, 5, 15 min; and at the end
    print(f"load average: {os.getloadavg()[0]:.2f}", flush=True)
    if args.rounds:
        # scale_rounds imports this module as `scale`: the same one, not a second copy
        # of this script's globals (--sizes).
        sys.modules.setdefault("scale", sys.modules[__name__])
        import scale_rounds

        report["rounds"] = args.rounds
        report["baseline_src"] = args.baseline_src
        rust = zenoh_rs_program() if args.floor else None
        lines = scale_rounds.run(args.rounds, n["echoes"], report, args.baseline_src, rust)
        finish(loaded(report), lines, args, ["by_round"])
        return
    missing: dict[str, str] = {}
    # Built first: a first build keeps both cores busy for minutes, not between two pairs.
    rust = attempt("build of the native baselines", zenoh_rs_program, missing)
    idle = attempt("idle nodes", lambda: idle_nodes(n["idle_nodes"]), missing)
    pubs = attempt("1 Hz publishers", lambda: publishers(n["publishers"], n["publish_s"]), missing)
    echoes = echo_runs(n["echoes"], rust, missing)
    if idle:
        print(f"\n{idle['nodes']:,} idle in-process nodes, one fresh process:")
        table([idle], ["nodes", "start_us_per_node", "rss_bytes_per_node", "heap_bytes_per_node"])
    if pubs:
        what = f"{pubs['nodes']:,} nodes publishing at 1 Hz for {pubs['seconds']:g} s"
        print(f"\n{what}, latency publish→callback:")
        row = {**percentiles("runtime in-process", pubs["latency"]), "published": pubs["published"]}
        row["delivered"] = row["n"]
        table([row], ["published", "delivered", "p50_us", "p99_us", "max_us", "mean_us"])
    rows = echo_rows(echoes)
    print("\necho round trip, one message at a time (µs), context switches per round trip:")
    table(rows, ECHO_COLUMNS)
    for what, why in missing.items():
        print(f"not available: {what}: {why}")
    floor = {system: floor_ratios(rows, system) for system in (FLOOR, NATIVE_FLOOR, RUST)}
    print("\nfloors of the bridge/rospy goal, p50 / rospy p50:")
    for system, ratios in floor.items():
        print(f"  {system}: " + ", ".join(f"{size} B {r:.2f}" for size, r in ratios.items()))
    raw = {k: None if v is None else v.rtt_us for k, v in echoes.items()}
    report["raw"] = {"idle": idle, "publishers": pubs, "echo_us": raw}
    report["results"] = {"echo": rows, "not_available": missing, "floor_over_rospy": floor}
    finish(loaded(report), goals(idle, echoes), args)


def sizes_option(text: str) -> list[int]:
    try:
        sizes = [int(part) for part in text.split(",")]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: payload sizes in bytes, e.g. 11,4250")
    return sizes


def loaded(report: dict[str, Any]) -> dict[str, Any]:
    """The report with the load average at the end of the measurements (printed)."""
    report["load_average"]["end"] = os.getloadavg()
    print(f"\nload average (1, 5, 15 min) at the start: {report['load_average']['start']}")
    print(f"load average at the end: {report['load_average']['end']}")
    return report


ECHO_COLUMNS = ["system", "bytes", "n", "p50_us", "p99_us", "max_us", "mean_us"]
ECHO_COLUMNS += ["cs_echo_per_rt", "cs_ping_per_rt", "cpu_echo_us_per_rt", "cpu_ping_us_per_rt"]


def echo_runs(count: int, rust: Path | None, missing: dict[str, str]) -> dict[str, EchoRun | None]:
    return {
        "runtime in-process": inprocess_run(count * 10),
        BRIDGE: attempt("runtime bridge echo", lambda: runtime_pair(count, "native"), missing),
        PY_LINK: attempt(
            "runtime bridge echo, python link", lambda: runtime_pair(count, "python"), missing
        ),
        LOWLAT: attempt("runtime bridge echo, lowlatency", lambda: lowlatency_pair(count), missing),
        ROSPY: attempt("rospy echo", lambda: rospy_pair(count), missing),
        "zenoh-python peer": attempt("zenoh echo", lambda: zenoh_pair(count), missing),
        FLOOR: attempt("zenoh loop echo", lambda: zenoh_pair(count, "-loop"), missing),
        NATIVE_FLOOR: rust
        and attempt("zenoh native loop echo", lambda: zenoh_native_pair(count), missing),
        RUST: rust and attempt("zenoh Rust echo", lambda: zenoh_rs_pair(count, rust), missing),
    }


def echo_rows(echoes: dict[str, EchoRun | None]) -> list[dict[str, Any]]:
    """One row per system and size (a program that printed fewer sizes: those missing)."""
    return [
        {**percentiles(system, run.rtt_us[size]), "bytes": size, **run.per_round_trip()}
        for system, run in echoes.items()
        if run
        for size in SIZES
        if run.rtt_us.get(size)
    ]


def p50_of(rows: list[dict[str, Any]]) -> dict[tuple[str, int], float]:
    return {(r["system"], r["bytes"]): r["p50_us"] for r in rows}


def floor_ratios(rows: list[dict[str, Any]], system: str) -> dict[int, float]:
    """Per size: a floor (no runtime code) against rospy, measured side by side."""
    p50 = p50_of(rows)
    pairs = {s: (p50.get((system, s)), p50.get((ROSPY, s))) for s in SIZES}
    return {s: f / r for s, (f, r) in pairs.items() if f is not None and r}


def goals(idle: dict[str, Any] | None, echoes: dict[str, EchoRun | None]) -> list[dict[str, Any]]:
    """Judged by bench/goals.py: latency goals by the interval of their p50 (or ratio of
    p50s) from every round trip measured, memory on its one measurement."""
    memory_target = judge.at_most(NODE_BYTES_GOAL, f"<= {NODE_BYTES_GOAL:,}")
    memory = "memory per idle node, RSS (bytes)"
    out = [
        judge.single(memory, idle["rss_bytes_per_node"], memory_target, f"{idle['nodes']:,} nodes")
        if idle
        else judge.not_measured(memory, memory_target)
    ]
    inproc = echoes.get("runtime in-process")
    for size in INPROC_GOAL_SIZES:
        if size not in SIZES:
            continue  # not among the sizes asked for (--sizes)
        goal, target = f"in-process echo p50, {size} B (µs)", judge.at_most(INPROC_P50_GOAL_US)
        samples = inproc.rtt_us.get(size) if inproc else None
        out.append(
            judge.latency(goal, samples, target) if samples else judge.not_measured(goal, target)
        )
    rospy = echoes.get(ROSPY)
    for system in (BRIDGE, LOWLAT):
        bridge = echoes.get(system)
        for size, bound in ratio_goal_sizes(system).items():
            goal, target = ratio_goal_name(system, size), judge.at_most(bound)
            ours = bridge.rtt_us.get(size) if bridge else None
            anchor = rospy.rtt_us.get(size) if rospy else None
            out.append(
                judge.latency_ratio(goal, ours, anchor, target)
                if ours and anchor
                else judge.not_measured(goal, target)
            )
    return out


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:  # every child was already stopped on the way out
        sys.exit("interrupted")
