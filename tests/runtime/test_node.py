from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import Any

import pytest

from roboscale.errors import UserError
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.node import Node, NodeHandle, NodeRecipe, ServiceError
from roboscale.runtime.supervisor import ChildSpec, Supervisor

from .conftest import wait_until


@dataclass(frozen=True)
class Pose:
    x: float
    y: float


class Recorder(Node):
    """Records what arrives on /in, and the thread that ran the callback."""

    __slots__ = ("got", "threads")

    def on_start(self) -> None:
        self.got: list[Any] = []
        self.threads: list[str] = []
        blocking = bool(self.get_param("blocking", False))
        self.subscribe("/in", self.on_msg, blocking=blocking)

    def on_msg(self, msg: Any) -> None:
        self.threads.append(threading.current_thread().name)
        if msg == "crash":
            raise RuntimeError("bad message")
        self.got.append(msg)


def run_tree(rt: Runtime, *recipes: NodeRecipe) -> Supervisor:
    sup = Supervisor(rt, "top", [ChildSpec(r) for r in recipes], intensity=Intensity(100, 1.0))
    rt.wait(sup.start_async())
    return sup


def publish(rt: Runtime, topic: str, msg: Any) -> None:
    rt.call(lambda: rt.bus.topic(topic).publish(msg))


def node(sup: Supervisor, name: str) -> Any:
    """The node instance running as child `name` (a new one after each restart)."""
    wait_until(lambda: sup.child(name).alive())
    return sup.child(name).node


def test_message_object_is_delivered_without_copy(rt: Runtime) -> None:
    sup = run_tree(rt, NodeRecipe("rec", Recorder))
    payload = b"x" * 4096
    pose = Pose(1.0, 2.0)
    publish(rt, "/in", payload)
    publish(rt, "in", pose)  # a relative name means the same global topic
    wait_until(lambda: len(node(sup, "rec").got) == 2)
    assert node(sup, "rec").got[0] is payload and node(sup, "rec").got[1] is pose


def test_bad_topic_name_is_a_clear_error(rt: Runtime) -> None:
    for bad in ("", "/", "1abc", "/a//b", "/a b", "/a-b"):
        with pytest.raises(UserError, match=r"invalid topic name .*allowed are segments"):
            rt.bus.topic(bad)


def test_typed_topic_refuses_another_type(rt: Runtime) -> None:
    class Typed(Node):
        def on_start(self) -> None:
            pub = self.publisher("/pose", Pose)
            pub.publish(Pose(0, 0))
            with pytest.raises(UserError, match="carries Pose, got str"):
                pub.publish("not a pose")
            with pytest.raises(UserError, match="carries Pose, not int"):
                self.publisher("/pose", int)

    sup = run_tree(rt, NodeRecipe("typed", Typed))
    assert sup.child("typed").alive()


def test_crashing_callback_fails_only_its_own_node(rt: Runtime) -> None:
    sup = run_tree(rt, NodeRecipe("a", Recorder), NodeRecipe("b", Recorder))
    first_b = node(sup, "b")
    publish(rt, "/in", "crash")
    wait_until(lambda: sup.restarts("a") == 1 and sup.restarts("b") == 1)
    # Both received "crash" and crashed; neither crash touched the other or the loop.
    publish(rt, "/in", "after")
    wait_until(lambda: node(sup, "a").got == ["after"] and node(sup, "b").got == ["after"])
    assert node(sup, "b") is not first_b


def test_blocking_callback_runs_in_a_worker_thread(rt: Runtime) -> None:
    sup = run_tree(rt, NodeRecipe("rec", Recorder, {"blocking": True}))
    publish(rt, "/in", 1)
    publish(rt, "/in", 2)
    wait_until(lambda: node(sup, "rec").got == [1, 2])
    assert all(t.startswith("roboscale-worker") for t in node(sup, "rec").threads)


def test_crash_in_worker_thread_fails_the_node(rt: Runtime) -> None:
    sup = run_tree(rt, NodeRecipe("rec", Recorder, {"blocking": True}))
    publish(rt, "/in", "crash")
    wait_until(lambda: sup.restarts("rec") == 1)


