"""The runtime stacks' host process: `python -m roboscale.facetrack.stacks.runtime_host
MODE CONFIG_JSON WORKDIR`, MODE `inprocess` or `process`; driven by `hosted.HostedTracker`.

The paper's tree, on one runtime:

    /top            one_for_one, 1000 restarts in 1 s (the paper's intensity)
      /faces        face_supervisor: N permanent FaceWorkers (in-process nodes, or
                    process nodes forked from a zygote and reached over the Zenoh bridge)
      /aggregators  aggregator_supervisor: the Aggregator (aggregator + controller)
      camera        renders and dispatches a frame per period; takes the commands

Frames go over durable topics, so a restarted worker gets what was sent meanwhile. The
frame a worker held when it was killed was handed over already (durable delivery is at
most once for it); the camera keeps every unanswered frame and sends a restarted
worker's again, and the aggregator drops a second answer. So a kill loses no frame.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.pipeline import CameraRole, TrackerRole
from roboscale.facetrack.records import TRACKER_RUN_FILE, TrackerRun, assemble
from roboscale.facetrack.stack import pick_victims
from roboscale.facetrack.stacks.runtime_nodes import (
    Aggregator,
    Camera,
    FaceWorker,
    frames_topic,
    thread_detector,
)
from roboscale.facetrack.usage import usage_of
from roboscale.runtime.child import ExitReason
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.node import NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Recipe, Supervisor, SupervisorRecipe
from roboscale.safewrite import write_text

PAPER_INTENSITY = Intensity(max_restarts=1000, period_s=1.0)
FACES = "/top/faces"
RETAIN = 64  # frames each worker topic retains for a restarted process worker
DRAIN_MIN_S = 2.0  # after the last frame, wait at least this long for answers
PR_SET_PDEATHSIG = 1
WARM_TIMEOUT_S = 120.0


@dataclass
class _Kill:
    worker: int
    method: str
    kill_ns: int
    restarted_ns: int | None = None


class Host:
    def __init__(self, mode: str, cfg: TrackerConfig, workdir: Path) -> None:
        self.mode, self.cfg, self.workdir = mode, cfg, workdir
        self.pool_size = max(1, os.cpu_count() or 1)
        self.rt = Runtime(workers=self.pool_size).start()
        self.camera, self.tracker = CameraRole(cfg), TrackerRole(cfg)
        self.kills: list[_Kill] = []
        self.awaiting: dict[str, list[int]] = {}  # child name -> kills awaiting its restart
        self.resent = 0
        self.running = False
        self.sent = 0
        self.done = threading.Event()
        self.rt.subscribers.append(self.on_event)
        self.closers: list[Any] = []
        workers = self._workers()
        aggregator = NodeRecipe("aggregator", Aggregator, {"role": self.tracker})
        params = {"period_s": 1.0 / cfg.fps, "tick": self.tick, "on_command": self.on_command}
        self.root = Supervisor(
            self.rt,
            "top",
            [
                ChildSpec(SupervisorRecipe("faces", [ChildSpec(w) for w in workers],
                                           intensity=PAPER_INTENSITY)),
                ChildSpec(SupervisorRecipe("aggregators", [ChildSpec(aggregator)],
                                           intensity=PAPER_INTENSITY)),
                ChildSpec(NodeRecipe("camera", Camera, params)),
            ],
            intensity=PAPER_INTENSITY,
        )  # fmt: skip
        self.rt.wait(self.root.start_async(), timeout_s=60.0 + 2.0 * cfg.workers)

    def worker(self, index: int) -> Any:
        """Worker `index`'s current instance (each restart builds a new one), or None."""
        faces: Supervisor | None = self.root.instance("faces")
        return None if faces is None else faces.instance(f"w{index}")

    def _workers(self) -> list[NodeRecipe | Recipe]:
        if self.mode == "inprocess":
            self._warm_pool()
            return [NodeRecipe(f"w{i}", FaceWorker, {"index": i})
                    for i in range(self.cfg.workers)]  # fmt: skip
        from roboscale.backends.base import free_port
        from roboscale.runtime.bridge import Bridge, bridge_config
        from roboscale.runtime.process import ProcessNode
        from roboscale.runtime.zygote import Zygote

        listen = f"tcp/127.0.0.1:{free_port()}"
        topics = [frames_topic(i) for i in range(self.cfg.workers)]
        raw = {"listen": [listen], "export": topics, "durable": topics,
               "import": ["/results"], "retain": RETAIN}  # fmt: skip
        bridge = Bridge(self.rt, bridge_config(raw)).open()
        self.closers.append(bridge.close)
        env = {"ROBOSCALE_FACETRACK_PRELOAD": "1"}
        self.zygote = Zygote(["zenoh", "roboscale.facetrack.stacks.runtime_nodes"], env=env,
                             log=self.workdir / "zygote.log")  # fmt: skip
        self.zygote.start()
        self.closers.append(self.zygote.close)
        return [
            Recipe(f"w{i}", ProcessNode,
                   (f"w{i}", "roboscale.facetrack.stacks.runtime_nodes:worker_main",
                    {"index": i, "connect": listen, "cursor": str(self.workdir / f"w{i}.cursor")}),
                   {"zygote": self.zygote, "log": self.workdir / f"w{i}.log",
                    "ready_timeout_s": 60.0})
            for i in range(self.cfg.workers)
        ]  # fmt: skip

    def _warm_pool(self) -> None:
        """Load a detector in every pool thread before the first frame, as the zygote does
        for process workers: a cascade takes 0.3 s or more to load, and the first frames
        would wait for it."""
        threads = self.pool_size
        barrier = threading.Barrier(threads)

        def warm() -> None:
            thread_detector()
            barrier.wait(timeout=WARM_TIMEOUT_S)  # every thread holds one task: all load

        async def all_warm() -> None:
            await asyncio.gather(*(self.rt.in_thread(warm) for _ in range(threads)))

        self.rt.wait(all_warm(), timeout_s=WARM_TIMEOUT_S)

    # -- on the loop ------------------------------------------------------------------------
    def tick(self) -> None:
        if not self.running or self.sent >= self.cfg.frames:
            return
        frame_id = self.sent
        data, worker = self.camera.next_frame(frame_id)
        self.rt.bus.topic(frames_topic(worker)).publish(data)
        self.sent += 1
        if self.cfg.kills.count and frame_id == self.cfg.kills.at_frame:
            self._kill_from(pick_victims(self.cfg), 0)
        if self.sent % 10 == 0 or self.sent == self.cfg.frames:
            print(f"frame {self.sent}", flush=True)

    def on_command(self, data: bytes) -> None:
        self.camera.apply(data)
        if self.sent >= self.cfg.frames and len(self.tracker.seen) >= self.cfg.frames:
            self.done.set()

    def on_event(self, event: SupervisionEvent) -> None:
        if event.kind != "restarted" or event.supervisor != FACES:
            return
        waiting = self.awaiting.get(event.child)
        if waiting:
            self.kills[waiting.pop(0)].restarted_ns = event.t_ns
        worker = int(event.child[1:])
        topic = self.rt.bus.topic(frames_topic(worker))
        for data in self.camera.unanswered(worker):
            topic.publish(data)  # the aggregator drops answers it already has
            self.resent += 1

    def _kill_from(self, victims: list[int], k: int, due_ns: int = 0) -> None:
        """Kill victims[k:], `kills.interval_ms` apart (0: all at once, as the paper's
        chaos runs): each kill schedules the next one an interval after itself."""
        now = time.monotonic_ns()
        if now < due_ns:  # the loop's timers may fire up to a millisecond early (libuv)
            self.rt.loop.call_later((due_ns - now) / 1e9, self._kill_from, victims, k, due_ns)
            return
        gap_ns = int(self.cfg.kills.interval_ms * 1e6)
        while k < len(victims):
            struck = self.kill(victims[k], self.cfg.kills.method) or time.monotonic_ns()
            k += 1
            if gap_ns and k < len(victims):
                self.rt.loop.call_later(gap_ns / 1e9, self._kill_from, victims, k, struck + gap_ns)
                return

    def kill(self, worker: int, method: str) -> int:
        """Kill a worker; its kill time in ns (0: it was not running)."""
        handle, name = self.worker(worker), f"w{worker}"
        record = _Kill(worker, method, time.monotonic_ns())
        self.kills.append(record)  # before the strike: an in-process restart is immediate
        self.awaiting.setdefault(name, []).append(len(self.kills) - 1)
        if handle is not None and _strike(handle, method):
            return record.kill_ns
        self.kills.pop()
        self.awaiting[name].pop()
        return 0

    # -- from the main thread ---------------------------------------------------------------
    def run(self) -> None:
        self.rt.call(lambda: setattr(self, "running", True))
        budget = self.cfg.duration_s * 2 + 30.0
        if not self.done.wait(budget):
            pass  # what did not come in time counts as lost
        drain = max(DRAIN_MIN_S, 2 * self.cfg.late_ms / 1000)
        self.done.wait(drain)
        self.rt.call(lambda: setattr(self, "running", False))
        run = self.rt.call(self._collect)
        write_text(self.workdir / TRACKER_RUN_FILE, json.dumps(run.to_dict()))

    def _collect(self) -> TrackerRun:
        kills = [(k.worker, k.method, k.kill_ns, k.restarted_ns) for k in self.kills]
        frames, kill_records = assemble(self.cfg, self.camera.dispatched, self.tracker.handled,
                                        kills)  # fmt: skip
        pids = [(os.getpid(), "host", self.cfg.workers if self.mode == "inprocess" else 0)]
        if self.mode == "process":
            pids.append((self.zygote.pid, "zygote", 0))
        workers = [self.worker(i) for i in range(self.cfg.workers)]
        if self.mode == "process":
            pids += [(h.pid, "worker", 1) for h in workers if h is not None and h.pid is not None]
        alive = sum(1 for h in workers if h is not None and h.alive())
        counters = {"malformed": self.tracker.malformed + self.camera.malformed,
                    "duplicates": self.tracker.duplicates, "resent": self.resent}  # fmt: skip
        name = "runtime" if self.mode == "inprocess" else "runtime-proc"
        return TrackerRun(name, self.cfg, frames, kill_records,
                          usage_of(pids), counters, alive)  # fmt: skip

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.rt.wait(self.root.stop_async(), timeout_s=30.0)
        for close in reversed(self.closers):
            with contextlib.suppress(Exception):
                close()
        self.rt.close()


