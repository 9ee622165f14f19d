"""What a face-tracker sweep asks, checked against what its stacks can honour, when the
spec loads: a kill method a stack lacks, a frame rate or a frame count the tracker's
config refuses (`facetrack/config.py`), and axes no face-tracker trial uses (QoS, the
backend: the tracker runs on its stack) are spec errors naming the file, line and field,
never a trial that fails inside its agent.
"""

from __future__ import annotations

from dataclasses import replace

from roboscale.backends import qos
from roboscale.errors import SpecError
from roboscale.spec.schema import Spec, Sweep
from roboscale.yamlfile import KeyPath, LineMap, dotted, line_for

WORKLOAD = "facetrack"


class _Checker:
    def __init__(self, spec: Spec, file: str, lines: LineMap) -> None:
        self.spec, self.sweep, self.file, self.lines = spec, spec.sweep, file, lines

    def fail(self, loc: KeyPath, problem: str) -> SpecError:
        """An error at `loc`, or at its list when the file wrote one value, not a list."""
        if loc not in self.lines and isinstance(loc[-1], int):
            loc = loc[:-1]
        return SpecError(self.file, line_for(loc, self.lines), dotted(loc), problem)

    def kill_methods(self) -> None:
        from roboscale.facetrack.stack import get_stack

        if not any(self.sweep.kills):
            return  # no worker is killed: the method is never used
        for name in self.sweep.stack:
            able = get_stack(name).kill_methods
            for i, method in enumerate(self.sweep.kill_method):
                if method not in able:
                    raise self.fail(
                        ("sweep", "kill_method", i),
                        f"stack {name!r} cannot kill by {method!r}; it can: {', '.join(able)} "
                        "(crash fails an in-process worker: stack runtime)",
                    )

    def frames(self) -> None:
        from roboscale.facetrack.config import MAX_FPS, MAX_FRAMES, MIN_FPS

        trial = self.spec.trial
        for i, rate in enumerate(self.sweep.rate_hz):
            if not MIN_FPS <= rate <= MAX_FPS:
                raise self.fail(
                    ("sweep", "rate_hz", i),
                    f"workload facetrack: the camera runs from {MIN_FPS:g} to {MAX_FPS:g} "
                    f"frames per second; got {rate:g}",
                )
            frames = trial.message_count(rate)
            if frames > MAX_FRAMES:
                field = "messages" if trial.messages is not None else "duration_s"
                raise self.fail(
                    ("trial", field),
                    f"workload facetrack: at most {MAX_FRAMES:,} frames a trial; {frames:,} "
                    f"at {rate:g} frames per second",
                )

    def unused_axes(self) -> None:
        """A face-tracker trial runs on its stack: a backend or QoS setting is ignored."""
        for axis in qos.AXES:
            if getattr(self.sweep, axis) != Sweep.model_fields[axis].default:
                raise self.fail(
                    ("sweep", axis),
                    f"workload facetrack runs on its stacks (sweep.stack), which take no "
                    f"{axis} setting; remove sweep.{axis}",
                )
        if self.sweep.backend != Sweep.model_fields["backend"].default:
            raise self.fail(
                ("sweep", "backend"),
                "workload facetrack runs on its stacks (sweep.stack: runtime, runtime-proc, "
                "ros1, erlang), not on a backend; remove sweep.backend",
            )

    def every_config(self) -> None:
        """Each distinct trial's tracker config, built as the agent builds it and checked
        against its stack as the agent checks it: whatever the checks above do not name
        (a seed the config cannot hold, a new setting's rule) is refused here too."""
        from roboscale.facetrack.config import ConfigError, TrackerConfig
        from roboscale.facetrack.stack import check_kills, get_stack
        from roboscale.spec.planner import plan
        from roboscale.workloads.base import get_workload

        workload = get_workload(WORKLOAD)

        sw, trial = self.sweep, self.spec.trial
        # One trial per variant and rate: the other axes do not reach the tracker.
        first = {
            "backend": sw.backend[:1],
            "hosts": [1],
            "link": ["loopback"],
            "cpu": [None],
            "payload": sw.payload[:1],
            "pairs": sw.pairs[:1],
            "workload": [WORKLOAD],
        }
        first.update({axis: [None] for axis in qos.AXES})  # fmt: skip
        narrow = self.spec.model_copy(update={
            "sweep": sw.model_copy(update=first),
            "trial": trial.model_copy(update={"runs": 1, "order": "sequential"}),
        })  # fmt: skip
        planned = plan(narrow)  # and each again as its last run (the seed grows by run)
        for t in [*planned, *(replace(t, run=trial.runs - 1) for t in planned)]:
            # The tracker's settings as its agent gets them: the plan of its one process.
            program = workload.processes(t, False)[0][0].nodes[0].program.to_dict()
            tracker = program.get("tracker")
            if not isinstance(tracker, dict):
                raise TypeError(f"workload {WORKLOAD}'s node config has no tracker: {program}")
            try:
                check_kills(get_stack(t.stack), TrackerConfig.from_dict(tracker))
            except ConfigError as e:
                raise self.fail(_SPEC_FIELD.get(e.field, ("sweep", "workload")),
                                f"workload facetrack, stack {t.stack}: {e.field}: "
                                f"{e.problem}") from None  # fmt: skip


# Where a tracker setting comes from in a spec.
_SPEC_FIELD: dict[str, KeyPath] = {
    "fps": ("sweep", "rate_hz"), "frames": ("trial", "messages"), "seed": ("seed",),
    "workers": ("sweep", "workers"), "deque_len": ("sweep", "deque_len"),
    "dispatch": ("sweep", "dispatch"), "kills.count": ("sweep", "kills"),
    "kills.method": ("sweep", "kill_method"), "kills.target": ("sweep", "kill_target"),
    "kills.interval_ms": ("sweep", "kill_interval_ms"),
    "kills.at_frame": ("trial", "messages"),
}  # fmt: skip


def check_facetrack(spec: Spec, file: str, lines: LineMap) -> None:
    """Refuse, before anything runs, what a face-tracker trial could not honour."""
    if WORKLOAD not in spec.sweep.workload:
        return
    check = _Checker(spec, file, lines)
    check.kill_methods()
    check.frames()
    if set(spec.sweep.workload) == {WORKLOAD}:
        check.unused_axes()
    check.every_config()
