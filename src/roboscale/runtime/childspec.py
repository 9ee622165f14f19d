"""Child specs as OTP's: pure data, checked all together before any child starts.

A `ChildSpec` says how to supervise a child (restart type, shutdown, restart delay,
significance) and carries its start recipe, never a live handle: OTP's `{M, F, A}`.
The supervisor builds a fresh handle from the recipe at every start and restart, so
nothing an instance did survives it (a new `Node`, a new `NodeHandle` with a fresh copy
of its parameters, a sub-supervisor with its full list of children again).

Recipes, one kind per module that owns the handle:

- `NodeRecipe` (runtime/node.py): an in-process node, its class and parameters;
- `SupervisorRecipe` (runtime/supervisor.py): a sub-supervisor and its child specs;
- `WatchedRecipe` (runtime/watchdog.py): another recipe's child under a watchdog;
- `Recipe` (here): any other `ChildHandle` class or function and its arguments, as
  `{M, F, A}` itself: process nodes, commands, a ROS master, remote nodes.

`check_childspecs` is OTP's `check_childspecs/1`: every spec of a tree, sub-supervisors'
included, is checked before the first child starts, and each problem names the child
by its path and the field (`/robot/faces/w1: shutdown_s: must be >= 0 s, got -1`).
"""

from __future__ import annotations

import enum
import inspect
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from roboscale.errors import UserError
from roboscale.runtime.child import ChildHandle, ChildRecipe
from roboscale.runtime.names import NAME_RULE, is_valid_name

if TYPE_CHECKING:
    from roboscale.runtime.executor import Runtime


class Restart(enum.Enum):
    PERMANENT = "permanent"  # always restarted
    TRANSIENT = "transient"  # restarted only after an abnormal exit (CRASH, KILLED, HUNG)
    TEMPORARY = "temporary"  # never restarted; removed when it ends


BRUTAL_KILL = 0.0  # shutdown value: kill at once, no graceful stop
INFINITY = math.inf  # shutdown value: wait as long as it takes (the default for supervisors)


class _NoArgs(Mapping[str, Any]):
    """No keyword arguments: one immutable, hashable empty mapping that every recipe without
    any shares (a recipe's default must be hashable; MappingProxyType is not before 3.12)."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "{}"


NO_ARGS: Mapping[str, Any] = _NoArgs()


@dataclass(frozen=True, slots=True)
class ChildSpec:
    """A child and how to supervise it: its start recipe and OTP's restart, shutdown,
    significant; plus roslaunch's respawn_delay. Plain data, checked by `check_childspecs`
    when a supervisor is made (a bad value is reported, with every other one, then)."""

    recipe: ChildRecipe
    restart: Restart = Restart.PERMANENT
    shutdown_s: float = 5.0  # graceful stop allowed this long, then killed
    restart_delay_s: float = 0.0  # wait this long before restarting it (respawn_delay)
    # OTP's significant child with auto_shutdown=any_significant (roslaunch's required):
    # when it ends and is not restarted, the supervisor stops all its children and ends.
    significant: bool = False

    @property
    def name(self) -> str:
        return self.recipe.name.lstrip("/")


@dataclass(frozen=True, slots=True)
class Recipe:
    """OTP's `{M, F, A}`: `start(*args, **kwargs)` makes a fresh handle named `name`.

    For handle classes that need no runtime (process nodes, commands, a ROS master,
    remote nodes): `Recipe("talker", CommandChild, ("talker", ["rosrun", "demo", "t"]))`.
    The arguments are checked against `start`'s signature before anything starts."""

    name: str
    start: Callable[..., ChildHandle]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default=NO_ARGS)

    def build(self, runtime: Runtime) -> ChildHandle:
        return self.start(*self.args, **self.kwargs)

    def check(self, path: str) -> list[str]:
        problems = name_problems(self.name, path)
        if not callable(self.start):
            return [*problems, f"{path}: start: {self.start!r} is not callable"]
        if not isinstance(self.args, tuple) or not isinstance(self.kwargs, Mapping):
            return [*problems, f"{path}: args: a tuple and a mapping of keyword arguments"]
        try:
            inspect.signature(self.start).bind(*self.args, **self.kwargs)
        except TypeError as e:
            problems.append(f"{path}: args: {_start_name(self.start)}: {e}")
        except ValueError:
            pass  # no signature to check against (a builtin): it fails when started
        return problems


def _start_name(start: Callable[..., Any]) -> str:
    return getattr(start, "__qualname__", None) or repr(start)


def name_problems(name: object, path: str) -> list[str]:
    """A child's name: a ROS-style name, the last segment of its path in the tree."""
    if isinstance(name, str) and is_valid_name(name):
        return []
    return [f"{path}: name: {name!r} is not a valid name: allowed are {NAME_RULE}"]


def is_recipe(value: object) -> TypeGuard[ChildRecipe]:
    """A ChildRecipe, asked cheaply: a runtime_checkable isinstance costs microseconds,
    which counts when a tree of 100,000 children is checked."""
    return callable(getattr(value, "build", None)) and callable(getattr(value, "check", None))


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def spec_problems(spec: object, path: str) -> list[str]:
    """One spec's problems (its recipe's included), each `path: field: what is wrong`."""
    if not isinstance(spec, ChildSpec):
        return [f"{path}: {spec!r} is not a ChildSpec"]
    problems: list[str] = []
    if not isinstance(spec.restart, Restart):
        allowed = ", ".join(r.value for r in Restart)
        problems.append(f"{path}: restart: {spec.restart!r} is not allowed: allowed are {allowed}")
    shutdown = spec.shutdown_s
    if not _number(shutdown) or math.isnan(shutdown) or shutdown < 0:
        problems.append(
            f"{path}: shutdown_s: must be >= 0 s (0: brutal kill, INFINITY: wait), got {shutdown!r}"
        )
    delay = spec.restart_delay_s
    if not _number(delay) or not math.isfinite(delay) or delay < 0:
        problems.append(f"{path}: restart_delay_s: must be a finite number >= 0 s, got {delay!r}")
    if not isinstance(spec.significant, bool):
        problems.append(f"{path}: significant: must be True or False, got {spec.significant!r}")
    recipe = spec.recipe
    if is_recipe(recipe):
        problems += recipe.check(path)
    else:
        problems.append(
            f"{path}: recipe: {recipe!r} is not a start recipe (NodeRecipe, SupervisorRecipe, "
            "Recipe, WatchedRecipe): a child spec carries how to start a child, not a child"
        )
    return problems


def childspec_problems(specs: Iterable[object], where: str) -> list[str]:
    """The problems of a supervisor's child specs (at `where`), sub-supervisors' included:
    OTP's check_childspecs. Empty when all are good."""
    problems: list[str] = []
    seen: set[str] = set()
    for i, spec in enumerate(specs):
        name = getattr(getattr(spec, "recipe", None), "name", None)
        label = f"{where}/{name.lstrip('/')}" if isinstance(name, str) else f"{where}[{i}]"
        problems += spec_problems(spec, label)
        if isinstance(name, str):
            short = name.lstrip("/")
            if short in seen:
                problems.append(f"{label}: name: two children named {short!r} in {where}")
            seen.add(short)
    return problems


def check_childspecs(specs: Iterable[object], where: str) -> None:
    """Raise one UserError listing every problem of these specs, if there is any."""
    problems = childspec_problems(specs, where)
    if len(problems) == 1:
        raise UserError(f"invalid child spec: {problems[0]}")
    if problems:
        raise UserError("invalid child specs:\n  " + "\n  ".join(problems))
