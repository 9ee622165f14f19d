"""Chaos at scale: 200 kills/s for 60 s on 100 workers that durably subscribe to one topic.

One controller process (this script) runs the tree

    /chaos                  one_for_one
      /inproc/w0 .. w89     in-process nodes, durable subscribers of /data
      /procs/w90 .. w99     process nodes forked from a zygote, durable subscribers of
                            /data through the Zenoh bridge (bench/baselines/runtime_durable.py)
      /source               publishes 1, 2, ... on /data at --rate-hz (default 100),
                            exported durably on the controller's bridge

and the runtime's chaos monkey (runtime/chaos.py, as `roboscale chaos` runs it) kills a
random running worker --kills-per-s times a second for --duration seconds: in-process
workers by an exception raised in one of their callbacks (reason crash), process workers
by SIGKILL. Every worker is permanent; its supervisor restarts it and a durable inbox or
cursor file carries it over the restart. Each in-process worker tallies what it is handed
(bench/baselines/soak_nodes.py); each process worker appends "<pid> <seq>" to its own
log with one unbuffered write per message.

Goals (--check exits 1 on a miss): every kill asked for was made, the tree and every
worker are running at the end, and every worker received every sequence number exactly
once (0 lost, 0 duplicated). Process workers import /data with --delivery (default
at_least_once: the message in flight at a SIGKILL comes again, and the worker, idempotent
by sequence, logs it as "again" if it had acted on it already; `redelivered` counts those).
With at_most_once the runtime documents one exception: the message handed over at the
instant of a SIGKILL, before its callback acted, is lost (docs/runtime.md); such losses
are counted apart as `lost_in_flight` but still count as lost.

    .venv/bin/python bench/chaos_scale.py --json bench/out/chaos-scale.json --check
    .venv/bin/python bench/chaos_scale.py --quick --check      # 10 s (CI)
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import goals as judge
from common import finish, header, parser, table, wait_for
from restart_baselines import BASELINES, percentiles
from roboscale.backends.base import free_port
from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.chaos import ChaosMonkey, ChaosReport, ChaosSpec, Method
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.node import NodeHandle, NodeRecipe
from roboscale.runtime.process import ProcessNode
from roboscale.runtime.supervisor import ChildSpec, Recipe, Supervisor, SupervisorRecipe
from roboscale.runtime.zygote import Zygote

sys.path.insert(0, str(BASELINES))
from soak_nodes import Reader, SeqSource, Tally  # bench/baselines

TOPIC = "/data"  # the topic of runtime_durable:sink
RETAIN = 100_000  # more than a full run publishes: nothing falls out of retention
NEVER_GIVE_UP = Intensity(max_restarts=10**9, period_s=1.0)
SETTLE_S = 30.0  # after the last kill, for every restart to finish
DRAIN_S = 30.0  # after the source stopped, for the last messages to arrive
PROGRESS_S = 5.0


def parse_args() -> Any:
    p = parser(__doc__ or "")
    p.add_argument("--quick", action="store_true", help="10 s of chaos instead of 60 (CI)")
    p.add_argument("--duration", type=float, help="seconds of chaos (default 60, quick 10)")
    p.add_argument("--kills-per-s", type=float, default=200.0, help="default 200")
    p.add_argument("--workers", type=int, default=100, help="in all (default 100)")
    p.add_argument("--process-workers", type=int, default=10, help="of them (default 10)")
    p.add_argument("--rate-hz", type=float, default=100.0, help="publish rate (default 100)")
    p.add_argument("--seed", type=int, default=0, help="the monkey's random seed")
    p.add_argument(
        "--delivery",
        choices=["at_least_once", "at_most_once"],
        default="at_least_once",
        help="the process workers' durable import (default at_least_once)",
    )
    args = p.parse_args()
    args.duration = args.duration or (10.0 if args.quick else 60.0)
    if not 0 <= args.process_workers <= args.workers or args.workers < 1:
        p.error("--process-workers must be between 0 and --workers (>= 1)")
    if args.kills_per_s <= 0 or args.rate_hz <= 0 or args.duration <= 0:
        p.error("--kills-per-s, --rate-hz and --duration must be > 0")
    return args


class ChaosRun:
    """The tree, its bridge and zygote; `run_monkey()` then `count()`."""

    def __init__(self, args: Any, work: Path, stack: contextlib.ExitStack) -> None:
        self.args, self.work = args, work
        self.go = self.stopping = False
        rt = self.rt = Runtime().start()
        stack.callback(rt.close)
        listen = f"tcp/127.0.0.1:{free_port()}"
        raw = {"listen": [listen], "export": [TOPIC], "durable": [TOPIC], "retain": RETAIN}
        stack.callback(Bridge(rt, bridge_config(raw)).open().close)
        env = {"PYTHONPATH": str(BASELINES)}
        zygote = stack.enter_context(Zygote(["zenoh", "runtime_durable"], env=env))
        n_inproc = args.workers - args.process_workers
        self.tallies = {f"w{i}": Tally() for i in range(n_inproc)}
        inproc = [
            NodeRecipe(name, Reader, {"tally": tally, "topic": TOPIC})
            for name, tally in self.tallies.items()
        ]
        self.logs = {f"w{i}": work / f"w{i}.log" for i in range(n_inproc, args.workers)}
        procs = [
            Recipe(name, ProcessNode,
                   (name, "runtime_durable:sink", self._sink_config(name, listen)),
                   {"zygote": zygote, "env": env, "ready_timeout_s": 60.0})
            for name in self.logs
        ]  # fmt: skip
        params = {"topic": TOPIC, "go": lambda: self.go, "stop": lambda: self.stopping}
        source = NodeRecipe("source", SeqSource, {**params, "period_s": 1 / args.rate_hz})
        self.root = Supervisor(
            rt,
            "chaos",
            [
                ChildSpec(
                    SupervisorRecipe(
                        "inproc", list(map(ChildSpec, inproc)), intensity=NEVER_GIVE_UP
                    )
                ),
                ChildSpec(
                    SupervisorRecipe("procs", list(map(ChildSpec, procs)), intensity=NEVER_GIVE_UP)
                ),
                ChildSpec(source),
            ],
            intensity=NEVER_GIVE_UP,
        )
        rt.wait(self.root.start_async(), timeout_s=120.0 + 5 * len(procs))
        stack.callback(lambda: rt.wait(self.root.stop_async(), timeout_s=60.0))
        self.go = True

    def source_node(self) -> Any:
        """The source's running node (each restart builds a new instance), or None."""
        handle: NodeHandle | None = self.root.instance("source")
        return None if handle is None else handle.node

    def _sink_config(self, name: str, listen: str) -> dict[str, Any]:
        cursor = self.work / f"{name}.cursor"
        log, delivery = str(self.logs[name]), self.args.delivery
        return {"connect": listen, "cursor": str(cursor), "log": log, "delivery": delivery}

    def sent(self) -> int:
        node = self.source_node()
        return node.sent if isinstance(node, SeqSource) else 0

    def run_monkey(self) -> ChaosReport:
        a = self.args
        methods = ((Method.EXCEPTION, 1.0), (Method.SIGKILL, 1.0))
        if not self.logs or not self.tallies:  # only the kind of worker there is
            methods = ((Method.SIGKILL if self.logs else Method.EXCEPTION, 1.0),)
        spec = ChaosSpec(rate=a.kills_per_s, duration=a.duration, methods=methods,
                         target="/*/w*", seed=a.seed, settle=SETTLE_S,
                         log=self.work / "chaos.jsonl")  # fmt: skip
        monkey = ChaosMonkey(self.rt, self.root, spec)
        print(f"chaos: {spec.kills} kills at {spec.rate:g}/s for {spec.duration:g} s on "
              f"{len(monkey.targets)} workers ({len(self.tallies)} in-process, "
              f"{len(self.logs)} process); /data at {a.rate_hz:g} Hz", flush=True)  # fmt: skip
        future = asyncio.run_coroutine_threadsafe(monkey.run(), self.rt.loop)
        t0 = time.monotonic()
        while not future.done():
            with contextlib.suppress(TimeoutError):
                future.result(timeout=PROGRESS_S)
            p = monkey.progress()
            print(f"[{time.monotonic() - t0:6.1f} s] kills={p['kills']} restarts={p['restarts']}"
                  f" pending={p['pending']} published={self.sent()}", flush=True)  # fmt: skip
        return future.result()

    def restart_times(self) -> list[dict[str, Any]]:
        """Kill to new instance ready, ms, per kind of worker (from the monkey's log)."""
        ms: dict[str, list[float]] = {"in-process": [], "process": []}
        for line in (self.work / "chaos.jsonl").read_text().splitlines():
            record = json.loads(line)
            if "restart_ms" in record:
                kind = "process" if record["target"].startswith("/chaos/procs/") else "in-process"
                ms[kind].append(record["restart_ms"])
        rows = [percentiles(kind, samples) for kind, samples in ms.items() if samples]
        return [{k.replace("_us", "_ms"): v for k, v in row.items()} for row in rows]

    def count(self) -> list[dict[str, Any]]:
        """Stop the source, wait for the last messages, count every worker."""
        self.stopping = True
        wait_for(lambda: isinstance(node := self.source_node(), SeqSource) and node.stopped, 10)
        published = self.sent()
        deadline = time.monotonic() + DRAIN_S
        while time.monotonic() < deadline and not self._complete(published):
            time.sleep(0.2)
        rows = [{"worker": name, "kind": "in-process", "published": published,
                 **tally.counts(published), "lost_in_flight": 0, "redelivered": 0}
                for name, tally in self.tallies.items()]  # fmt: skip
        rows += [{"worker": name, "kind": "process", "published": published,
                  **log_counts(log, published)} for name, log in self.logs.items()]  # fmt: skip
        return rows

    def _complete(self, published: int) -> bool:
        if any(t.next <= published for t in self.tallies.values()):
            return False
        return all(log_counts(log, published)["lost"] == 0 for log in self.logs.values())


