"""What ran while a 1 kHz round trip stalled? (diagnosis)

    .venv/bin/python bench/stalls.py --out /tmp/st-1 [--json bench/out/stalls/x.json]
        -- bench SPEC.yaml --backend native-proc,zenoh

Runs `roboscale ARGS... --out OUT/results --replace` under `perf record -k mono` of every
CPU's scheduler switches (the same clock as the trials' records), while a thread samples
each CPU's steal time (/proc/stat) every millisecond. Then, for every trial, each stall
(a round trip over `--stall-ms`, consecutive ones grouped into a run) is set beside what
the CPUs ran in its window: time per task, the kernel's memory monitor (kdamond) apart,
and the steal counted. The same is counted over every window of the trial's length
(`chance`), so a cause that merely runs often is not taken for one that lines up with
the stalls. Load average before and after. Diagnosis, not a goal: nothing passes or fails.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from common import finish, header, parser, table
from roboscale.records.folder import ResultsFolder

TICK_NS = 10_000_000  # /proc/stat counts in USER_HZ (100 Hz) ticks
LINE = re.compile(r"^\s*(\d+\.\d+)\s+\[(\d+)\]\s+(.+?)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s*$")


class StealSampler:
    """Each CPU's cumulative steal (ticks) every `period_s`, stamped on CLOCK_MONOTONIC,
    and every process's command line (to name what ran). Reading /proc/stat costs about
    1 ms of CPU here (its interrupt lines): a 1 ms period took half a core, itself a
    cause of stalls, hence 100 ms."""

    def __init__(self, period_s: float = 0.1) -> None:
        self.period_s = period_s
        self.rows: list[tuple[int, ...]] = []
        self.commands: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steal-sampler")

    def __enter__(self) -> StealSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with open("/proc/stat", "rb") as f:
            while not self._stop.wait(self.period_s):
                f.seek(0)
                cpus = [ln.split() for ln in f.read().splitlines() if ln[:3] == b"cpu"]
                steal = tuple(int(c[8]) for c in cpus[1:])
                self.rows.append((time.monotonic_ns(), *steal))
                if len(self.rows) % 10 == 1:
                    self._note_commands()

    def _note_commands(self) -> None:
        for d in Path("/proc").iterdir():
            if d.name.isdigit() and int(d.name) not in self.commands:
                try:
                    raw = (d / "cmdline").read_bytes()
                except OSError:
                    continue
                self.commands[int(d.name)] = raw.replace(b"\0", b" ").decode(errors="replace")[:160]

    def in_window(self, start_ns: int, end_ns: int) -> list[int]:
        """Steal ticks per CPU counted between the samples around the window."""
        a = np.array(self.rows, dtype=np.int64)
        if len(a) < 2:
            return []
        i = max(int(np.searchsorted(a[:, 0], start_ns)) - 1, 0)
        j = min(int(np.searchsorted(a[:, 0], end_ns)), len(a) - 1)
        return [int(x) for x in a[j, 1:] - a[i, 1:]]


def loadavg() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def vmstat() -> dict[str, int]:
    rows = (ln.split() for ln in Path("/proc/vmstat").read_text().splitlines())
    return {k: int(v) for k, v in rows}


def run_traced(out: Path, argv: list[str]) -> None:
    """`roboscale ARGV` under perf's record of every CPU's scheduler switches."""
    perf = subprocess.Popen(
        ["perf", "record", "-q", "-k", "mono", "-a", "-e", "sched:sched_switch",
         "-e", "sched:sched_wakeup", "-o", str(out / "sched.data")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)  # perf's buffers are mapped on every CPU before the first trial
    try:
        roboscale = str(Path(sys.executable).with_name("roboscale"))
        cmd = [roboscale, *argv, "--out", str(out / "results"), "--replace"]
        with subprocess.Popen(cmd, stdout=subprocess.DEVNULL) as lab:
            (out / "controller.pid").write_text(str(lab.pid))
            lab.wait()
    finally:
        perf.send_signal(signal.SIGINT)
        perf.wait(timeout=120)


def intervals(out: Path) -> list[tuple[float, float, int, str, float]]:  # sorted by end
    """(start s, end s, cpu, task, scheduling delay ms): every run of a task on a CPU."""
    text = subprocess.run(
        ["perf", "sched", "timehist", "-i", str(out / "sched.data")],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    rows = []
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            end, cpu, task = float(m[1]), int(m[2]), m[3]
            rows.append((end - float(m[6]) / 1e3, end, cpu, task, float(m[5])))
    rows.sort(key=lambda r: r[1])
    return rows


def owner(task: str, agents: set[int]) -> str:
    """`agent` for the trial's node processes, else the task's name without its ids."""
    ids = re.findall(r"\[(\d+)(?:/(\d+))?\]", task)
    pid = int(ids[-1][1] or ids[-1][0]) if ids else -1
    if pid in agents:
        return "agent"
    if pid == os.getpid():
        return "probe"
    name = re.sub(r"\[.*$", "", task)
    return f"{name}[{pid}]" if name.startswith(("python", "roboscale")) else name


LONGEST_S = 1.0  # no run of a task on a CPU is longer (at 1 kHz, far shorter)


def overlapping(
    runs: list[tuple[float, float, int, str, float]], ends: list[float], a: float, b: float
) -> list[tuple[float, float, int, str, float]]:
    """The runs (sorted by end) that overlap [a, b]."""
    import bisect

    i = bisect.bisect_left(ends, a)
    j = bisect.bisect_right(ends, b + LONGEST_S)
    return [r for r in runs[i:j] if r[1] > a and r[0] < b]


def occupancy(
    runs: list[tuple[float, float, int, str, float]], agents: set[int], a: float, b: float
) -> dict[str, float]:
    """Milliseconds each owner ran in [a, b] (seconds), over every CPU."""
    ms: dict[str, float] = defaultdict(float)
    for s, e, _cpu, task, _delay in runs:
        if e > a and s < b:
            ms[owner(task, agents)] += (min(e, b) - max(s, a)) * 1e3
    return dict(ms)


KERNEL = re.compile(r"^(kdamond|khugepaged|kcompactd|kworker|ksoftirqd|rcu_|migration|kswapd)")
LAB = ("probe", "perf")  # this probe and its tracer
CULPRITS = ("other processes", "kdamond", "other kernel threads", "this run's controller",
            "the lab", "none")  # fmt: skip
CONTROLLER = {"pid": -1}  # this run's `roboscale` (the lab's controller)


def culprit(ran_ms: dict[str, float]) -> str:
    """Who held the CPUs beside the agents: the largest of kdamond, other kernel threads,
    the lab (its controller, this probe, perf) and other processes; `none` when nothing
    else ran for 0.5 ms."""
    groups: dict[str, float] = defaultdict(float)
    for who, ms in ran_ms.items():
        if who in ("agent", "<idle>"):
            continue
        if who == f"roboscale[{CONTROLLER['pid']}]":
            groups["this run's controller"] += ms
        elif who.startswith("kdamond"):
            groups["kdamond"] += ms
        elif KERNEL.match(who):
            groups["other kernel threads"] += ms
        elif who in LAB:
            groups["the lab"] += ms
        else:
            groups["other processes"] += ms
    top = max(groups.items(), key=lambda kv: kv[1], default=("none", 0.0))
    return top[0] if top[1] >= 0.5 else "none"


def top(ms: dict[str, float], n: int = 6) -> list[tuple[str, float]]:
    return sorted(ms.items(), key=lambda kv: -kv[1])[:n]


def stall_runs(rtt_ms: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """[first, last] index of each run of consecutive round trips over `threshold`."""
    out: list[tuple[int, int]] = []
    for i in np.flatnonzero(rtt_ms > threshold):
        if out and out[-1][1] == i - 1:
            out[-1] = (out[-1][0], int(i))
        else:
            out.append((int(i), int(i)))
    return out


def analyse_trial(
    folder: ResultsFolder,
    trial: str,
    runs: list[tuple[float, float, int, str, float]],
    steal: StealSampler,
    stall_ms: float,
) -> dict[str, Any]:
    meta = folder.metadata(trial)
    agents = {n.pid for n in meta.nodes}
    t = folder.records(trial).to_pandas()
    t = t.dropna(subset=["t_received"])
    sent, echoed, back = (t[c].to_numpy(np.int64) for c in ("t_sent", "t_echoed", "t_received"))
    ends = [r[1] for r in runs]
    runs = overlapping(runs, ends, sent[0] / 1e9 - 0.1, back[-1] / 1e9 + 0.1)
    ends_in = [r[1] for r in runs]
    rtt_ms = (back - sent) / 1e6
    stalls = []
    for i, j in stall_runs(rtt_ms, stall_ms):
        a, b = sent[i] / 1e9, back[j] / 1e9
        near = overlapping(runs, ends_in, a, b)
        busy = occupancy(near, agents, a, b)
        delays = [
            d for s, e, _c, task, d in near if a <= e and s <= b and owner(task, agents) == "agent"
        ]
        stalls.append({
            "t_s": round(a - sent[0] / 1e9, 4), "round_trips": j - i + 1,
            "worst_ms": round(float(rtt_ms[i : j + 1].max()), 3),
            "out_ms": round(float((echoed[i] - sent[i]) / 1e6), 3),
            "back_ms": round(float((back[i] - echoed[i]) / 1e6), 3),
            "window_ms": round((b - a) * 1e3, 3),
            "steal_ticks": steal.in_window(int(sent[i]), int(back[j])),
            "ran_ms": {k: round(float(v), 3) for k, v in top(busy)},
            "agent_max_sched_delay_ms": round(max(delays, default=0.0), 3),
        })  # fmt: skip
        stalls[-1]["culprit"] = culprit(busy)  # over everything that ran, not the top six
        # Waited for a CPU: an agent thread was runnable, not running, for half the stall.
        stalls[-1]["waited_for_cpu"] = (
            stalls[-1]["agent_max_sched_delay_ms"] >= 0.5 * (stalls[-1]["worst_ms"])
        )
    return {
        "trial": trial, "backend": meta.backend, "payload": meta.params.payload,
        "rate_hz": meta.params.rate_hz, "round_trips": len(rtt_ms),
        "p50_us": round(float(np.median(rtt_ms)) * 1e3, 1),
        "over_2ms": int((rtt_ms > 2).sum()), "over_400us": int((rtt_ms > 0.4).sum()),
        "stall_runs": stalls,
        "chance": chance(runs, agents, sent, back, stalls),
    }  # fmt: skip


def chance(
    runs: list[tuple[float, float, int, str, float]],
    agents: set[int],
    sent: np.ndarray,
    back: np.ndarray,
    stalls: list[dict[str, Any]],
) -> dict[str, float]:
    """Share of the trial's round trips (stalled or not) in whose window kdamond ran, or
    another process than the agents ran for over 1 ms: what a stall would show by chance."""
    if not stalls:
        return {}
    step = max(len(sent) // 400, 1)
    hits = {"kdamond": 0, "other_over_1ms": 0}
    ends = [r[1] for r in runs]
    for k in range(0, len(sent), step):
        a, b = sent[k] / 1e9, back[k] / 1e9
        busy = occupancy(overlapping(runs, ends, a, b), agents, a, b)
        hits["kdamond"] += busy.get("kdamond.0", 0) > 0
        others = sum(v for o, v in busy.items() if o not in ("agent", "<idle>"))
        hits["other_over_1ms"] += others > 1.0
    n = len(range(0, len(sent), step))
    return {k: round(float(v) / n, 4) for k, v in hits.items()}


def main() -> None:
    p = parser(__doc__ or "", judged=False)
    p.add_argument("--out", type=Path, required=True, help="folder for perf data and results")
    p.add_argument(
        "--stall-ms",
        type=float,
        default=2.0,
        help="a round trip over this is a stall (default 2.0)",
    )
    p.add_argument("--analyse-only", action="store_true", help="read OUT again, run nothing")
    p.add_argument("roboscale_args", nargs="*", help="after --: the roboscale command")
    args = p.parse_args()
    report = header()
    args.out.mkdir(parents=True, exist_ok=True)
    before, vm0 = loadavg(), vmstat()
    with StealSampler() as steal:
        if not args.analyse_only:
            run_traced(args.out, args.roboscale_args)
    after, vm1 = loadavg(), vmstat()
    print(f"load average before {before}, after {after}")
    runs = intervals(args.out)
    CONTROLLER["pid"] = int((args.out / "controller.pid").read_text())
    folder = ResultsFolder(args.out / "results")
    trials = [analyse_trial(folder, t, runs, steal, args.stall_ms) for t in folder.trials_on_disk()]
    rows = []
    for tr in trials:
        print(f"\n{tr['trial']} {tr['backend']} {tr['payload']} {tr['rate_hz']} Hz: "
              f"p50 {tr['p50_us']} µs, {tr['over_2ms']} of {tr['round_trips']} over 2 ms, "
              f"chance {tr['chance']}")  # fmt: skip
        for s in tr["stall_runs"]:
            print(f"  t={s['t_s']:8.3f} s x{s['round_trips']:<2} worst {s['worst_ms']:6.2f} ms "
                  f"(out {s['out_ms']:.2f}, back {s['back_ms']:.2f}) steal {s['steal_ticks']} "
                  f"agent delay {s['agent_max_sched_delay_ms']} ran {s['ran_ms']}")  # fmt: skip
        sr = tr["stall_runs"]
        rows.append({k: tr[k] for k in ("trial", "backend", "payload", "p50_us", "over_2ms")}
                    | {"stall_runs": len(sr),
                       "waited_for_cpu": sum(s["waited_for_cpu"] for s in sr),
                       "with_steal": sum(sum(s["steal_ticks"]) > 0 for s in sr)}
                    | {c: sum(s["culprit"] == c for s in sr) for c in CULPRITS})  # fmt: skip
    print()
    table(rows, list(rows[0]) if rows else ["trial"])
    named = {o for tr in trials for s in tr["stall_runs"] for o in s["ran_ms"] if "[" in o}
    commands = {o: steal.commands.get(int(o.split("[")[1].rstrip("]")), "?") for o in named}
    for o, c in sorted(commands.items()):
        print(f"{o}: {c}")
    vm_delta = {k: vm1[k] - vm0.get(k, 0) for k in vm1 if vm1[k] != vm0.get(k, 0)}
    report["raw"] = {
        "trials": trials,
        "vmstat_delta": vm_delta,
        "steal_samples": len(steal.rows),
        "commands": commands,
    }
    report["load_average"] = {"before": before, "after": after}
    report["results"] = rows
    finish(report, [], args)


if __name__ == "__main__":
    sys.exit(main())
