"""The `Stack` protocol: one face tracker, built on several middleware stacks.

A stack is registered by name in `STACKS` (`module` or `module:ATTRIBUTE`) and imported
only when chosen, as backends are, so a missing middleware breaks no other stack. Every
stack runs the same roles (`pipeline.py`) on the same frames and returns the same
`TrackerRun` (`records.py`):

    stack = get_stack("runtime")
    stack.check()                                   # StackUnavailable with an install hint
    tracker = stack.start(cfg, workdir)             # everything up, every worker ready
    try:
        run = tracker.run()                         # cfg.frames at cfg.fps, cfg.kills fired
    finally:
        tracker.stop()                              # nothing left running, even on error

or `run_tracker(name, cfg, workdir)`. `run()` fires `cfg.kills` itself, when frame
`kills.at_frame` is captured, through `pick_victims` (seeded, the same victims in every
stack), and times each restart from the kill to the new worker being ready. `kill()` is
also callable from outside, between or during runs, for tests and the chaos monkey.
"""

from __future__ import annotations

import importlib
import random
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from roboscale.errors import UserError
from roboscale.facetrack.config import ConfigError, TrackerConfig
from roboscale.facetrack.records import ProcessUsage, TrackerRun

Progress = Callable[[int, int], None]  # (frames done, frames in all)


class StackUnavailable(UserError):
    """The stack's middleware is not installed here; the hint says how to install it."""


class RunningTracker(Protocol):
    def run(self, progress: Progress | None = None) -> TrackerRun: ...

    def processes(self) -> list[ProcessUsage]: ...

    def kill(self, worker: int, method: str) -> int:
        """Kill worker `worker` by `method` (one of the stack's `kill_methods`); the kill's
        CLOCK_MONOTONIC ns. Other targets (`kills.target`) are killed by `run` itself."""
        ...

    def stop(self) -> None: ...


class Stack(Protocol):
    name: str
    summary: str  # one line: what runs where
    kill_methods: tuple[str, ...]
    kill_targets: tuple[str, ...]  # of KILL_TARGETS: what `kills.target` may name

    def check(self) -> None: ...

    def version(self) -> str: ...

    def start(self, cfg: TrackerConfig, workdir: Path) -> RunningTracker: ...


# name -> "module" or "module:ATTRIBUTE"; each stack module adds its line when it lands.
STACKS: dict[str, str] = {
    "runtime": "roboscale.facetrack.stacks.runtime:INPROCESS",
    "runtime-proc": "roboscale.facetrack.stacks.runtime:PROCESS",
    "ros1": "roboscale.facetrack.stacks.ros1",
    "erlang": "roboscale.facetrack.stacks.erlang",
}


def known_stacks() -> list[str]:
    return list(STACKS)


def get_stack(name: str) -> Stack:
    if name not in STACKS:
        known = ", ".join(STACKS) or "(none installed)"
        raise ConfigError("stack", f"{name!r} is not a known stack; known: {known}")
    module_name, _, attribute = STACKS[name].partition(":")
    stack: Stack = getattr(importlib.import_module(module_name), attribute or "STACK")
    return stack


def check_kills(stack: Stack, cfg: TrackerConfig) -> None:
    if cfg.kills.count and cfg.kills.method not in stack.kill_methods:
        allowed = ", ".join(stack.kill_methods)
        raise ConfigError(
            "kills.method",
            f"stack {stack.name} cannot kill by {cfg.kills.method!r}; it can: {allowed}",
        )
    if cfg.kills.count and cfg.kills.target not in stack.kill_targets:
        allowed = ", ".join(stack.kill_targets)
        raise ConfigError(
            "kills.target",
            f"stack {stack.name} cannot kill its {cfg.kills.target}; it can kill: {allowed}",
        )
    if (
        cfg.kills.count
        and cfg.kills.target.endswith("_supervisor")
        and cfg.kills.method != "sigkill"
    ):
        # An OTP supervisor traps exits: a shutdown signal from outside its tree is a
        # message to it, not its end. Only exit(Pid, kill) stops it.
        raise ConfigError(
            "kills.method",
            f"a {cfg.kills.target} traps exits and outlives {cfg.kills.method!r}; it can be "
            "killed by sigkill only",
        )


def pick_victims(cfg: TrackerConfig) -> list[int]:
    """The workers `cfg.kills` hits, in order: distinct while there are workers left (the
    paper killed 10 to 90 of 100), then again from the start. Seeded by the config."""
    rng = random.Random(cfg.seed * 7919 + cfg.kills.count)
    victims: list[int] = []
    while len(victims) < cfg.kills.count:
        batch = list(range(cfg.workers))
        rng.shuffle(batch)
        victims.extend(batch[: cfg.kills.count - len(victims)])
    return victims


def run_tracker(
    name: str, cfg: TrackerConfig, workdir: Path, progress: Progress | None = None
) -> TrackerRun:
    stack = get_stack(name)
    stack.check()
    check_kills(stack, cfg)
    tracker = stack.start(cfg, workdir)
    try:
        return tracker.run(progress)
    finally:
        tracker.stop()
