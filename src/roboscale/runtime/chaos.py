"""The chaos monkey: kill supervised nodes at a given rate and check the tree survives.

Runs on the runtime's loop, inside a launch (a `chaos:` section of the launch
file, or `roboscale launch FILE --chaos rate=200,duration=10,...`). Kills are
paced open-loop on absolute deadlines (`t0 + i/rate`): a late kill is done late,
never dropped, and the run ends at `rate * duration` kills or `duration` seconds,
whichever comes first. Each kill picks a random target (seeded) among the
running leaf children whose path matches a pattern, and a method that applies
to it:

- `exception`: an in-process node runs a callback that raises (through the
  node's own dispatcher, as any subscription callback would): reason `crash`;
- `hang`: an in-process node runs a callback that blocks the loop; the loop
  watchdog must interrupt it past the node's `deadline_s` (reason `hung`);
  nodes without a deadline cannot be hung (nothing would catch it);
- `sigterm` / `sigkill`: the OS process of a process or command child.

Every kill, exit, restart and give-up goes to a JSON-lines log; the restart time
is from the kill to the `restarted` event (emitted once the new instance is ready).
The spec, and how it is read, is in runtime/chaosspec.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import math
import os
import random
import signal
import time
from dataclasses import dataclass, field
from typing import IO, Any

from roboscale.errors import UserError

# The spec's parts were in this module: they still import from here.
from roboscale.runtime.chaosspec import KEYS as KEYS
from roboscale.runtime.chaosspec import ChaosSpec as ChaosSpec
from roboscale.runtime.chaosspec import Method as Method
from roboscale.runtime.chaosspec import build_spec as build_spec
from roboscale.runtime.chaosspec import chaos_from_launch as chaos_from_launch
from roboscale.runtime.chaosspec import parse_chaos_option as parse_chaos_option
from roboscale.runtime.chaosspec import parse_methods as parse_methods
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import CallbackHung, Runtime
from roboscale.runtime.node import Node
from roboscale.runtime.nodehandle import NodeRecipe
from roboscale.runtime.supervisor import Recipe, Supervisor, SupervisorRecipe
from roboscale.runtime.watchdog import WatchedRecipe
from roboscale.safewrite import open_stream

MAX_BATCH = 256  # kills done in one go when late, before yielding the loop
PICK_TRIES = 32  # random picks before a kill is counted as skipped (every target down)
SETTLE_POLL_S = 0.01


class ChaosError(Exception):
    """Raised inside a node's callback by the `exception` method."""


# -- targets -----------------------------------------------------------------------------------
@dataclass(slots=True)
class Target:
    path: str
    root: Supervisor
    names: tuple[str, ...]  # the way from the root's children down to the target
    methods: list[Method]
    weights: list[float]

    @property
    def handle(self) -> Any:
        """The target's current instance (a NodeHandle, or a process child with `pid`), or
        None: each restart builds a new one, a sub-supervisor's too, so it is looked up."""
        handle: Any = self.root
        for name in self.names:
            if not isinstance(handle, Supervisor):
                return None
            handle = handle.instance(name)
        return handle

    def ready(self) -> bool:
        handle = self.handle
        return handle is not None and bool(handle.alive())


def applicable(recipe: Any) -> set[Method]:
    """The methods that can strike a child started from `recipe` (a child spec's recipe)."""
    if isinstance(recipe, NodeRecipe):
        has_deadline = recipe.callback_deadline_s is not None
        return {Method.EXCEPTION, Method.HANG} if has_deadline else {Method.EXCEPTION}
    if isinstance(recipe, WatchedRecipe):
        return {Method.SIGTERM, Method.SIGKILL}
    if isinstance(recipe, Recipe) and isinstance(getattr(recipe.start, "pid", None), property):
        return {Method.SIGTERM, Method.SIGKILL}  # it builds an OS-process child
    return set()