def test_timer_ticks_until_the_node_ends(rt: Runtime) -> None:
    ticks: list[int] = []

    class Ticker(Node):
        def on_start(self) -> None:
            self.timer(0.001, lambda: ticks.append(1))

    sup = run_tree(rt, NodeRecipe("ticker", Ticker))
    wait_until(lambda: len(ticks) >= 3)
    rt.wait(sup.stop_async())
    count = len(ticks)
    rt.call(lambda: None)
    assert len(ticks) == count  # no tick after the stop


def test_a_timer_counts_the_ticks_it_skips_behind_a_busy_loop(rt: Runtime) -> None:
    import time

    class Ticker(Node):
        def on_start(self) -> None:
            self.clock = self.timer(0.01, self.tick)

        def tick(self) -> None:
            if self.clock.ticks == 1:
                time.sleep(0.055)  # past five deadlines: the first fires late, four are skipped

    sup = run_tree(rt, NodeRecipe("ticker", Ticker))
    wait_until(lambda: node(sup, "ticker").clock.ticks >= 3)
    assert node(sup, "ticker").clock.missed >= 4


def test_services_inline_async_and_threaded(rt: Runtime) -> None:
    class Server(Node):
        def on_start(self) -> None:
            self.service("/add", lambda req: req[0] + req[1])
            self.service("/slow_add", self.slow_add)
            self.service("/thread_add", lambda req: sum(req), blocking=True)
            self.service("/broken", lambda req: 1 / 0)

        async def slow_add(self, req: tuple[int, int]) -> int:
            await asyncio.sleep(0)
            return req[0] + req[1]

    results: list[Any] = []

    class Client(Node):
        def on_start(self) -> None:
            self.subscribe("/go", self.go)

        async def go(self, _: object) -> None:
            results.append(await self.call("/add", (1, 2)))
            results.append(await self.call("/slow_add", (3, 4)))
            results.append(await self.call("/thread_add", (5, 6)))
            for name in ("/broken", "/missing"):
                try:
                    await self.call(name, ())
                except ServiceError as e:
                    results.append(str(e))

    sup = run_tree(rt, NodeRecipe("server", Server), NodeRecipe("client", Client))
    publish(rt, "/go", None)
    wait_until(lambda: len(results) == 5)
    assert results[:3] == [3, 7, 11]
    assert "service /broken failed: service /broken raised ZeroDivisionError" in results[3]
    assert results[4] == "service /missing is not available"
    wait_until(lambda: sup.restarts("server") == 1)  # the failing handler crashed its server


def test_parameters(rt: Runtime) -> None:
    seen: dict[str, Any] = {}

    class Configured(Node):
        def on_start(self) -> None:
            seen["rate"] = self.get_param("rate")
            seen["frame"] = self.get_param("frame", "map")
            with pytest.raises(UserError, match="no parameter 'nope' \\(parameters: rate\\)"):
                self.get_param("nope")

    run_tree(rt, NodeRecipe("conf", Configured, {"rate": 10}))
    assert seen == {"rate": 10, "frame": "map"}


def test_publish_from_worker_thread_reaches_subscribers(rt: Runtime) -> None:
    class Relay(Node):
        def on_start(self) -> None:
            out = self.publisher("/in")
            self.subscribe("/raw", out.publish, blocking=True)

    sup = run_tree(rt, NodeRecipe("rec", Recorder), NodeRecipe("relay", Relay))
    publish(rt, "/raw", "hello")
    wait_until(lambda: node(sup, "rec").got == ["hello"])


def test_node_start_failure_is_reported(rt: Runtime) -> None:
    class Broken(Node):
        async def on_start(self) -> None:
            raise KeyError("calibration")

    sup = Supervisor(rt, "top", [ChildSpec(NodeRecipe("broken", Broken))])
    with pytest.raises(Exception, match="KeyError: 'calibration'"):
        rt.wait(sup.start_async())


def test_bad_node_name_and_policy_are_clear_errors(rt: Runtime) -> None:
    with pytest.raises(UserError, match="invalid node name '9lives'"):
        NodeHandle(rt, "9lives", Recorder)

    class BadPolicy(Node):
        def on_start(self) -> None:
            self.subscribe("/x", print, overflow="drop_all")

    sup = Supervisor(rt, "top", [ChildSpec(NodeRecipe("bad", BadPolicy))])
    with pytest.raises(
        Exception, match="unknown overflow policy 'drop_all': allowed are drop_oldest"
    ):
        rt.wait(sup.start_async())
