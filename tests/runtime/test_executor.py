"""Liveness: deadlines of callbacks (coroutine, worker thread, inline) and heartbeats."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from tests.conftest import EVENT_TIMEOUT_S

from roboscale.errors import UserError
from roboscale.eventloop import LOOP_ENV, loop_kind
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor

from .conftest import wait_until

RELEASE_THREAD = threading.Event()


@pytest.fixture(params=["uvloop", "asyncio"])
def rt(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    """The liveness rules hold on both event loops the runtime can run on."""
    monkeypatch.setenv(LOOP_ENV, request.param)
    runtime = Runtime(watchdog_period_s=0.01).start()
    yield runtime
    runtime.close()


def test_the_loop_is_uvloop_unless_asyncio_is_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    import uvloop

    monkeypatch.delenv(LOOP_ENV, raising=False)
    assert loop_kind() == "uvloop"  # a dependency of the package
    with Runtime() as rt:
        assert isinstance(rt.loop, uvloop.Loop)
    monkeypatch.setenv(LOOP_ENV, "asyncio")
    assert loop_kind() == "asyncio"
    with Runtime() as rt:
        assert type(rt.loop).__module__.startswith("asyncio")


def test_an_unknown_loop_is_refused_with_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOOP_ENV, "trio")
    with pytest.raises(UserError, match="ROBOSCALE_LOOP='trio' is not allowed: allowed are uvloop"):
        Runtime()


def start(rt: Runtime, recipe: NodeRecipe) -> Supervisor:
    sup = Supervisor(rt, "top", [ChildSpec(recipe)], intensity=Intensity(100, 1.0))
    rt.wait(sup.start_async())
    return sup


def hung_exits(events: list[SupervisionEvent]) -> list[SupervisionEvent]:
    return [e for e in events if e.kind == "exited" and e.reason == "hung"]


def poke(rt: Runtime, topic: str) -> None:
    rt.call(lambda: rt.bus.topic(topic).publish(None))


class Stuck(Node):
    """Its callback never finishes, in the way chosen by the `how` parameter."""

    def on_start(self) -> None:
        how = self.get_param("how")
        if how == "await":
            self.subscribe("/go", self.stuck_await, deadline_s=0.05)
        elif how == "thread":
            self.subscribe("/go", self.stuck_thread, blocking=True, deadline_s=0.05)
        else:
            self.subscribe("/go", self.stuck_loop, deadline_s=0.05)

    async def stuck_await(self, _: Any) -> None:
        await asyncio.Event().wait()

    def stuck_thread(self, _: Any) -> None:
        # A worker thread cannot be interrupted: it is abandoned. It stays stuck until
        # the test has seen the watchdog fire, however late a loaded machine runs it.
        RELEASE_THREAD.wait(EVENT_TIMEOUT_S)

    def stuck_loop(self, _: Any) -> None:
        while True:  # blocks the event loop itself
            time.sleep(0.001)


def test_watchdog_declares_a_coroutine_stuck_in_await_hung(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    sup = start(rt, NodeRecipe("stuck", Stuck, {"how": "await"}))
    poke(rt, "/go")
    wait_until(lambda: sup.restarts("stuck") == 1)
    assert "subscription ran past its deadline" in hung_exits(events)[0].detail


def test_watchdog_declares_a_worker_thread_callback_hung(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    RELEASE_THREAD.clear()
    sup = start(rt, NodeRecipe("stuck", Stuck, {"how": "thread"}))
    try:
        poke(rt, "/go")
        wait_until(lambda: sup.restarts("stuck") == 1)
        assert hung_exits(events)
    finally:
        RELEASE_THREAD.set()


def test_loop_watchdog_interrupts_a_callback_blocking_the_loop(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    ok: list[int] = []

    class Neighbour(Node):
        def on_start(self) -> None:
            self.subscribe("/n", ok.append)

    stuck = NodeRecipe("stuck", Stuck, {"how": "loop"})
    sup = Supervisor(rt, "top", [ChildSpec(stuck), ChildSpec(NodeRecipe("n", Neighbour))])
    rt.wait(sup.start_async())
    rt.loop.call_soon_threadsafe(rt.bus.topic("/go").publish, None)
    wait_until(lambda: sup.restarts("stuck") == 1)
    assert "blocked the event loop" in hung_exits(events)[0].detail
    rt.call(lambda: rt.bus.topic("/n").publish(1))
    wait_until(lambda: ok == [1])  # the loop and the neighbour carry on


def test_missing_heartbeat_declares_the_node_hung(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    class Silent(Node):
        pass  # never calls heartbeat()

    class Beating(Node):
        def on_start(self) -> None:
            self.timer(0.005, self.heartbeat)

    silent = NodeRecipe("silent", Silent, heartbeat_s=0.05)
    beating = NodeRecipe("beating", Beating, heartbeat_s=0.5)
    sup = Supervisor(
        rt, "top", [ChildSpec(silent), ChildSpec(beating)], intensity=Intensity(100, 1)
    )
    rt.wait(sup.start_async())
    wait_until(lambda: sup.restarts("silent") >= 2)
    assert sup.restarts("beating") == 0
    assert all(e.child == "silent" for e in hung_exits(events))
    assert "no heartbeat for 0.05s" in hung_exits(events)[0].detail
