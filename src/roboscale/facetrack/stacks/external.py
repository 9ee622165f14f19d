"""The run loop of the stacks whose pipeline runs outside the harness's process (ROS 1,
Erlang/OTP), over a `link.Link`.

The harness is the camera (`pipeline.CameraRole`): it renders each frame, chooses its
worker with the seeded dispatcher every stack shares, sends it (`F`) and applies the
commands that come back (`O`). The stack reports its processes as they start and become
ready (`U`), from which the restart of every kill is timed. What differs between stacks,
how to kill a worker, stop and measure, is left to subclasses.
"""

from __future__ import annotations

import dataclasses
import time
from abc import ABC, abstractmethod
from pathlib import Path

from roboscale.errors import UserError
from roboscale.facetrack import wire
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.pipeline import CameraRole
from roboscale.facetrack.records import Handled, ProcessUsage, TrackerRun, assemble
from roboscale.facetrack.stack import Progress, pick_victims
from roboscale.facetrack.stacks.link import WORKER, Link, LinkClosed, ProcessEvent, Role

RESTART_WAIT_S = 30.0  # a kill whose worker is not back by then has no restart time
DRAIN_MIN_S = 2.0  # after the last frame, answers are awaited at least this long


@dataclasses.dataclass
class Kill:
    worker: int  # the index of the killed process within its role
    method: str
    kill_ns: int
    pid: int  # the killed instance's OS pid (0: unknown)
    initialized_ns: int | None = None
    restarted_ns: int | None = None
    role: Role = Role.WORKER


# kills.target -> the process the link numbers
TARGET_ROLES = {
    "aggregator": Role.AGGREGATOR,
    "face_supervisor": Role.FACE_SUPERVISOR,
    "aggregator_supervisor": Role.AGGREGATOR_SUPERVISOR,
}


