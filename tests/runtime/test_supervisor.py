"""One test per rule of the OTP supervisor documentation (the rule is in each docstring)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from roboscale.runtime.child import ChildStartError, ExitCallback, ExitReason
from roboscale.runtime.events import JsonLinesRecorder, SupervisionEvent, read_events
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import (
    BRUTAL_KILL,
    ChildSpec,
    Recipe,
    Restart,
    Strategy,
    Supervisor,
    SupervisorRecipe,
)

from .conftest import wait_until


class Worker(Node):
    """Crashes on the message "crash", finishes normally on "finish"."""

    def on_start(self) -> None:
        self.subscribe(f"/{self.name}/cmd", self.on_cmd)

    def on_cmd(self, msg: str) -> None:
        if msg == "crash":
            raise RuntimeError("asked to crash")
        if msg == "finish":
            self.finish()


class FailsToStart(Node):
    def on_start(self) -> None:
        raise ValueError("no camera")


class SlowShutdown(Node):
    async def on_shutdown(self) -> None:
        await asyncio.sleep(60)


def workers(rt: Runtime, names: str, **spec: Any) -> list[ChildSpec]:
    return [ChildSpec(NodeRecipe(n, Worker), **spec) for n in names.split()]


def instances(sup: Supervisor) -> dict[str, object]:
    return {name: handle.node for name, handle in sup.which_children()}


def send(rt: Runtime, topic: str, msg: str) -> None:
    rt.call(lambda: rt.bus.topic(topic).publish(msg))


def kinds(events: list[SupervisionEvent], *wanted: str) -> list[tuple[str, str]]:
    return [(e.kind, e.child) for e in events if e.kind in wanted]


def started(rt: Runtime, sup: Supervisor) -> Supervisor:
    rt.wait(sup.start_async())
    return sup


def test_children_start_in_order_and_stop_in_reverse(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    """OTP: child processes are started in the order specified and terminated in reverse order."""
    sup = started(rt, Supervisor(rt, "top", workers(rt, "a b c")))
    rt.wait(sup.stop_async())
    assert kinds(events, "started", "stopped") == [
        ("started", "a"),
        ("started", "b"),
        ("started", "c"),
        ("stopped", "c"),
        ("stopped", "b"),
        ("stopped", "a"),
    ]


def test_start_failure_stops_started_children_and_fails_the_supervisor(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    """OTP: if a child fails to start, the supervisor terminates the children already started
    (in reverse order) and fails to start itself."""
    specs = [*workers(rt, "a b"), ChildSpec(NodeRecipe("cam", FailsToStart))]
    sup = Supervisor(rt, "top", [*specs, *workers(rt, "d")])
    with pytest.raises(ChildStartError, match="cam: ValueError: no camera"):
        rt.wait(sup.start_async())
    assert kinds(events, "started", "start_failed", "stopped") == [
        ("started", "a"),
        ("started", "b"),
        ("start_failed", "cam"),
        ("stopped", "b"),
        ("stopped", "a"),
    ]
    assert not sup.alive()


def test_one_for_one_restarts_only_the_failed_child(rt: Runtime) -> None:
    """OTP one_for_one: if a child terminates, only that child is restarted."""
    sup = started(rt, Supervisor(rt, "top", workers(rt, "a b c")))
    before = instances(sup)
    send(rt, "/b/cmd", "crash")
    wait_until(lambda: sup.restarts("b") == 1)
    after = instances(sup)
    assert after["a"] is before["a"] and after["c"] is before["c"]
    assert after["b"] is not before["b"] and sup.child("b").alive()
    rt.wait(sup.stop_async())


def test_one_for_all_restarts_every_child(rt: Runtime, events: list[SupervisionEvent]) -> None:
    """OTP one_for_all: if a child terminates, all other children are terminated and then
    all children are restarted (terminated in reverse order, restarted in order)."""
    sup = started(rt, Supervisor(rt, "top", workers(rt, "a b c"), strategy=Strategy.ONE_FOR_ALL))
    before = instances(sup)
    events.clear()
    send(rt, "/b/cmd", "crash")
    wait_until(lambda: all(sup.restarts(n) == 1 for n in "abc"))
    after = instances(sup)
    assert all(after[n] is not before[n] for n in "abc")
    assert kinds(events, "exited", "stopped", "started") == [
        ("exited", "b"),
        ("stopped", "c"),
        ("stopped", "a"),
        ("started", "a"),
        ("started", "b"),
        ("started", "c"),
    ]
    rt.wait(sup.stop_async())


def test_rest_for_one_restarts_the_failed_child_and_those_after_it(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    """OTP rest_for_one: if a child terminates, the children started after it are terminated,
    then the terminated child and the rest are restarted."""
    specs = workers(rt, "a b c d")
    sup = started(rt, Supervisor(rt, "top", specs, strategy=Strategy.REST_FOR_ONE))
    before = instances(sup)
    events.clear()
    send(rt, "/b/cmd", "crash")
    wait_until(lambda: sup.restarts("d") == 1)
    after = instances(sup)
    assert after["a"] is before["a"]
    assert all(after[n] is not before[n] for n in "bcd")
    assert kinds(events, "stopped", "started") == [
        ("stopped", "d"),
        ("stopped", "c"),
        ("started", "b"),
        ("started", "c"),
        ("started", "d"),
    ]
    rt.wait(sup.stop_async())


def test_permanent_child_is_always_restarted(rt: Runtime) -> None:
    """OTP permanent: the child process is always restarted, even after a normal exit."""
    specs = workers(rt, "a", restart=Restart.PERMANENT)
    sup = started(rt, Supervisor(rt, "top", specs, intensity=Intensity(10, 5.0)))
    send(rt, "/a/cmd", "finish")
    wait_until(lambda: sup.restarts("a") == 1)
    send(rt, "/a/cmd", "crash")
    wait_until(lambda: sup.restarts("a") == 2)
    assert sup.child("a").alive()
    rt.wait(sup.stop_async())


def test_transient_child_restarted_only_after_abnormal_exit(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    """OTP transient: restarted only if it terminates abnormally, not after a normal exit."""
    sup = started(rt, Supervisor(rt, "top", workers(rt, "a b", restart=Restart.TRANSIENT)))
    send(rt, "/a/cmd", "crash")
    wait_until(lambda: sup.restarts("a") == 1)
    send(rt, "/b/cmd", "finish")
    wait_until(lambda: ("exited", "b") in kinds(events, "exited"))
    rt.call(lambda: None)  # let the supervisor handle the exit
    assert sup.restarts("b") == 0 and not sup.child("b").alive()
    assert [s.name for s in sup.children] == ["a", "b"]  # the spec is kept
    rt.wait(sup.stop_async())


def test_temporary_child_is_never_restarted_and_is_removed(rt: Runtime) -> None:
    """OTP temporary: never restarted, even after a crash; the child spec is removed."""
    sup = started(rt, Supervisor(rt, "top", workers(rt, "a b", restart=Restart.TEMPORARY)))
    send(rt, "/a/cmd", "crash")
    wait_until(lambda: [s.name for s in sup.children] == ["b"])
    rt.wait(sup.stop_async())


def test_temporary_sibling_is_not_restarted_by_one_for_all(rt: Runtime) -> None:
    """OTP: a temporary child terminated because a sibling died is not restarted."""
    specs = [*workers(rt, "a"), *workers(rt, "t", restart=Restart.TEMPORARY), *workers(rt, "c")]
    sup = started(rt, Supervisor(rt, "top", specs, strategy=Strategy.ONE_FOR_ALL))
    send(rt, "/a/cmd", "crash")
    wait_until(lambda: sup.restarts("c") == 1)
    assert [s.name for s in sup.children] == ["a", "c"]
    rt.wait(sup.stop_async())


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_restart_intensity_exceeded_terminates_children_and_escalates(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    """OTP: if more than MaxR restarts occur within MaxT seconds, the supervisor terminates all
    its children and then itself, with reason shutdown; its parent handles that exit."""
    recipe = SupervisorRecipe("inner", workers(rt, "a b"), intensity=Intensity(2, 10.0))
    top = started(rt, Supervisor(rt, "top", [ChildSpec(recipe)], intensity=Intensity(5, 10.0)))
    inner = top.child("inner")
    for i in range(2):
        send(rt, "/a/cmd", "crash")
        wait_until(lambda i=i: inner.restarts("a") == i + 1)
    first_instance = inner.ended
    send(rt, "/a/cmd", "crash")  # third restart within 10 s: more than 2
    wait_until(lambda: top.restarts("inner") == 1)
    assert first_instance is not None and first_instance.done()
    assert "more than 2 restarts within 10s" in first_instance.result()
    gave_up = [e for e in events if e.kind in {"gave_up", "escalated"}]
    assert [(e.kind, e.supervisor) for e in gave_up] == [
        ("gave_up", "/top/inner"),
        ("escalated", "/top/inner"),
    ]
    esc = gave_up[1]
    assert esc.reason == "shutdown"
    # The children still running were stopped before the escalation ("a" had just crashed).
    seen = [(e.kind, e.child) for e in events if e.supervisor == "/top/inner"]
    i = seen.index(("gave_up", ""))
    assert seen[i - 1 : i + 3] == [
        ("exited", "a"),
        ("gave_up", ""),
        ("stopped", "b"),
        ("escalated", ""),
    ]
    # The parent restarted the sub-supervisor: a new instance, which started fresh children
    # and counts its restarts from zero.
    fresh = top.child("inner")
    assert fresh is not inner and not inner.alive() and fresh.alive()
    assert fresh.child("a").alive() and fresh.child("b").alive() and fresh.restarts("a") == 0
    rt.wait(top.stop_async())


def test_restarts_spread_beyond_the_period_do_not_give_up(rt: Runtime) -> None:
    """OTP: restarts older than MaxT seconds no longer count towards the intensity."""
    clock = FakeClock()
    sup = started(
        rt, Supervisor(rt, "top", workers(rt, "a"), intensity=Intensity(1, 5.0), clock=clock)
    )
    for i in range(4):
        clock.now += 6.0
        send(rt, "/a/cmd", "crash")
        wait_until(lambda i=i: sup.restarts("a") == i + 1)
    assert sup.alive()
    rt.wait(sup.stop_async())


def test_shutdown_timeout_then_kill(rt: Runtime, events: list[SupervisionEvent]) -> None:
    """OTP shutdown: the child is asked to terminate and, if it has not within the shutdown
    time, it is unconditionally killed."""
    slow = ChildSpec(NodeRecipe("slow", SlowShutdown), shutdown_s=0.05)
    quick = workers(rt, "quick", shutdown_s=5.0)
    sup = started(rt, Supervisor(rt, "top", [slow, *quick]))
    rt.wait(sup.stop_async())
    assert kinds(events, "stopped", "killed") == [("stopped", "quick"), ("killed", "slow")]
    assert not sup.child("slow").alive()


def test_brutal_kill_skips_the_graceful_stop(rt: Runtime, events: list[SupervisionEvent]) -> None:
    """OTP brutal_kill: the child is terminated unconditionally, without a shutdown request."""
    called: list[str] = []

    class Tracked(Node):
        def on_shutdown(self) -> None:
            called.append(self.name)

    spec = ChildSpec(NodeRecipe("b", Tracked), shutdown_s=BRUTAL_KILL)
    sup = started(rt, Supervisor(rt, "top", [spec]))
    rt.wait(sup.stop_async())
    assert called == [] and kinds(events, "killed") == [("killed", "b")]


def test_failed_restart_is_retried_and_counts_towards_intensity(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    """OTP: when a restart fails, the supervisor tries again; each try counts as a restart,
    so a child that can never restart makes the supervisor give up."""
    attempts: list[int] = []

    class BreaksAfterFirst(Worker):
        def on_start(self) -> None:
            attempts.append(1)
            if len(attempts) > 1:
                raise OSError("device gone")
            super().on_start()

    spec = ChildSpec(NodeRecipe("a", BreaksAfterFirst))
    sup = started(rt, Supervisor(rt, "top", [spec], intensity=Intensity(3, 60.0)))
    send(rt, "/a/cmd", "crash")
    assert sup.ended is not None
    wait_until(sup.ended.done)
    assert len(attempts) == 1 + 3  # the first start, then 3 failed restarts, then it gives up
    assert kinds(events, "gave_up") == [("gave_up", "")]


class ThreadChild:
    """A real child running in its own thread, reporting its exit from that thread."""

    def __init__(self, name: str, starts: list[ThreadChild]) -> None:
        self.name = name
        self.crash = threading.Event()
        self.starts = starts
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self, on_exit: ExitCallback) -> None:
        self._stop.clear()
        self.crash.clear()
        self.starts.append(self)

        def run() -> None:
            while not self._stop.wait(0.001):
                if self.crash.is_set():
                    on_exit(self.name, ExitReason.CRASH, "crash flag")
                    return

        self._thread = threading.Thread(target=run, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()


def test_exit_reported_from_another_thread_is_handled(rt: Runtime) -> None:
    """Exits may be reported from any thread; the supervisor handles them on its loop."""
    starts: list[ThreadChild] = []
    sup = started(rt, Supervisor(rt, "top", [ChildSpec(Recipe("t", ThreadChild, ("t", starts)))]))
    first = sup.child("t")
    first.crash.set()
    wait_until(lambda: sup.restarts("t") == 1)
    second = sup.child("t")
    assert starts == [first, second] and second is not first  # a fresh instance
    wait_until(second.alive)
    rt.wait(sup.stop_async())
    assert not second.alive()


def test_events_are_recorded_as_json_lines(rt: Runtime, tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    recorder = JsonLinesRecorder(path)
    rt.subscribers.append(recorder)
    sup = started(rt, Supervisor(rt, "top", workers(rt, "a")))
    send(rt, "/a/cmd", "crash")
    wait_until(lambda: sup.restarts("a") == 1)
    rt.wait(sup.stop_async())
    recorder.close()
    recorded = read_events(path)
    assert [e.kind for e in recorded] == ["started", "exited", "started", "restarted", "stopped"]
    assert recorded[1].reason == "crash" and "asked to crash" in recorded[1].detail
    assert json.loads(path.read_text().splitlines()[0])["supervisor"] == "/top"


def test_two_children_with_one_name_are_refused(rt: Runtime) -> None:
    with pytest.raises(Exception, match="two children named 'a'"):
        Supervisor(rt, "top", workers(rt, "a a"))


# -- the restart fast path: same semantics, no loop turn ------------------------------------


class Stamped(Node):
    """Counts its starts in a shared list; crashes on "crash" like Worker."""

    def on_start(self) -> None:
        self.params["starts"].append(self)
        self.subscribe(f"/{self.name}/cmd", self.on_cmd)

    def on_cmd(self, msg: str) -> None:
        if msg == "crash":
            raise RuntimeError("asked to crash")


class SlowStart(Node):
    async def on_start(self) -> None:
        self.params["starts"].append(self)
        await asyncio.sleep(float(self.params["delay"]["s"]))


def test_idle_one_for_one_restarts_before_the_kill_returns(rt: Runtime) -> None:
    """An in-process child of an idle one_for_one supervisor is restarted in the same loop turn."""
    starts: list[Node] = []
    recipe = NodeRecipe("a", Stamped, {"starts": starts})
    sup = started(rt, Supervisor(rt, "top", [ChildSpec(recipe)], intensity=Intensity(10, 1.0)))

    def kill_and_look() -> tuple[int, bool]:
        sup.child("a").kill()
        return len(starts), sup.child("a").alive()

    assert rt.call(kill_and_look) == (2, True)
    assert sup.restarts("a") == 1
    rt.wait(sup.stop_async())


def test_exits_reported_together_are_handled_in_order(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    """Exits reported while the supervisor handles another one queue and are handled in order."""
    starts: list[Node] = []
    specs = [ChildSpec(NodeRecipe(n, Stamped, {"starts": starts})) for n in "abc"]
    sup = started(rt, Supervisor(rt, "top", specs, intensity=Intensity(10, 1.0)))

    def kill_all() -> None:
        for h in [sup.child(n) for n in "abc"]:
            h.kill()

    rt.call(kill_all)
    wait_until(lambda: all(sup.restarts(n) == 1 for n in "abc"))
    assert kinds(events, "exited", "restarted") == [
        ("exited", "a"),
        ("restarted", "a"),
        ("exited", "b"),
        ("restarted", "b"),
        ("exited", "c"),
        ("restarted", "c"),
    ]
    rt.wait(sup.stop_async())


def test_async_on_start_restart_finishes_before_the_next_exit(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    """A restart whose on_start awaits holds back later exits until it is ready."""
    starts: list[Node] = []
    slow = NodeRecipe("slow", SlowStart, {"starts": starts, "delay": {"s": 0.05}})
    fast = NodeRecipe("fast", Stamped, {"starts": starts})
    sup = started(
        rt, Supervisor(rt, "top", [ChildSpec(slow), ChildSpec(fast)], intensity=Intensity(10, 1.0))
    )

    def kill_both() -> None:
        sup.child("slow").kill()
        sup.child("fast").kill()

    rt.call(kill_both)
    wait_until(lambda: sup.restarts("fast") == 1)
    assert kinds(events, "restarted") == [("restarted", "slow"), ("restarted", "fast")]
    assert sup.child("slow").alive() and sup.child("fast").alive()
    rt.wait(sup.stop_async())


def test_stop_during_an_async_restart_leaves_nothing_running(rt: Runtime) -> None:
    """Stopping a supervisor while a restarted child is still starting cancels that start."""
    starts: list[Node] = []
    delay = {"s": 0.0}  # shared on purpose: what the next instance waits
    slow = NodeRecipe("slow", SlowStart, {"starts": starts, "delay": delay})
    sup = started(rt, Supervisor(rt, "top", [ChildSpec(slow)], intensity=Intensity(10, 1.0)))
    delay["s"] = 60.0
    rt.call(sup.child("slow").kill)
    wait_until(lambda: len(starts) == 2)
    rt.wait(sup.stop_async())
    restarted = sup.child("slow")
    assert not restarted.alive() and restarted.node is None
    assert not starts[-1].alive


def test_fast_path_gives_up_past_the_intensity(rt: Runtime) -> None:
    """The fast path counts restarts like the mailbox path: past the intensity, give up."""
    clock = FakeClock()
    starts: list[Node] = []
    recipe = NodeRecipe("a", Stamped, {"starts": starts})
    sup = started(
        rt, Supervisor(rt, "top", [ChildSpec(recipe)], intensity=Intensity(2, 10.0), clock=clock)
    )
    for _ in range(3):
        rt.call(lambda: sup.child("a").kill())
    assert sup.ended is not None
    wait_until(lambda: sup.ended is not None and sup.ended.done())
    assert not sup.alive() and not sup.child("a").alive()
    assert len(starts) == 3  # the first start and two restarts


class SlowStartChild:
    """An OS-process-like child (blocking start, no start_async); its restarts are slow."""

    def __init__(self, name: str, start_s: float, starts: list[SlowStartChild]) -> None:
        self.name = name
        self.start_s = start_s
        self.starts = starts  # every instance, in the order they started
        self.running = False
        self.on_exit: ExitCallback | None = None

    def start(self, on_exit: ExitCallback) -> None:
        threading.Event().wait(self.start_s if self.starts else 0.0)
        self.starts.append(self)
        self.running = True
        self.on_exit = on_exit

    def stop(self, timeout_s: float) -> None:
        self.running = False

    def alive(self) -> bool:
        return self.running

    def crash(self) -> None:
        self.running = False
        assert self.on_exit is not None
        self.on_exit(self.name, ExitReason.CRASH, "boom")


def test_stopping_during_a_process_childs_restart_leaves_no_instance(rt: Runtime) -> None:
    """A start running in a thread cannot be cancelled: the child is stopped once it ends."""
    starts: list[SlowStartChild] = []
    recipe = Recipe("driver", SlowStartChild, ("driver", 0.3, starts))
    sup = Supervisor(rt, "top", [ChildSpec(recipe)], intensity=Intensity(10, 1))
    rt.wait(sup.start_async())
    first = sup.child("driver")
    rt.call(first.crash)
    wait_until(lambda: sup.child("driver") is not first)  # the restart is under way
    rt.wait(sup.stop_async(5.0))
    wait_until(lambda: len(starts) == 2)  # the restart's thread finished starting it ...
    wait_until(lambda: not starts[1].running)  # ... and the child was stopped again