def leaves(sup: Supervisor, above: tuple[str, ...] = ()) -> list[tuple[str, tuple[str, ...], Any]]:
    """(path, names from the root, recipe) of every child below `sup` that is not a
    supervisor, depth first: read from the child specs, started or not."""
    found: list[tuple[str, tuple[str, ...], Any]] = []
    for spec in sup.children:
        recipe: Any = spec.recipe
        names = (*above, spec.name)
        if isinstance(recipe, SupervisorRecipe):
            found.extend(_recipe_leaves(recipe, f"{sup.path}/{spec.name}", names))
        else:
            found.append((f"{sup.path}/{spec.name}", names, recipe))
    return found


def _recipe_leaves(
    sup: SupervisorRecipe, path: str, above: tuple[str, ...]
) -> list[tuple[str, tuple[str, ...], Any]]:
    found: list[tuple[str, tuple[str, ...], Any]] = []
    for spec in sup.children:
        names = (*above, spec.name)
        if isinstance(spec.recipe, SupervisorRecipe):
            found.extend(_recipe_leaves(spec.recipe, f"{path}/{spec.name}", names))
        else:
            found.append((f"{path}/{spec.name}", names, spec.recipe))
    return found


def find_targets(root: Supervisor, spec: ChaosSpec) -> list[Target]:
    """The children matching the pattern, each with the chosen methods that apply to it."""
    weight = dict(spec.methods)
    everything = leaves(root)
    matching = [leaf for leaf in everything if _matches(leaf[0], root.path, spec.target)]
    if not matching:
        shown = ", ".join(leaf[0] for leaf in everything[:5])
        known = shown + (", ..." if len(everything) > 5 else "")
        raise UserError(f"chaos target {spec.target!r} matches no node; the tree has: {known}")
    targets = []
    for path, names, recipe in matching:
        methods = [m for m in weight if m in applicable(recipe)]
        if methods:
            targets.append(Target(path, root, names, methods, [weight[m] for m in methods]))
    for method in weight:
        if not any(method in t.methods for t in targets):
            raise UserError(
                f"chaos method {method.value}: {_needs(method)}; none of the "
                f"{len(matching)} nodes matching {spec.target!r} is one"
            )
    return targets


def _matches(path: str, root_path: str, pattern: str) -> bool:
    below_root = path[len(root_path) :]  # "/robot/workers/w1" -> "/workers/w1"
    return fnmatch.fnmatchcase(path, pattern) or fnmatch.fnmatchcase(below_root, pattern)


def _needs(method: Method) -> str:
    return {
        Method.SIGTERM: "needs OS-process targets (process or command children)",
        Method.SIGKILL: "needs OS-process targets (process or command children)",
        Method.EXCEPTION: "needs in-process nodes",
        Method.HANG: "needs in-process nodes with deadline_s (the watchdog catches the hang)",
    }[method]


# -- the monkey ------------------------------------------------------------------------------
def _raise_chaos() -> None:
    raise ChaosError("chaos monkey")


def _hang(cap_s: float) -> None:
    # Short sleeps: the watchdog's CallbackHung lands at the next bytecode, within 0.5 ms.
    end = time.monotonic() + cap_s
    while time.monotonic() < end:
        time.sleep(0.0005)


