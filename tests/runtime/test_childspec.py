"""Child specs carry start recipes, as OTP's {M, F, A}: plain data, all checked before any
child starts, and a fresh instance built from the recipe at every start and restart."""

from __future__ import annotations

import dataclasses
import math

import pytest

from roboscale.errors import UserError
from roboscale.runtime.child import ExitCallback, ExitReason
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.node import Node, NodeHandle, NodeRecipe
from roboscale.runtime.supervisor import (
    ChildSpec,
    Recipe,
    Restart,
    Supervisor,
    SupervisorRecipe,
)

from .conftest import wait_until


class Counting(Node):
    """Changes its own parameters and records what it found in them at start."""

    def on_start(self) -> None:
        self.params["found"].append(sorted(self.params))
        self.params["mine"] = len(self.params["found"])  # an instance's own state
        self.subscribe(f"/{self.name}/cmd", self.on_cmd)

    def on_cmd(self, msg: str) -> None:
        raise RuntimeError(msg)


class Worker(Node):
    def on_start(self) -> None:
        self.subscribe(f"/{self.name}/cmd", self.on_cmd)

    def on_cmd(self, msg: str) -> None:
        raise RuntimeError(msg)


def crash(rt: Runtime, name: str) -> None:
    rt.call(lambda: rt.bus.topic(f"/{name}/cmd").publish("crash"))


def test_a_restart_builds_a_fresh_instance_from_the_recipe(rt: Runtime) -> None:
    """OTP: a restart calls the start function again; nothing of the old instance is reused:
    a new handle, a new node, and parameters as the recipe gave them (not as the last
    instance left them)."""
    found: list[list[str]] = []
    recipe = NodeRecipe("a", Counting, {"found": found})
    sup = Supervisor(rt, "top", [ChildSpec(recipe)], intensity=Intensity(10, 1.0))
    rt.wait(sup.start_async())
    first: NodeHandle = sup.child("a")
    crash(rt, "a")
    wait_until(lambda: sup.restarts("a") == 1)
    second: NodeHandle = sup.child("a")
    assert second is not first and second.node is not None and first.node is None
    assert found == [["found"], ["found"]]  # the first instance's "mine" did not leak
    assert dict(recipe.params) == {"found": found}  # the recipe is untouched
    assert second.path == first.path == "/top/a"
    rt.wait(sup.stop_async())


class Ticket:
    """A child in a thread of its own that counts the instances built of its recipe."""

    def __init__(self, name: str, built: list[Ticket]) -> None:
        self.name = name
        built.append(self)
        self.number = len(built)
        self.on_exit: ExitCallback | None = None

    def start(self, on_exit: ExitCallback) -> None:
        self.on_exit = on_exit

    def stop(self, timeout_s: float) -> None:
        self.on_exit = None

    def alive(self) -> bool:
        return self.on_exit is not None

    def crash(self) -> None:
        on_exit, self.on_exit = self.on_exit, None
        assert on_exit is not None
        on_exit(self.name, ExitReason.CRASH, "boom")


def test_any_handle_class_is_started_from_its_recipe_each_time(rt: Runtime) -> None:
    built: list[Ticket] = []
    sup = Supervisor(rt, "top", [ChildSpec(Recipe("t", Ticket, ("t", built)))])
    assert built == []  # nothing is made before the supervisor starts the child
    rt.wait(sup.start_async())
    rt.call(sup.child("t").crash)
    wait_until(lambda: sup.restarts("t") == 1)
    assert [t.number for t in built] == [1, 2] and sup.child("t") is built[1]
    rt.wait(sup.stop_async())
    assert not built[1].alive()


