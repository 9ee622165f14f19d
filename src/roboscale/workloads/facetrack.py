"""The face tracker of the Erlang paper (seed 004) as a lab workload.

A trial runs the whole tracker on one stack (sweep axis `stack`: runtime, runtime-proc,
ros1, erlang, as registered in `facetrack.stack.STACKS`) with `workers` detectors, the
aggregator's `deque_len`, and `kills` workers killed at once by `kill_method` a fifth into
the run; `rate_hz` is the camera's frame rate and `trial.messages` the frames. One agent
process (role `tracker`) drives the stack: it starts it (READY once every worker is up),
runs the frames on GO, stops it, and writes one row per frame:

    seq = frame id, t_intended = the camera's deadline, t_sent = capture,
    t_echoed = the worker's detector returned, t_received = the controller's command

so the lab's round-trip summary gives the end-to-end latency (capture to command) and
counts lost frames. The tracker's own figures (Jaccard, tracking error, kills and
restarts, CPU/RSS/PSS per process) travel in the node's header and are added to the
summary entry as `facetrack`. Stdlib only at import, as every workload.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from array import array
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from roboscale.backends.base import Session
from roboscale.facetrack.wire import FRAME_HEAD
from roboscale.jsonfields import Fields
from roboscale.records.raw import new_column
from roboscale.workloads.base import (
    AgentProtocol,
    FigureSpec,
    NodePlan,
    ProcessPlan,
    Program,
    ProgramConfig,
    TableSpec,
    Variant,
    VariantFields,
)
from roboscale.workloads.stream import Counters

if TYPE_CHECKING:
    import pyarrow as pa

    from roboscale.analysis.verdict import Thresholds
    from roboscale.facetrack.records import TrackerRun
    from roboscale.facetrack.stack import RunningTracker
    from roboscale.records.models import FacetrackEntry, NodeHeader, TrialParams
    from roboscale.spec.planner import TrialPlan
    from roboscale.spec.schema import Sweep

NAME = "facetrack"
ROLE = "tracker"
KILL_AT_SHARE = 0.2  # kills land a fifth into the run, so quality before and after shows


@dataclass(frozen=True)
class TrackerProgramConfig:
    stack: str
    tracker: dict[str, object]  # a TrackerConfig as plain values
    workdir: str

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


class TrackerProgram:
    """Drives one stack for one trial inside the agent."""

    paces = True

    def __init__(self, cfg: TrackerProgramConfig) -> None:
        from roboscale.facetrack.config import TrackerConfig

        self.cfg = cfg
        self.tracker_cfg = TrackerConfig.from_dict(cfg.tracker)
        self.counters = Counters()
        self.tracker: RunningTracker | None = None
        self.result: TrackerRun | None = None
        self.error = ""
        self.workdir: Path | None = None

    def wait_for_match(self) -> bool:
        """Start the stack: every worker up, or False with the reason in `no_match`."""
        from roboscale.errors import UserError
        from roboscale.facetrack.stack import check_kills, get_stack

        try:
            self.workdir = Path(self.cfg.workdir or tempfile.mkdtemp(prefix="roboscale-ft-"))
            stack = get_stack(self.cfg.stack)
            stack.check()
            check_kills(stack, self.tracker_cfg)
            self.tracker = stack.start(self.tracker_cfg, self.workdir)
        except UserError as e:
            self.error = str(e).replace("\n", " ")
            return False
        return True

    def no_match(self) -> str:
        return f"stack {self.cfg.stack} did not start: {self.error}"

    def run(self) -> None:
        assert self.tracker is not None
        self.result = self.tracker.run()
        self.counters.received = sum(not f.lost for f in self.result.frames)
        self.counters.duplicates = self.result.counters.get("duplicates", 0)

    def finish(self) -> None:
        if self.tracker is not None:
            self.tracker.stop()
        if not self.cfg.workdir and self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def header(self) -> dict[str, object]:
        from roboscale.facetrack.records import summarize

        run = self.result
        if run is None:
            return {"facetrack": None}
        frames = run.frames
        return {
            "facetrack": {
                "stack": run.stack,
                "summary": summarize(run).to_dict(),
                "kills": [asdict(k) for k in run.kills],
                "processes": [asdict(p) for p in run.processes],
                "counters": run.counters,
                "kill_at": run.config.kills.at_frame,
                "jaccard": [f.jaccard for f in frames],
                "tracking_error": [f.tracking_error for f in frames],
                "worker": [f.worker for f in frames],
            }
        }

    def columns(self) -> dict[str, array[int]]:
        frames = self.result.frames if self.result is not None else []
        n = len(frames)
        cols = {k: new_column(n) for k in ("seq", "t_intended", "t_sent", "t_echoed", "t_received")}
        period_ns = 1e9 / self.tracker_cfg.fps
        start = frames[0].capture_ns if frames else 0
        for i, f in enumerate(frames):
            cols["seq"][i] = f.frame_id
            cols["t_intended"][i] = start + int(f.frame_id * period_ns)
            cols["t_sent"][i] = f.capture_ns
            cols["t_echoed"][i] = f.detected_ns or 0
            cols["t_received"][i] = f.command_ns or 0
        return cols


def node_name(t: TrialPlan) -> str:
    """A node name backends accept (letters, digits, '_'): runtime-proc -> runtime_proc."""
    return f"{ROLE}_{t.stack.replace('-', '_')}_t{t.index:04d}"


def tracker_config(t: TrialPlan) -> dict[str, object]:
    """The TrackerConfig of a trial, as plain values (checked when the agent reads it)."""
    kills = {"count": t.kills, "method": t.kill_method, "target": t.kill_target or "worker",
             "at_frame": int(t.messages * KILL_AT_SHARE),
             "interval_ms": t.kill_interval_ms}  # fmt: skip
    return {"workers": t.workers, "deque_len": t.deque_len, "dispatch": t.dispatch,
            "fps": t.rate_hz, "frames": t.messages, "seed": t.seed + t.run,
            "kills": kills}  # fmt: skip


class FaceTrackWorkload:
    name = NAME
    axes = ("stack", "workers", "deque_len", "kills", "kill_method", "kill_target",
            "kill_interval_ms", "dispatch")  # fmt: skip
    emulated_hosts = False
    log_words = ("rtt_us", "commanded", "capture to command")
    replays = False

    def variants(self, sweep: Sweep) -> list[Variant]:
        out = []
        for stack in sweep.stack:
            for workers in sweep.workers:
                for deque_len in sweep.deque_len:
                    for kills in sweep.kills:
                        methods = sweep.kill_method if kills else sweep.kill_method[:1]
                        targets = sweep.kill_target if kills else sweep.kill_target[:1]
                        gaps = sweep.kill_interval_ms if kills else sweep.kill_interval_ms[:1]
                        for kill in itertools.product(methods, targets, gaps):
                            for dispatch in sweep.dispatch:
                                out.append(_variant(stack, workers, deque_len, kills,
                                                    kill, dispatch))  # fmt: skip
        return out

    def measured_nodes(self, t: TrialPlan) -> int:
        return 1

    def host_of(self, t: TrialPlan, key: int) -> int:
        return 0

    def processes(self, t: TrialPlan, together: bool) -> list[list[ProcessPlan]]:
        cfg = TrackerProgramConfig(t.stack, tracker_config(t), "")
        node = NodePlan(node_name(t), ROLE, 0, 0, cfg)
        return [[ProcessPlan(node.name, ROLE, (node,))]]

    def drive(self, t: TrialPlan) -> AgentProtocol:
        return AgentProtocol(
            pacers=(ROLE,),
            stopped=(),
            done_timeout_s=t.intended_duration_s * 3 + t.drain_s + 120,
            stop_timeout_s=60,
        )

    def read_program(self, role: str, data: object) -> TrackerProgramConfig:
        f = Fields(data, "config")
        return TrackerProgramConfig(
            stack=f.text("stack"), tracker=f.nested("tracker").mapping(), workdir=f.text("workdir")
        )

    def start(self, role: str, session: Session, cfg: ProgramConfig) -> Program:
        assert isinstance(cfg, TrackerProgramConfig)
        return TrackerProgram(cfg)

    def collect(
        self, t: TrialPlan, raw: Path, hosts: list[str]
    ) -> tuple[list[pa.Table], list[NodeHeader]]:
        import numpy as np

        from roboscale.records.models import node_headers
        from roboscale.records.raw import read_raw
        from roboscale.records.store import records_table

        head, cols = read_raw(raw / f"{node_name(t)}.raw")
        (node,) = node_headers([head])
        arrays = {k: np.frombuffer(v, dtype=np.int64) for k, v in cols.items()}
        frame_bytes = FRAME_HEAD.size + 320 * 240  # the lab runs the default 320x240 view
        table = records_table(t.trial, node.node, hosts[0], frame_bytes, arrays)
        return [table], [node]

    def summarize(
        self,
        table: pa.Table,
        params: TrialParams,
        th: Thresholds,
        nodes: Sequence[NodeHeader] = (),
    ) -> FacetrackEntry:
        """Round trips (capture to command) and the tracker's own figures, from its node's
        header (null when the tracker reported none)."""
        from roboscale.analysis.stats import summarize_round_trips
        from roboscale.records.models import FacetrackEntry

        found = [getattr(n, "facetrack", None) for n in nodes]
        tracker = next((f for f in found if f), None)
        return summarize_round_trips(table, params, th).entry(FacetrackEntry, facetrack=tracker)

    def figures(self) -> list[FigureSpec]:
        from roboscale.analysis import facetrack as plots

        return plots.FIGURES

    def tables(self) -> list[TableSpec]:
        from roboscale.analysis import facetrack as plots

        return plots.TABLES


def _variant(stack: str, workers: int, deque_len: int, kills: int,
             kill: tuple[str, str, float], dispatch: str) -> Variant:  # fmt: skip
    method, target, gap_ms = kill
    fields = VariantFields(stack=stack, workers=workers, deque_len=deque_len, kills=kills,
                           kill_method=method, kill_target=target, kill_interval_ms=gap_ms,
                           dispatch=dispatch)  # fmt: skip
    label = f"{stack}-w{workers}-d{deque_len}" + (f"-k{kills}{method}" if kills else "")
    label += f"-{target}" if kills and target != "worker" else ""
    label += f"-every{gap_ms:g}ms".replace(".", "p") if kills and gap_ms else ""
    label += "" if dispatch == "random" else f"-{dispatch}"
    return Variant(fields, label)


WORKLOAD = FaceTrackWorkload()
