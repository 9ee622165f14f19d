"""Soak: the runtime at 1 kHz for an hour, in-process and process nodes, durable topics.

One controller process (this script) runs a runtime with a 1 kHz source on the durable
topic /soak/down, two in-process durable subscribers of it, and one in-process durable
subscriber of /soak/up. Its Zenoh bridge exports /soak/down and imports /soak/up. Two
process nodes, forked from a zygote, connect to it: remote_a durably subscribes to
/soak/down; remote_b does too and publishes /soak/up at 1 kHz, exported durably. Every
payload is 8 bytes, the sequence number. So durable topics are checked in-process
(source -> local_a, local_b), from the controller to processes (-> remote_a, remote_b)
and from a process to in-process nodes (remote_b -> up_reader).

Goals (checked with --check, exit 1 on a miss):
- RSS growth of every node process (the controller with its in-process nodes, remote_a,
  remote_b), from the sample at the end of the warm-up to the last sample: <= 5 %;
- every subscriber: every sequence number published arrives exactly once (0 lost,
  0 duplicated), counted in O(1) memory per subscriber (bench/baselines/soak_nodes.py).

The JSON (--json) is rewritten at every sample with what was measured so far, so an
interrupted run still leaves its series.

    .venv/bin/python bench/soak.py --json bench/out/soak.json --check      # one hour
    .venv/bin/python bench/soak.py --quick --check                         # 25 s (CI)
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import goals as judge
from common import finish, header, parser, save, table, wait_for
from restart_baselines import BASELINES
from roboscale.backends.base import free_port
from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import NodeHandle, NodeRecipe
from roboscale.runtime.process import ProcessNode
from roboscale.runtime.supervisor import ChildSpec, Recipe, Supervisor
from roboscale.runtime.zygote import Zygote

sys.path.insert(0, str(BASELINES))
from soak_nodes import Reader, SeqSource, Tally  # bench/baselines

RSS_GOAL_PCT = 5.0
DOWN, UP = "/soak/down", "/soak/up"
DRAIN_S = 30.0  # after the sources stop, for the last messages to arrive
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Settings:
    duration_s: float
    warmup_s: float
    sample_s: float
    every_s: float
    retain: int


FULL = Settings(duration_s=3600.0, warmup_s=120.0, sample_s=30.0, every_s=60.0, retain=10_000)
QUICK = Settings(duration_s=25.0, warmup_s=8.0, sample_s=1.0, every_s=5.0, retain=2_000)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * PAGE


class Soak:
    """The running system; `sample()` reads it, `drain()` stops the sources and counts."""

    def __init__(self, settings: Settings, work: Path, stack: contextlib.ExitStack) -> None:
        self.work = work
        self.go = False
        self.stopping = False
        self.events: dict[str, int] = {}
        self.tallies = {"local_a": Tally(), "local_b": Tally(), "up_reader": Tally()}
        rt = self.rt = Runtime().start()
        stack.callback(rt.close)
        rt.subscribers.append(self._on_event)
        source = NodeRecipe("source", SeqSource, self._source_params())
        readers = [
            NodeRecipe(name, Reader, {"tally": t, "topic": UP if name == "up_reader" else DOWN})
            for name, t in self.tallies.items()
        ]
        sup = self.sup = Supervisor(rt, "soak", [*map(ChildSpec, readers), ChildSpec(source)])
        rt.wait(sup.start_async())
        stack.callback(lambda: rt.wait(sup.stop_async(), timeout_s=30.0))
        listen = f"tcp/127.0.0.1:{free_port()}"
        raw = {"listen": [listen], "export": [DOWN], "import": [UP], "durable": [DOWN, UP]}
        config = bridge_config({**raw, "retain": settings.retain})
        bridge = Bridge(rt, config, cursors={UP: work / "cursor-up"}).open()
        stack.callback(bridge.close)
        env = {"PYTHONPATH": str(BASELINES)}
        zygote = stack.enter_context(Zygote(["zenoh", "soak_nodes"], env=env))
        self.remote = {
            name: Recipe(
                name, ProcessNode,
                (name, "soak_nodes:process_node", self._remote_config(name, listen, settings)),
                {"zygote": zygote, "env": env, "log": work / f"{name}.log",
                 "ready_timeout_s": 60.0},
            )
            for name in ("remote_a", "remote_b")
        }  # fmt: skip
        procs = self.procs = Supervisor(rt, "procs", [ChildSpec(p) for p in self.remote.values()])
        rt.wait(procs.start_async(), timeout_s=120.0)
        stack.callback(lambda: rt.wait(procs.stop_async(), timeout_s=30.0))
        self.go = True

    def _source_params(self) -> dict[str, Any]:
        return {"topic": DOWN, "go": lambda: self.go, "stop": lambda: self.stopping}

    def _remote_config(self, name: str, listen: str, settings: Settings) -> dict[str, Any]:
        config = {"connect": listen, "read": DOWN, "cursor": str(self.work / f"cursor-{name}")}
        config["tally"] = str(self.work / f"{name}.json")
        if name == "remote_b":
            config |= {"write": UP, "stop": str(self.work / "stop"), "retain": settings.retain}
        return config

    def _on_event(self, event: SupervisionEvent) -> None:
        self.events[event.kind] = self.events.get(event.kind, 0) + 1

    def pids(self) -> dict[str, int | None]:
        running = {n: self.procs.instance(n) for n in self.remote}  # new at each restart
        return {"controller": os.getpid(), **{n: p.pid if p else None for n, p in running.items()}}

    def source_node(self) -> Any:
        """The source's running node (each restart builds a new instance), or None."""
        handle: NodeHandle | None = self.sup.instance("source")
        return None if handle is None else handle.node

    def remote_state(self, name: str) -> dict[str, Any]:
        try:
            state: dict[str, Any] = json.loads((self.work / f"{name}.json").read_text())
        except (OSError, ValueError):
            return {"tally": Tally().as_dict(), "published": 0, "stopped": False}
        return state

    def published(self) -> dict[str, int]:
        node = self.source_node()
        down = node.sent if isinstance(node, SeqSource) else 0
        return {DOWN: down, UP: int(self.remote_state("remote_b")["published"])}

    def all_tallies(self) -> dict[str, Tally]:
        remote = {n: Tally.from_dict(self.remote_state(n)["tally"]) for n in self.remote}
        return {**self.tallies, **remote}

    def sample(self, t_s: float) -> dict[str, Any]:
        rss = {}
        for name, pid in self.pids().items():
            with contextlib.suppress(OSError, TypeError):
                rss[name] = rss_bytes(pid)  # type: ignore[arg-type]
        received = {n: t.received for n, t in self.all_tallies().items()}
        return {"t_s": round(t_s, 1), "rss": rss, "published": self.published(),
                "received": received, "pids": self.pids()}  # fmt: skip

    def drain(self) -> dict[str, Any]:
        """Stop both sources, wait for the last messages, count every subscriber."""
        self.stopping = True
        (self.work / "stop").touch()
        wait_for(lambda: self._stopped(), DRAIN_S)
        published = self.published()
        topic_of = {"up_reader": UP}

        def complete() -> bool:
            tallies = self.all_tallies()
            return all(t.next > published[topic_of.get(n, DOWN)] for n, t in tallies.items())

        wait_for(complete, DRAIN_S)
        rows = []
        for name, tally in self.all_tallies().items():
            topic = topic_of.get(name, DOWN)
            where = "in-process" if name.startswith("local") else "across processes"
            counts = tally.counts(published[topic])
            rows.append({"subscriber": name, "topic": topic, "path": where,
                         "published": published[topic], **counts})  # fmt: skip
        return {"published": published, "subscribers": rows, "events": dict(self.events)}

    def _stopped(self) -> bool:
        node = self.source_node()
        return (
            isinstance(node, SeqSource)
            and node.stopped
            and self.remote_state("remote_b")["stopped"]
        )


