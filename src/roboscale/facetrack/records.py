"""What every stack returns: per-frame, per-kill and per-process records, and their summary.
Stdlib only.

A stack logs two things while it runs, each on the side that sees it:
- the camera's `Dispatched` (frame id, capture and dispatch time, worker, truth);
- the controller's `Handled` (frame id, when the result and the command came, the
  detected rectangle and the aggregator's estimate, the worker's own stamps).
`assemble` joins them by frame id into `FrameRecord`s and attributes frames to kills,
so every stack's figures are computed by the same code.

Per frame: latency is capture to controller command; `jaccard` is the aggregator's
estimate against the frame's true face box (None when the face is not in view; 0 for a
frame that was never answered or had no estimate: the tracker knew nothing); the
tracking error is the true face centre's distance to the view centre.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.geometry import Rect, jaccard, tracking_error
from roboscale.jsonfields import Fields

RUN_VERSION = 1
# Where a hosted tracker leaves its TrackerRun in its work folder (a file of its own, not
# one of a results folder's, which records/folder.py alone reads and writes).
TRACKER_RUN_FILE = "tracker-result.json"


@dataclass(frozen=True, slots=True)
class Dispatched:
    frame_id: int
    capture_ns: int
    dispatch_ns: int
    worker: int
    truth: Rect | None


@dataclass(frozen=True, slots=True)
class Handled:
    frame_id: int
    worker: int
    result_ns: int  # the aggregator got the result
    command_ns: int  # the controller decided
    rect: Rect | None  # the worker's detection
    estimate: Rect | None  # the aggregator's average after it
    received_ns: int = 0  # the worker got the frame (its own stamp)
    detected_ns: int = 0  # the worker's detector returned


@dataclass(frozen=True, slots=True)
class FrameRecord:
    frame_id: int
    capture_ns: int
    worker: int
    dispatch_ns: int
    command_ns: int | None  # None: the frame was lost
    detected: bool | None
    jaccard: float | None
    tracking_error: float | None
    truth: Rect | None = None
    rect: Rect | None = None
    estimate: Rect | None = None
    received_ns: int | None = None
    detected_ns: int | None = None
    late: bool = False

    @property
    def lost(self) -> bool:
        return self.command_ns is None

    @property
    def latency_ms(self) -> float | None:
        return None if self.command_ns is None else (self.command_ns - self.capture_ns) / 1e6


@dataclass(frozen=True, slots=True)
class KillRecord:
    worker: int
    method: str
    kill_ns: int
    restarted_ns: int | None  # the new worker is ready (None: not within the run)
    frames_lost: int = 0
    frames_late: int = 0
    initialized_ns: int | None = None  # the new worker started, before it was ready
    target: str = "worker"  # or the main process killed: aggregator, face_supervisor, ...

    @property
    def init_ms(self) -> float | None:
        return None if self.initialized_ns is None else (self.initialized_ns - self.kill_ns) / 1e6

    @property
    def restart_ms(self) -> float | None:
        return None if self.restarted_ns is None else (self.restarted_ns - self.kill_ns) / 1e6


@dataclass(frozen=True, slots=True)
class ProcessUsage:
    """One OS process of a stack: what it is, how many workers it hosts, CPU and memory.
    PSS splits pages shared between processes (forked children, one VM) among them, so
    summing it over a stack's processes does not count shared pages twice, as RSS does."""

    role: str
    pid: int
    workers: int
    cpu_s: float
    rss_bytes: int
    pss_bytes: int