class ExternalTracker(ABC):
    """A `RunningTracker` for a stack on the other end of `link`."""

    name = "external"

    def __init__(self, cfg: TrackerConfig, link: Link, log: Path) -> None:
        self.cfg = cfg
        self.link = link
        self.log = log  # the stack's output, named in errors
        self.camera = CameraRole(cfg)
        self.handled: list[Handled] = []
        self.instances: dict[tuple[Role, int], ProcessEvent] = {}  # the latest of each
        self.kills: list[Kill] = []
        self.counters: dict[str, int] = {"malformed": 0, "kills_missed": 0}

    # ------------------------------------------------------------------ what stacks differ in

    @abstractmethod
    def _kill(self, role: Role, index: int, method: str) -> int:
        """Kill process `index` of `role` now; the killed instance's OS pid (0: unknown)."""

    @abstractmethod
    def processes(self) -> list[ProcessUsage]: ...

    @abstractmethod
    def alive_workers(self) -> int: ...

    @abstractmethod
    def stop(self) -> None: ...

    # ------------------------------------------------------------------ the protocol

    def kill(self, worker: int, method: str) -> int:
        if not 0 <= worker < self.cfg.workers:
            raise UserError(f"worker {worker} does not exist (0 to {self.cfg.workers - 1})")
        return self._kill_now(Role.WORKER, worker, method)

    def _kill_now(self, role: Role, index: int, method: str) -> int:
        kill_ns = time.monotonic_ns()
        pid = self._kill(role, index, method)
        self.kills.append(Kill(index, method, kill_ns, pid, role=role))
        return kill_ns

    def run(self, progress: Progress | None = None) -> TrackerRun:
        try:
            return self._run(progress)
        except LinkClosed as e:
            raise UserError(
                f"{self.name} stack: {e.message} during the run; see {self.log}"
            ) from None

    def _run(self, progress: Progress | None) -> TrackerRun:
        cfg = self.cfg
        target = TARGET_ROLES.get(cfg.kills.target)
        victims = pick_victims(cfg) if cfg.kills.count and target is None else []
        start = time.monotonic_ns()
        for i in range(cfg.frames):
            self.pump_until(start + int(i * 1e9 / cfg.fps))
            data, worker = self.camera.next_frame(i)
            self.link.send(b"F" + WORKER.pack(worker) + data)
            if victims and i == cfg.kills.at_frame:
                self._kill_all(victims)
            if target is not None and cfg.kills.count and i == cfg.kills.at_frame:
                self._kill_now(target, 0, cfg.kills.method)  # one main process, once
            if progress is not None:
                progress(i + 1, cfg.frames)
        self._drain()
        return self._result()

    def _kill_all(self, victims: list[int]) -> None:
        """Kill every victim, `kills.interval_ms` apart (0: no pause between them, as the
        paper's chaos runs), handling what the stack sends meanwhile."""
        gap_ns = int(self.cfg.kills.interval_ms * 1e6)
        for k, victim in enumerate(victims):
            if k and gap_ns:
                self.pump_until(time.monotonic_ns() + gap_ns)
            self.kill(victim, self.cfg.kills.method)

    # ------------------------------------------------------------------ messages

    def pump_until(self, deadline_ns: int) -> None:
        """Handle what the stack sends until `deadline_ns` (CLOCK_MONOTONIC)."""
        while (left := deadline_ns - time.monotonic_ns()) > 0:
            message = self.link.receive(left / 1e9)
            if message is not None:
                self.on_message(message)

    def on_message(self, message: bytes) -> None:
        tag, body = message[:1], message[1:]
        if tag == b"O" and body[:1] == b"R":
            if self.camera.apply(body[1:]) is None:
                self.counters["malformed"] += 1
        elif tag == b"O" and body[:1] == b"D":
            try:
                self.handled.append(wire.decode_handled(body[1:]))
            except wire.WireError:
                self.counters["malformed"] += 1
        elif tag == b"U":
            try:
                self.on_event(ProcessEvent.decode(body))
            except ValueError:
                self.counters["malformed"] += 1
        elif tag == b"N":
            self.counters["kills_missed"] += 1
        else:
            self.on_other(message)

    def on_other(self, message: bytes) -> None:
        self.counters["malformed"] += 1

    def on_event(self, event: ProcessEvent) -> None:
        self.instances[(event.role, event.index)] = event
        for kill in reversed(self.kills):
            if kill.role == event.role and kill.worker == event.index:
                self._time_restart(kill, event)
                break

    def _time_restart(self, kill: Kill, event: ProcessEvent) -> None:
        """Stamp the kill's restart with the new instance's event: measured inside the stack
        from the kill when it can (Erlang), else on the shared CLOCK_MONOTONIC (rospy)."""
        if event.os_pid == kill.pid and kill.pid:
            return  # a late report of the instance that was killed
        if event.since_kill_ns is not None:
            at = kill.kill_ns + event.since_kill_ns
        elif event.t_ns >= kill.kill_ns:
            at = event.t_ns
        else:
            return
        if event.ready and kill.restarted_ns is None:
            kill.restarted_ns = at
            if kill.initialized_ns is None:
                kill.initialized_ns = at
        elif not event.ready and kill.initialized_ns is None:
            kill.initialized_ns = at

    def wait_ready(self, expected: set[tuple[Role, int]], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        while not all(key in self.instances and self.instances[key].ready for key in expected):
            left = deadline - time.monotonic()
            if left <= 0:
                missing = sorted(f"{r.name.lower()} {i}" for r, i in expected - self._ready())
                raise UserError(f"{what}: not ready within {timeout_s:g} s: {', '.join(missing)}")
            message = self.link.receive(min(left, 0.5))
            if message is not None:
                self.on_message(message)

    def _ready(self) -> set[tuple[Role, int]]:
        return {key for key, event in self.instances.items() if event.ready}

    def _drain(self) -> None:
        """Await the answers still due, and the restarts of killed workers, both bounded."""
        due = time.monotonic_ns() + int(max(DRAIN_MIN_S, 2 * self.cfg.late_ms / 1e3) * 1e9)
        answered = {h.frame_id for h in self.handled}
        while time.monotonic_ns() < due and len(answered) < len(self.camera.dispatched):
            self.pump_until(min(due, time.monotonic_ns() + 50_000_000))
            answered = {h.frame_id for h in self.handled}
        self.wait_restarted(RESTART_WAIT_S)

    def wait_restarted(self, timeout_s: float) -> bool:
        """Handle messages until every killed worker is back (True) or `timeout_s` passed."""
        due = time.monotonic_ns() + int(timeout_s * 1e9)
        while any(k.restarted_ns is None for k in self.kills):
            if time.monotonic_ns() >= due:
                return False
            self.pump_until(min(due, time.monotonic_ns() + 50_000_000))
        return True

    def _result(self) -> TrackerRun:
        kills = sorted(self.kills, key=lambda k: k.kill_ns)
        frames, records = assemble(
            self.cfg,
            self.camera.dispatched,
            self.handled,
            # A main process's kill is attributed no worker's frames (-1).
            [(_worker_of(k), k.method, k.kill_ns, k.restarted_ns) for k in kills],
        )
        records = [
            dataclasses.replace(r, initialized_ns=k.initialized_ns, target=k.role.name.lower())
            for r, k in zip(records, kills, strict=True)
        ]
        processes, alive = self.processes(), self.alive_workers()  # they add counters
        counters = {
            **self.counters,
            "malformed": self.counters["malformed"] + self.camera.malformed,
        }
        return TrackerRun(self.name, self.cfg, frames, records, processes, counters, alive)


def _worker_of(kill: Kill) -> int:
    return kill.worker if kill.role == Role.WORKER else -1
