"""The face tracker's chaos monkey, in-process: random crashes and cancellations on 100 workers."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor, SupervisorRecipe

from .conftest import wait_until

WORKERS = 100
KILLS = 1000


class FaceWorker(Node):
    """Crashes on "crash"; keeps a long coroutine callback running that chaos may cancel."""

    def on_start(self) -> None:
        self.subscribe(f"/{self.name}/cmd", self.on_cmd)
        self.subscribe(f"/{self.name}/work", self.work)

    def on_cmd(self, msg: str) -> None:
        if msg == "crash":
            raise RuntimeError("chaos")

    async def work(self, _: Any) -> None:
        await asyncio.sleep(3600)


def test_chaos_leaves_every_worker_running_and_the_tree_alive(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    names = [f"w{i}" for i in range(WORKERS)]
    workers = [ChildSpec(NodeRecipe(name, FaceWorker)) for name in names]
    faces_recipe = SupervisorRecipe("faces", workers, intensity=Intensity(1000, 1))
    top = Supervisor(rt, "top", [ChildSpec(faces_recipe)], intensity=Intensity(1000, 1))
    rt.wait(top.start_async())
    faces = top.child("faces")
    rng = random.Random(2024)
    done = {"crash": 0, "cancel": 0}

    def strike() -> None:
        handle = faces.child(rng.choice(names))  # the current instance: new at each restart
        node: Any = handle.node
        if node is None:
            return  # being restarted right now: pick another next time
        if rng.random() < 0.5:
            rt.bus.topic(f"/{handle.name}/cmd").publish("crash")
            done["crash"] += 1
        else:
            tasks = list(node._tasks or ())
            if tasks:
                rng.choice(tasks).cancel()
                done["cancel"] += 1
            else:
                rt.bus.topic(f"/{handle.name}/work").publish(None)

    kills = 0
    while kills < KILLS:
        rt.call(strike)
        kills = done["crash"] + done["cancel"]
    wait_until(lambda: sum(faces.restarts(name) for name in names) >= kills)
    assert top.alive() and faces.alive() and top.child("faces") is faces
    assert all(faces.child(name).alive() for name in names)
    assert top.restarts("faces") == 0  # never escalated
    exits = [e for e in events if e.kind == "exited"]
    assert {e.reason for e in exits} == {"crash", "killed"}
    assert len(exits) == kills and done["crash"] > 0 and done["cancel"] > 0
    rt.wait(top.stop_async())
    assert not any(faces.child(name).alive() for name in names)