@dataclass
class ChaosReport:
    kills: int = 0
    by_method: dict[str, int] = field(default_factory=dict)
    skipped: int = 0  # kill slots with no running target to hit
    restarts: int = 0  # every restart seen, including siblings restarted by a strategy
    restart_ms: list[float] = field(default_factory=list)  # kill -> new instance ready
    uncaught_hangs: int = 0  # hangs the watchdog did not interrupt (ended by their cap)
    elapsed_s: float = 0.0
    alive: bool = False  # the root supervisor still runs at the end
    not_running: list[str] = field(default_factory=list)  # children not running at the end
    gave_up: list[str] = field(default_factory=list)  # supervisors that gave up
    log: str | None = None

    @property
    def ok(self) -> bool:
        return self.alive and not self.not_running and not self.uncaught_hangs

    def percentile_ms(self, q: float) -> float | None:
        if not self.restart_ms:
            return None
        ordered = sorted(self.restart_ms)
        return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]

    def to_dict(self) -> dict[str, Any]:
        rate = self.kills / self.elapsed_s if self.elapsed_s > 0 else 0.0
        return {
            "kills": self.kills,
            "by_method": self.by_method,
            "skipped": self.skipped,
            "achieved_rate": round(rate, 1),
            "elapsed_s": round(self.elapsed_s, 3),
            "restarts": self.restarts,
            "restart_p50_ms": self.percentile_ms(50),
            "restart_p99_ms": self.percentile_ms(99),
            "restart_max_ms": max(self.restart_ms, default=None),
            "uncaught_hangs": self.uncaught_hangs,
            "alive": self.alive,
            "not_running": self.not_running,
            "gave_up": self.gave_up,
            "ok": self.ok,
            "log": self.log,
        }