def rss_growth(series: list[dict[str, Any]], warmup_s: float) -> list[dict[str, Any]]:
    """Per process: RSS at the first sample after the warm-up and at the last one."""
    after = [s for s in series if s["t_s"] >= warmup_s]
    if len(after) < 2:
        return []
    first, last = after[0], after[-1]
    rows = []
    for name, base in first["rss"].items():
        end = last["rss"].get(name)
        same = first["pids"].get(name) == last["pids"].get(name)
        growth = None if end is None or not same else 100.0 * (end / base - 1.0)
        rows.append({"process": name, "baseline_MB": base / 1e6, "end_MB": (end or 0) / 1e6,
                     "growth_pct": growth, "same_pid": same})  # fmt: skip
    return rows


def run(settings: Settings, report: dict[str, Any], json_path: Path | None) -> dict[str, Any]:
    series: list[dict[str, Any]] = []
    report["raw"] = {"series": series}
    report["partial"] = True
    with tempfile.TemporaryDirectory(prefix="roboscale-soak-") as tmp, contextlib.ExitStack() as st:
        soak = Soak(settings, Path(tmp), st)
        t0 = time.monotonic()
        next_print = 0.0
        print(f"soak: {settings.duration_s:g} s at 1 kHz; warm-up {settings.warmup_s:g} s")
        while True:
            elapsed = time.monotonic() - t0
            series.append(soak.sample(elapsed))
            if elapsed >= next_print or elapsed >= settings.duration_s:
                progress(series[-1])
                next_print += settings.every_s
            if json_path is not None:
                save(report, json_path)
            if elapsed >= settings.duration_s:
                break
            due = t0 + min(len(series) * settings.sample_s, settings.duration_s)
            time.sleep(max(0.0, due - time.monotonic()))
        counted = soak.drain()
    report["partial"] = False
    rate = counted["published"][DOWN] / elapsed
    return {**counted, "rss": rss_growth(series, settings.warmup_s), "seconds": elapsed,
            "source_rate_hz": rate}  # fmt: skip