@dataclass
class TrackerRun:
    stack: str
    config: TrackerConfig
    frames: list[FrameRecord]
    kills: list[KillRecord]
    processes: list[ProcessUsage]
    counters: dict[str, int] = field(default_factory=dict)  # malformed, dropped, ...
    alive_workers: int | None = None  # workers running at the end
    version: int = RUN_VERSION

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, raw: object) -> TrackerRun:
        """A run as a hosted tracker wrote it (JSON), each field checked: a field of
        another type is a FieldError (a ValueError) naming it."""
        f = Fields(raw, "tracker run")
        if f.get("version") != RUN_VERSION:
            raise ValueError(f"tracker run format {f.get('version')!r} (want {RUN_VERSION})")
        counters = f.optional_nested("counters")
        return cls(
            stack=f.text("stack"),
            config=TrackerConfig.from_dict(f.nested("config").mapping()),
            frames=[_read_frame(r) for r in f.nested_list("frames")],
            kills=[_kill(k) for k in f.nested_list("kills")],
            processes=[_process(p) for p in f.nested_list("processes")],
            counters={k: counters.whole(k) for k in counters.mapping()} if counters else {},
            alive_workers=f.optional_whole("alive_workers"),
        )


def _rect(f: Fields, key: str) -> Rect | None:
    r = f.optional_nested(key)
    return None if r is None else Rect(r.number("x"), r.number("y"), r.number("w"), r.number("h"))


def _read_frame(f: Fields) -> FrameRecord:
    return FrameRecord(
        frame_id=f.whole("frame_id"),
        capture_ns=f.whole("capture_ns"),
        worker=f.whole("worker"),
        dispatch_ns=f.whole("dispatch_ns"),
        command_ns=f.optional_whole("command_ns"),
        detected=f.optional_flag("detected"),
        jaccard=f.optional_number("jaccard"),
        tracking_error=f.optional_number("tracking_error"),
        truth=_rect(f, "truth"),
        rect=_rect(f, "rect"),
        estimate=_rect(f, "estimate"),
        received_ns=f.optional_whole("received_ns"),
        detected_ns=f.optional_whole("detected_ns"),
        late=f.flag("late", False),
    )


def _kill(f: Fields) -> KillRecord:
    return KillRecord(
        worker=f.whole("worker"),
        method=f.text("method"),
        kill_ns=f.whole("kill_ns"),
        restarted_ns=f.optional_whole("restarted_ns"),
        frames_lost=f.whole("frames_lost", 0),
        frames_late=f.whole("frames_late", 0),
        initialized_ns=f.optional_whole("initialized_ns"),
        target=f.text("target", "worker"),
    )


def _process(f: Fields) -> ProcessUsage:
    return ProcessUsage(
        role=f.text("role"),
        pid=f.whole("pid"),
        workers=f.whole("workers"),
        cpu_s=f.number("cpu_s"),
        rss_bytes=f.whole("rss_bytes"),
        pss_bytes=f.whole("pss_bytes"),
    )


def assemble(
    cfg: TrackerConfig,
    dispatched: Iterable[Dispatched],
    handled: Iterable[Handled],
    kills: Sequence[tuple[int, str, int, int | None]] = (),
) -> tuple[list[FrameRecord], list[KillRecord]]:
    """Join the camera's and the controller's logs; `kills` are (worker, method, kill_ns,
    restarted_ns). A frame answered twice (a restarted worker redoing it) counts once."""
    by_id: dict[int, Handled] = {}
    for h in handled:
        by_id.setdefault(h.frame_id, h)
    late_ns = int(cfg.late_ms * 1e6)
    frames = [_frame(cfg, d, by_id.get(d.frame_id), late_ns) for d in dispatched]
    frames.sort(key=lambda f: f.frame_id)
    return frames, _attribute(frames, kills)


def _frame(cfg: TrackerConfig, d: Dispatched, h: Handled | None, late_ns: int) -> FrameRecord:
    error = tracking_error(d.truth, cfg.view_w, cfg.view_h)
    if h is None:
        score = None if d.truth is None else 0.0
        return FrameRecord(d.frame_id, d.capture_ns, d.worker, d.dispatch_ns, None, None,
                           score, error, d.truth)  # fmt: skip
    score = None
    if d.truth is not None:
        score = 0.0 if h.estimate is None else jaccard(h.estimate, d.truth)
    return FrameRecord(
        d.frame_id, d.capture_ns, d.worker, d.dispatch_ns, h.command_ns, h.rect is not None,
        score, error, d.truth, h.rect, h.estimate, h.received_ns or None, h.detected_ns or None,
        h.command_ns - d.capture_ns > late_ns,
    )  # fmt: skip