class ChaosMonkey:
    """Kills targets of one supervision tree; run `await monkey.run()` on the runtime's loop."""

    def __init__(self, runtime: Runtime, root: Supervisor, spec: ChaosSpec) -> None:
        self.runtime = runtime
        self.root = root
        self.spec = spec
        self.targets = find_targets(root, spec)
        self.rng = random.Random(spec.seed)
        self.report = ChaosReport(log=str(spec.log) if spec.log else None)
        self._pending: dict[str, int] = {}  # target path -> monotonic ns of its kill
        self._log: IO[str] | None = None

    def progress(self) -> dict[str, Any]:
        """Live counters for the status file."""
        r = self.report
        return {"kills": r.kills, "restarts": r.restarts, "pending": len(self._pending)}

    async def run(self) -> ChaosReport:
        self._open_log()
        self.runtime.subscribers.append(self._on_event)
        try:
            await self._kill_loop()
            await self._settle()
        finally:  # also when cancelled (the root gave up, Ctrl-C): report what was reached
            self._verdict()
            self.runtime.subscribers.remove(self._on_event)
            if self._log is not None:
                self._log.close()
        return self.report

    def _open_log(self) -> None:
        if self.spec.log is None:
            return
        try:
            self.spec.log.parent.mkdir(parents=True, exist_ok=True)
            self._log = os.fdopen(open_stream(self.spec.log), "w", encoding="utf-8")
        except OSError as e:
            raise UserError(f"cannot write the chaos log {self.spec.log}: {e.strerror}") from e

    def _write(self, record: dict[str, Any]) -> None:
        if self._log is not None:
            self._log.write(json.dumps(record, separators=(",", ":")) + "\n")

    async def _kill_loop(self) -> None:
        loop = asyncio.get_running_loop()
        rate, total = self.spec.rate, self.spec.kills
        t0 = loop.time()
        end = t0 + self.spec.duration
        try:
            await self._paced(t0, end, rate, total)
        finally:
            self.report.elapsed_s = loop.time() - t0

    async def _paced(self, t0: float, end: float, rate: float, total: int) -> None:
        loop = asyncio.get_running_loop()
        i = 0
        while i < total and self.root.alive():
            now = loop.time()
            due = t0 + i / rate
            if due > now:
                await asyncio.sleep(due - now)
                now = loop.time()
            if now >= end + (end - t0):
                break  # bounded in time too: far behind a slow machine, at twice the duration
            batch = 0
            while i < total and t0 + i / rate <= now and batch < MAX_BATCH:
                self._kill_one()
                i += 1
                batch += 1
            if batch == MAX_BATCH:
                await asyncio.sleep(0)  # far behind: let restarts and messages run

    def _kill_one(self) -> None:
        target = self._pick()
        if target is None:
            self.report.skipped += 1
            return
        method = self.rng.choices(target.methods, target.weights)[0]
        t_ns = time.monotonic_ns()
        self._pending[target.path] = t_ns
        self._write({"t_ns": t_ns, "event": "kill", "target": target.path, "method": method.value})
        self.report.kills += 1
        self.report.by_method[method.value] = self.report.by_method.get(method.value, 0) + 1
        # CallbackHung here: the watchdog's interrupt landed just after the hang returned.
        struck = True
        with contextlib.suppress(CallbackHung):
            struck = self._strike(target, method)
        if struck:
            return
        # Nothing was struck (the target ended on its own just before): not a kill.
        del self._pending[target.path]
        self.report.kills -= 1
        self.report.by_method[method.value] -= 1
        self.report.skipped += 1

    def _pick(self) -> Target | None:
        for _ in range(PICK_TRIES):
            target = self.rng.choice(self.targets)
            if target.path not in self._pending and target.ready():
                return target
        return None

    def _strike(self, target: Target, method: Method) -> bool:
        """Strike the target; False when it was already gone."""
        handle = target.handle
        if handle is None:
            return False
        if method in (Method.SIGTERM, Method.SIGKILL):
            pid = handle.pid
            if pid is None:
                return False
            sig = signal.SIGTERM if method is Method.SIGTERM else signal.SIGKILL
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return False
            return True
        node: Node | None = handle.node
        if node is None:
            return False
        if method is Method.EXCEPTION:
            node.run_inline(_raise_chaos, (), None, "chaos callback")
            return True
        deadline = handle.callback_deadline_s
        ok, _ = node.run_inline(_hang, (4 * deadline + 1.0,), deadline, "chaos callback")
        if ok:  # returned by itself: the watchdog missed it and the node still runs
            self.report.uncaught_hangs += 1
            self._pending.pop(target.path, None)
        return True

    def _on_event(self, event: SupervisionEvent) -> None:
        path = f"{event.supervisor}/{event.child}"
        if event.kind == "restarted":
            self.report.restarts += 1
            killed = self._pending.pop(path, None)
            record: dict[str, Any] = {"t_ns": event.t_ns, "event": "restart", "target": path}
            if killed is not None:
                ms = (event.t_ns - killed) / 1e6
                self.report.restart_ms.append(ms)
                record["restart_ms"] = round(ms, 4)
            self._write(record)
        elif event.kind == "exited":
            self._write(
                {"t_ns": event.t_ns, "event": "exit", "target": path, "reason": event.reason}
            )
        elif event.kind == "gave_up":
            if event.supervisor not in self.report.gave_up:
                self.report.gave_up.append(event.supervisor)
            self._write(
                {
                    "t_ns": event.t_ns,
                    "event": "gave_up",
                    "supervisor": event.supervisor,
                    "detail": event.detail,
                }
            )

    async def _settle(self) -> None:
        """Wait up to `settle` seconds for every killed target to be restarted."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.spec.settle
        while loop.time() < deadline and self.root.alive():
            if not self._pending and all(t.ready() for t in self.targets):
                return
            await asyncio.sleep(SETTLE_POLL_S)

    def _verdict(self) -> None:
        self.report.alive = self.root.alive()
        rows = self.root.status()
        self.report.not_running = [r["path"] for r in rows if r["state"] != "running"]


# -- nodes for chaos runs (examples/launch/workers.yaml) ---------------------------------------
class FrameSource(Node):
    """Publishes a counter on `/frames` at `rate_hz` (default 10), like the tracker's camera."""

    def on_start(self) -> None:
        frames = self.publisher("/frames")
        count = iter(range(1 << 62))
        period = 1.0 / float(self.get_param("rate_hz", 10.0))
        self.timer(period, lambda: frames.publish(next(count)))


class Worker(Node):
    """A face_server-like worker: handles each frame of `/frames`, publishes on `/results`."""

    def on_start(self) -> None:
        results = self.publisher("/results")
        self.subscribe("/frames", results.publish, queue_size=int(self.get_param("queue", 10)))