def _strike(handle: Any, method: str) -> bool:
    if method in ("sigterm", "sigkill"):
        pid = getattr(handle, "pid", None)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM if method == "sigterm" else signal.SIGKILL)
                return True
            return False
        node = handle.node  # in-process: the runtime's kill, or a graceful end for SIGTERM
        if node is None:
            return False
        reason = ExitReason.KILLED if method == "sigkill" else ExitReason.SHUTDOWN
        handle.kill(reason, method)
        return True
    node = handle.node
    if node is None:
        return False
    node.run_inline(_crash, (), None, "chaos")
    return True


def _crash() -> None:
    raise RuntimeError("chaos: worker crashed on purpose")


def _serve(host: Host) -> None:
    for line in sys.stdin:
        words = line.split()
        if words == ["go"]:
            host.run()
            print("done", flush=True)
        elif len(words) == 3 and words[0] == "kill":
            kill_ns = host.rt.call(host.kill, int(words[1]), words[2])
            print(f"killed {words[1]} {kill_ns}", flush=True)
        elif words == ["stop"]:
            return


def main(argv: list[str]) -> int:
    with contextlib.suppress(OSError, AttributeError):  # die with the driver
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    mode, config_path, workdir = argv
    try:
        cfg = TrackerConfig.from_json(Path(config_path).read_text())
    except Exception as e:
        print(f"error {config_path}: {e}", flush=True)
        return 1
    try:
        host = Host(mode, cfg, Path(workdir))
    except TimeoutError:
        print(f"error the tracker's {cfg.workers} workers did not all start in time", flush=True)
        return 1
    except Exception as e:  # the driver shows this line with the log's tail
        print(f"error cannot start the tracker: {type(e).__name__}: {e}", flush=True)
        return 1
    try:
        print("ready", flush=True)
        _serve(host)
    except Exception as e:
        print(f"error {type(e).__name__}: {e}", flush=True)
        return 1
    finally:
        host.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