def test_a_restarted_sub_supervisor_has_all_its_children_again(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    """OTP: a restarted supervisor runs init/1 again: a temporary child that ended and was
    removed is in the new instance again."""
    inner = SupervisorRecipe(
        "inner",
        [ChildSpec(NodeRecipe("t", Worker), Restart.TEMPORARY), ChildSpec(NodeRecipe("a", Worker))],
        intensity=Intensity(0, 60.0),  # the first restart gives up: the parent restarts it
    )
    top = Supervisor(rt, "top", [ChildSpec(inner)], intensity=Intensity(5, 60.0))
    rt.wait(top.start_async())
    first = top.child("inner")
    crash(rt, "t")
    wait_until(lambda: [s.name for s in first.children] == ["a"])  # removed, not restarted
    crash(rt, "a")  # more than 0 restarts: the inner supervisor gives up and is restarted
    wait_until(lambda: top.restarts("inner") == 1)
    fresh = top.child("inner")
    assert fresh is not first and [s.name for s in fresh.children] == ["t", "a"]
    assert fresh.child("t").alive() and fresh.child("a").alive()
    rt.wait(top.stop_async())


class NeedsArgs:
    def __init__(self, name: str, argv: list[str]) -> None:
        self.name = name


def test_every_bad_spec_of_the_tree_is_reported_before_anything_starts(
    rt: Runtime, events: list[SupervisionEvent]
) -> None:
    """OTP's check_childspecs: the whole tree is checked first; each problem names the child
    by its path and the field."""
    inner = SupervisorRecipe(
        "inner",
        [
            ChildSpec(NodeRecipe("b", Worker), restart_delay_s=math.nan),
            ChildSpec(Recipe("c", NeedsArgs, ("c",))),  # type: ignore[arg-type]
            ChildSpec(NodeRecipe("d", Worker, heartbeat_s=0)),
        ],
    )
    specs = [
        ChildSpec(NodeRecipe("a", Worker), shutdown_s=-1),
        ChildSpec(NodeRecipe("9lives", Worker)),
        ChildSpec(inner, restart="always"),  # type: ignore[arg-type]
        ChildSpec(NodeRecipe("a", Worker)),
    ]
    with pytest.raises(UserError) as raised:
        Supervisor(rt, "top", specs)
    assert str(raised.value).splitlines() == [
        "invalid child specs:",
        "  /top/a: shutdown_s: must be >= 0 s (0: brutal kill, INFINITY: wait), got -1",
        "  /top/9lives: name: '9lives' is not a valid name: allowed are segments separated by "
        "'/', each starting with a letter followed by letters, digits or '_' "
        "(e.g. /camera/image_raw)",
        "  /top/inner: restart: 'always' is not allowed: allowed are permanent, transient, "
        "temporary",
        "  /top/inner/b: restart_delay_s: must be a finite number >= 0 s, got nan",
        "  /top/inner/c: args: NeedsArgs: missing a required argument: 'argv'",
        "  /top/inner/d: heartbeat_s: must be a number of seconds > 0, got 0",
        "  /top/a: name: two children named 'a' in /top",
    ]
    assert events == []  # nothing started


def test_a_recipe_that_builds_another_child_fails_its_start(rt: Runtime) -> None:
    built: list[Ticket] = []
    sup = Supervisor(rt, "top", [ChildSpec(Recipe("t", Ticket, ("u", built)))])
    with pytest.raises(Exception, match="its recipe built a child named 'u'"):
        rt.wait(sup.start_async())


def test_a_spec_holding_a_live_handle_is_refused(rt: Runtime) -> None:
    """A child spec says how to start a child; a running object has no place in it."""
    handle = NodeHandle(rt, "a", Worker)
    with pytest.raises(UserError, match=r"/top/a: recipe: .* is not a start recipe"):
        Supervisor(rt, "top", [ChildSpec(handle)])  # type: ignore[arg-type]


def test_specs_and_recipes_are_plain_values() -> None:
    spec = ChildSpec(NodeRecipe("a", Worker, {"rate": 10}), shutdown_s=1.0)
    assert spec == ChildSpec(NodeRecipe("a", Worker, {"rate": 10}), shutdown_s=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.shutdown_s = 2.0  # type: ignore[misc]
    listed = SupervisorRecipe("s", [spec])
    assert listed.children == (spec,)  # a snapshot: the caller's list may change after