def log_counts(log: Path, published: int) -> dict[str, Any]:
    """A process worker's counts from its "<pid> <seq>" log; `instances` is how many
    processes wrote to it and `lost_in_flight` how many lost messages were each the one
    after a killed instance's last (handed over as it died)."""
    taken = []
    redelivered = 0
    with contextlib.suppress(FileNotFoundError):
        for line in log.read_text().splitlines():
            fields = line.split()
            if len(fields) == 3 and fields[2] == "again":
                redelivered += 1  # came again after a kill; the idempotent worker skipped it
            elif len(fields) == 2 and fields[1].isdigit():  # a cut line is no message
                taken.append((int(fields[0]), int(fields[1])))
    tally = Tally()
    for _, seq in taken:
        tally.take(seq)
    last = {pid: seq for pid, seq in taken}  # each instance's last message
    final_pid = taken[-1][0] if taken else None
    in_flight = {seq + 1 for pid, seq in last.items() if pid != final_pid}
    never = set(range(1, published + 1)) - {seq for _, seq in taken}
    return {**tally.counts(published), "lost_in_flight": len(never & in_flight),
            "instances": len(last), "redelivered": redelivered}  # fmt: skip


def goals(args: Any, chaos: dict[str, Any], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Counts over the whole run, judged exactly (bench/goals.py)."""
    asked = max(1, round(args.kills_per_s * args.duration))
    running = args.workers - len(chaos["not_running"])
    run = f"{args.duration:g} s, {args.workers} workers"
    out = [
        judge.exact("kills made / asked", f"{chaos['kills']} / {asked}", "all",
                    chaos["kills"] == asked, run),
        judge.exact("workers running at the end, tree alive",
                    f"{running}, {'yes' if chaos['alive'] else 'no'}", f"{args.workers}, yes",
                    chaos["alive"] and not chaos["not_running"] and not chaos["gave_up"], run),
    ]  # fmt: skip
    for kind in ("in-process", "process"):
        mine = [r for r in rows if r["kind"] == kind]
        if not mine:
            continue
        lost, dup = sum(r["lost"] for r in mine), sum(r["duplicated"] for r in mine)
        bad = sum(1 for r in mine if r["lost"] or r["duplicated"])
        met = (lost, dup) == (0, 0) and mine[0]["published"] > 0
        published = sum(r["published"] for r in mine)
        out.append(judge.exact(f"durable lost, duplicated: {len(mine)} {kind} workers (summed; "
                               "workers with any)", f"{lost}, {dup} ({bad} workers)", "0, 0",
                               met, f"{published:,} published"))  # fmt: skip
    return out


def main() -> None:
    args = parse_args()
    report = header()
    report["settings"] = {k: v for k, v in vars(args).items() if k not in ("json", "check")}
    with (
        tempfile.TemporaryDirectory(prefix="roboscale-chaos-") as tmp,
        contextlib.ExitStack() as st,
    ):
        run = ChaosRun(args, Path(tmp), st)
        chaos = run.run_monkey().to_dict()
        restarts = run.restart_times()
        rows = run.count()
    print("\nchaos monkey:")
    table([chaos], ["kills", "skipped", "achieved_rate", "restarts", "restart_p50_ms",
                    "restart_p99_ms", "restart_max_ms", "alive"])  # fmt: skip
    print(
        f"kills by method: {chaos['by_method']}; not running at the end: "
        f"{chaos['not_running'] or 'none'}; gave up: {chaos['gave_up'] or 'none'}"
    )
    print("\nrestart time, kill to new instance ready (ms), per kind of worker:")
    table(restarts, ["system", "n", "p50_ms", "p99_ms", "max_ms", "mean_ms"])
    print("\ndurable /data, per worker with any loss or duplicate (all others: exactly once):")
    bad = [r for r in rows if r["lost"] or r["duplicated"]]
    columns = ["worker", "kind", "published", "received", "lost", "lost_in_flight", "duplicated"]
    table(bad, [*columns, "redelivered"])
    procs = [r for r in rows if r["kind"] == "process"]
    if procs:
        print(f"process workers ({args.delivery}): {sum(r['instances'] for r in procs)} "
              f"instances in all; {sum(r['redelivered'] for r in procs)} came again although "
              "acted on before the kill (skipped by the idempotent worker)")  # fmt: skip
    report["raw"] = {"workers": rows}
    published = rows[0]["published"] if rows else 0
    report["results"] = {"chaos": chaos, "restart_ms": restarts, "published": published}
    finish(report, goals(args, chaos, rows), args)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit("interrupted")