def progress(s: dict[str, Any]) -> None:
    rss = " ".join(f"{n}={v / 1e6:.1f}MB" for n, v in s["rss"].items())
    received = " ".join(f"{n}={v}" for n, v in s["received"].items())
    pub = s["published"]
    print(f"[{s['t_s']:7.1f} s] published down={pub[DOWN]} up={pub[UP]}  received {received}"
          f"  rss {rss}", flush=True)  # fmt: skip


def goals(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Memory growth on its one measurement per process, the durable counts exactly
    (bench/goals.py)."""
    grown = [r["growth_pct"] for r in result["rss"]]
    worst = None if not grown or None in grown else max(grown)
    out = [judge.single("RSS growth after warm-up, worst node process (%)", worst,
                        judge.at_most(RSS_GOAL_PCT), f"{len(grown)} processes")]  # fmt: skip
    for row in result["subscribers"]:
        measured = (row["lost"], row["duplicated"])
        out.append(judge.exact(f"durable lost, duplicated: {row['subscriber']} ({row['path']})",
                               f"{measured[0]}, {measured[1]}", "0, 0",
                               measured == (0, 0) and row["published"] > 0,
                               f"{row['published']:,} published"))  # fmt: skip
    return out


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--quick", action="store_true", help="25 s instead of an hour (CI)")
    p.add_argument("--duration", type=float, help="seconds of load (default 3600, quick 25)")
    p.add_argument("--warmup", type=float, help="seconds before the RSS baseline")
    p.add_argument("--sample", type=float, help="seconds between samples")
    p.add_argument("--every", type=float, help="seconds between progress lines")
    args = p.parse_args()
    base = QUICK if args.quick else FULL
    settings = Settings(
        duration_s=args.duration or base.duration_s,
        warmup_s=args.warmup if args.warmup is not None else base.warmup_s,
        sample_s=args.sample or base.sample_s,
        every_s=args.every or base.every_s,
        retain=base.retain,
    )
    if settings.warmup_s >= settings.duration_s:
        p.error("--warmup must be shorter than --duration")  # exit code 2
    report = header()
    report["settings"] = asdict(settings)
    result = run(settings, report, args.json)
    report["results"] = result
    print(f"\nsoak done after {result['seconds']:.0f} s; published {result['published']} "
          f"(the in-process source at {result['source_rate_hz']:.0f} Hz)")  # fmt: skip
    print("\nRSS series (MB):")
    names = list(report["raw"]["series"][0]["rss"])
    table([{"t_s": s["t_s"], **{n: s["rss"].get(n, 0) / 1e6 for n in names}}
           for s in report["raw"]["series"]], ["t_s", *names])  # fmt: skip
    print("\nRSS of each node process, warm-up baseline to the end:")
    table(result["rss"], ["process", "baseline_MB", "end_MB", "growth_pct", "same_pid"])
    print("\ndurable topics, every subscriber (counted by sequence number):")
    table(result["subscribers"], ["subscriber", "topic", "path", "published", "received",
                                  "lost", "duplicated"])  # fmt: skip
    print(f"supervision events: {result['events']}")
    finish(report, goals(result), args)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted")
