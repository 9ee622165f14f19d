"""The face tracker's report: the paper's figures and tables, stacks side by side.

Every figure is drawn from summary entries (`entry.facetrack`, written by
`workloads/facetrack.py`), so a report can be redrawn from a results folder alone.
The paper's published figures are drawn beside ours where it has them (grey, dashed).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from plotly import graph_objects as go
from plotly.subplots import make_subplots

from roboscale.analysis.interactive import _layout
from roboscale.analysis.plots import COLORS
from roboscale.analysis.tables import Table
from roboscale.records.models import FacetrackEntry, FacetrackFigures, SummaryEntry
from roboscale.workloads.base import FigureSpec, TableSpec

# The paper's Table 4 (mean Jaccard by deque length) and Table 5 (restart, ms).
PAPER_QUALITY = {"ROS (paper)": {10: 0.285, 5: 0.591, 1: 0.947},
                 "Erlang (paper)": {10: 0.302, 5: 0.608, 1: 0.922}}  # fmt: skip
PAPER_RESTART_MS = {"ROS worker (paper)": {"sigterm": 369.0, "sigkill": 291.0},
                    "Erlang worker (paper)": {"sigterm": 0.224, "sigkill": 0.249}}  # fmt: skip
ROLLING = 5  # frames in the rolling mean of the quality-over-time figure


@dataclass(frozen=True)
class Run:
    """A face-tracker trial that reported its figures."""

    entry: FacetrackEntry
    tracker: FacetrackFigures


def measured(entries: Sequence[SummaryEntry]) -> list[Run]:
    return [Run(e, e.facetrack) for e in entries if isinstance(e, FacetrackEntry) and e.facetrack]


def _mean(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.fmean(got) if got else None


def _series(
    entries: Sequence[Run], x: Callable[[Run], int], y: Callable[[Run], float | None]
) -> dict[str, tuple[list[int], list[float]]]:
    """stack -> (xs, mean y over runs at each x), x ascending."""
    out: dict[str, tuple[list[int], list[float]]] = {}
    for stack in sorted({e.entry.stack for e in entries}):
        mine = [e for e in entries if e.entry.stack == stack]
        xs = sorted({x(e) for e in mine})
        ys = [_mean([y(e) for e in mine if x(e) == v]) for v in xs]
        pairs = [(a, b) for a, b in zip(xs, ys, strict=True) if b is not None]
        out[stack] = ([a for a, _ in pairs], [b for _, b in pairs])
    return out


def _line_figure(
    entries: Sequence[SummaryEntry],
    x: Callable[[Run], int],
    y: Callable[[Run], float | None],
    labels: tuple[str, str, str],
    log_x: bool = False,
) -> go.Figure | None:
    calm = [e for e in measured(entries) if e.entry.kills == 0]
    if len({x(e) for e in calm}) < 2:
        return None
    fig = go.Figure()
    for i, (stack, (xs, ys)) in enumerate(_series(calm, x, y).items()):
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=stack,
                                 line={"color": COLORS[i % len(COLORS)]}))  # fmt: skip
    fig.update_xaxes(title=labels[0], type="log" if log_x else "linear")
    fig.update_yaxes(title=labels[1], rangemode="tozero")
    return _layout(fig, labels[2])


def quality_vs_deque(entries: Sequence[SummaryEntry]) -> go.Figure | None:
    fig = _line_figure(entries, _deque_len, lambda e: e.tracker.summary.mean_jaccard,
                       ("aggregator deque length", "mean Jaccard", "Face quality by deque "
                        "length (paper Table 4)"))  # fmt: skip
    if fig is not None:
        for name, points in PAPER_QUALITY.items():
            xs = sorted(points)
            fig.add_trace(go.Scatter(x=xs, y=[points[v] for v in xs], mode="lines+markers",
                                     name=name, line={"color": "grey", "dash": "dash"},
                                     marker={"symbol": "x"}))  # fmt: skip
        fig.update_yaxes(range=[0, 1])
    return fig


def latency_vs_workers(entries: Sequence[SummaryEntry]) -> go.Figure | None:
    return _line_figure(entries, _workers, lambda e: e.tracker.summary.latency_mean_ms,
                        ("workers", "capture to command, mean (ms)",
                         "Latency by workers (paper Figure 5: about 37 ms up to 9)"),
                        log_x=True)  # fmt: skip


def memory_vs_workers(entries: Sequence[SummaryEntry]) -> go.Figure | None:
    return _line_figure(entries, _workers, lambda e: e.tracker.summary.pss_total_mb,
                        ("workers", "PSS of the stack's processes (MB)",
                         "Memory by workers (paper Table 3: ROS 2,564 MB, Erlang 1,300 MB "
                         "at 50)"), log_x=True)  # fmt: skip


def quality_after_kills(entries: Sequence[SummaryEntry]) -> go.Figure | None:
    """Per-frame Jaccard (rolling mean) of each kill trial, one panel per kill count; the
    dotted line is the kill (paper Figures 6-10)."""
    chaos = [e for e in measured(entries) if e.entry.kills > 0]
    if not chaos:
        return None
    counts = sorted({e.entry.kills for e in chaos})
    fig = make_subplots(rows=len(counts), cols=1, shared_xaxes=True,
                        subplot_titles=[f"{c} workers killed at once" for c in counts])  # fmt: skip
    keys = sorted({(e.entry.stack, e.entry.kill_method) for e in chaos})
    for row, count in enumerate(counts, start=1):
        for i, key in enumerate(keys):
            runs = [e for e in chaos if (e.entry.stack, e.entry.kill_method) == key
                    and e.entry.kills == count]  # fmt: skip
            if not runs:
                continue
            fig.add_trace(
                go.Scatter(
                    y=_rolling(runs[0].tracker.jaccard),
                    mode="lines",
                    name=f"{key[0]} {key[1]}",
                    legendgroup=f"{key}",
                    showlegend=row == 1,
                    line={"color": COLORS[i % len(COLORS)]},
                ),
                row=row,
                col=1,
            )
            fig.add_vline(x=runs[0].tracker.kill_at, line={"color": "purple",
                          "dash": "dot"}, row=row, col=1)  # fmt: skip
        fig.update_yaxes(title="Jaccard", range=[0, 1], row=row, col=1)
    fig.update_xaxes(title="frame", row=len(counts), col=1)
    return _layout(fig, "Face quality after kills (rolling mean of 5 frames)",
                   height=120 + 220 * len(counts))  # fmt: skip


def _rolling(values: Sequence[float | None]) -> list[float]:
    clean = np.array([np.nan if v is None else v for v in values], dtype=float)
    out = []
    for i in range(len(clean)):
        window = clean[max(0, i - ROLLING + 1) : i + 1]
        window = window[~np.isnan(window)]
        out.append(float(window.mean()) if window.size else float("nan"))
    return out


def restart_times(entries: Sequence[SummaryEntry]) -> go.Figure | None:
    rows = restart_rows(entries)
    if not rows:
        return None
    names = [r[0] for r in rows]
    fig = go.Figure(go.Bar(
        x=[r[1] for r in rows], y=names, orientation="h", showlegend=False,
        marker={"color": [COLORS[0] if "paper" not in n else "grey" for n in names]},
        hovertemplate="%{y}: %{x:.4g} ms<extra></extra>",
    ))  # fmt: skip
    fig.update_xaxes(type="log", title="restart, kill to the new worker started / ready "
                     "(ms, p50, log)")  # fmt: skip
    return _layout(fig, "Restart time (paper Table 5)", height=120 + 26 * len(rows))


def restart_rows(entries: Sequence[SummaryEntry]) -> list[tuple[str, float]]:
    """Median restart per stack and signal: to the new worker ready, and, where a stack
    tells them apart (ros1: the new process's first line; erlang: the new face_server's
    init/1, the paper's figure), to the new worker started."""
    found: dict[str, list[float]] = {}
    for e in measured(entries):
        for kill in e.tracker.kills:
            name = f"{e.entry.stack} {kill.method}"
            if kill.restarted_ns is not None:
                ms = (kill.restarted_ns - kill.kill_ns) / 1e6
                found.setdefault(f"{name} ready", []).append(ms)
            started = kill.initialized_ns
            if started is not None and started != kill.restarted_ns:
                found.setdefault(f"{name} started", []).append((started - kill.kill_ns) / 1e6)
    rows = [(name, statistics.median(v)) for name, v in sorted(found.items())]
    if rows:
        for name, by_method in PAPER_RESTART_MS.items():
            rows += [(f"{name} {m}", ms) for m, ms in by_method.items()]
    return rows


def _deque_len(r: Run) -> int:
    return r.entry.deque_len


def _jaccard(r: Run) -> float | None:
    return r.tracker.summary.mean_jaccard


def _workers(r: Run) -> int:
    return r.entry.workers


def _fmt(value: float | None, digits: str = ".3g") -> str:
    return "-" if value is None else format(value, digits)


def side_by_side(entries: Sequence[SummaryEntry]) -> Table | None:
    rows = []
    for e in measured(entries):
        kills = f"{e.entry.kills} {e.entry.kill_method}" if e.entry.kills else "0"
        rows.append([
            e.entry.stack, str(e.entry.workers), str(e.entry.deque_len), kills, e.entry.dispatch,
            _fmt(e.tracker.summary.mean_jaccard, ".3f"), _fmt(e.tracker.summary.latency_p50_ms),
            _fmt(e.tracker.summary.latency_p99_ms), str(e.tracker.summary.frames_lost),
            str(e.tracker.summary.frames_late), _fmt(e.tracker.summary.restart_init_p50_ms),
            _fmt(e.tracker.summary.restart_p50_ms), _fmt(e.tracker.summary.restart_max_ms),
            _fmt(e.tracker.summary.pss_per_worker_mb),
            f"{e.tracker.summary.alive_workers}/{e.entry.workers}",
        ])  # fmt: skip
    if not rows:
        return None
    head = ["stack", "workers", "deque", "kills", "dispatch", "mean Jaccard", "latency p50 ms",
            "p99 ms", "lost", "late", "started p50 ms", "ready p50 ms", "max ms",
            "PSS MB/worker",
            "alive"]  # fmt: skip
    return head, rows


def paper_quality(entries: Sequence[SummaryEntry]) -> Table | None:
    """The paper's Table 4 beside the measured mean Jaccard, by deque length (no kills)."""
    calm = [e for e in measured(entries) if e.entry.kills == 0]
    lengths = sorted({e.entry.deque_len for e in calm} | {1, 5, 10}, reverse=True)
    if len({e.entry.deque_len for e in calm}) < 2:
        return None
    rows = [[name, *[_fmt(points.get(n), ".3f") for n in lengths]]
            for name, points in PAPER_QUALITY.items()]  # fmt: skip
    for stack, (xs, ys) in _series(calm, _deque_len, _jaccard).items():
        got = dict(zip(xs, ys, strict=True))
        rows.append([stack, *[_fmt(got.get(n), ".3f") for n in lengths]])
    return ["mean Jaccard, deque length", *[str(n) for n in lengths]], rows


FIGURES = [
    FigureSpec("Face quality by deque length", "Mean Jaccard of the aggregator's face against "
               "the ground truth, by deque length (runs without kills); grey: the paper's "
               "Table 4.", quality_vs_deque, needs_records=False),
    FigureSpec("Face-tracker latency by workers", "Capture to controller command, mean over "
               "the frames of each run (runs without kills).", latency_vs_workers,
               needs_records=False),
    FigureSpec("Face-tracker memory by workers", "PSS summed over the stack's processes "
               "(shared pages split, not counted twice).", memory_vs_workers,
               needs_records=False),
    FigureSpec("Face quality after kills", "Per-frame Jaccard, rolling mean of 5 frames; "
               "dotted: the moment the workers were killed (the paper's Figures 6-10). "
               "A lost frame counts 0.", quality_after_kills, needs_records=False),
    FigureSpec("Restart time", "From the kill to the new worker ready, median per stack and "
               "signal; grey: the paper's Table 5.", restart_times, needs_records=False),
]  # fmt: skip
TABLES = [
    TableSpec("Face tracker: stacks side by side", side_by_side, lead=True),
    TableSpec("Face quality beside the paper's Table 4", paper_quality),
]