def _attribute(
    frames: list[FrameRecord], kills: Sequence[tuple[int, str, int, int | None]]
) -> list[KillRecord]:
    """Frames a kill hit: sent to the killed worker before it was back, and not answered
    before the kill. Each frame goes to the first kill that hit it."""
    claimed: set[int] = set()
    records = []
    for worker, method, kill_ns, restarted_ns in sorted(kills, key=lambda k: k[2]):
        back = restarted_ns if restarted_ns is not None else math.inf
        lost = late = 0
        for f in frames:
            if f.worker != worker or f.frame_id in claimed or f.dispatch_ns >= back:
                continue
            if f.command_ns is not None and f.command_ns <= kill_ns:
                continue
            claimed.add(f.frame_id)
            lost += f.lost
            late += f.late
        records.append(KillRecord(worker, method, kill_ns, restarted_ns, lost, late))
    return records


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100), nearest rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class TrackerFigures:
    """The figures of one tracker run (records/models.py FacetrackSummary reads them)."""

    stack: str
    workers: int
    frames: int
    frames_lost: int
    frames_late: int
    detected: int
    mean_jaccard: float | None
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    latency_mean_ms: float | None
    tracking_error_mean_px: float | None
    kills: int
    restarted: int
    restart_p50_ms: float | None
    restart_max_ms: float | None
    restart_init_p50_ms: float | None
    restart_init_max_ms: float | None
    kill_frames_lost: int
    kill_frames_late: int
    pss_total_mb: float
    pss_per_worker_mb: float
    rss_total_mb: float
    cpu_s: float
    worker_processes: int
    alive_workers: int | None
    counts: dict[str, int]  # the stack's own counters (malformed, dropped, ...)

    def to_dict(self) -> dict[str, object]:
        """As JSON holds them: each counter as `count_<name>`."""
        out: dict[str, object] = {
            f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "counts"
        }
        return {**out, **{f"count_{k}": v for k, v in sorted(self.counts.items())}}


def summarize(run: TrackerRun) -> TrackerFigures:
    """The figures of one run, as the report and the bench print them."""
    frames = run.frames
    latencies = [f.latency_ms for f in frames if f.latency_ms is not None]
    scores = [f.jaccard for f in frames if f.jaccard is not None]
    errors = [f.tracking_error for f in frames if f.tracking_error is not None]
    restarts = [k.restart_ms for k in run.kills if k.restart_ms is not None]
    inits = [k.init_ms for k in run.kills if k.init_ms is not None]
    workers = [p for p in run.processes if p.workers > 0]
    pss = sum(p.pss_bytes for p in run.processes)
    return TrackerFigures(
        stack=run.stack,
        workers=run.config.workers,
        frames=len(frames),
        frames_lost=sum(f.lost for f in frames),
        frames_late=sum(f.late for f in frames),
        detected=sum(bool(f.detected) for f in frames),
        mean_jaccard=statistics.fmean(scores) if scores else None,
        latency_p50_ms=percentile(latencies, 50),
        latency_p99_ms=percentile(latencies, 99),
        latency_mean_ms=statistics.fmean(latencies) if latencies else None,
        tracking_error_mean_px=statistics.fmean(errors) if errors else None,
        kills=len(run.kills),
        restarted=len(restarts),
        restart_p50_ms=percentile(restarts, 50),
        restart_max_ms=max(restarts) if restarts else None,
        restart_init_p50_ms=percentile(inits, 50),
        restart_init_max_ms=max(inits) if inits else None,
        kill_frames_lost=sum(k.frames_lost for k in run.kills),
        kill_frames_late=sum(k.frames_late for k in run.kills),
        pss_total_mb=pss / 2**20,
        pss_per_worker_mb=pss / 2**20 / run.config.workers,
        rss_total_mb=sum(p.rss_bytes for p in run.processes) / 2**20,
        cpu_s=sum(p.cpu_s for p in run.processes),
        worker_processes=len(workers),
        alive_workers=run.alive_workers,
        counts=dict(run.counters),
    )
