"""The face tracker's report figures (interactive) and headline, on summary entries."""

from __future__ import annotations

from typing import Any

from tests.conftest import summary_entry

from roboscale.analysis import facetrack as views
from roboscale.analysis.headline import headline


def entry(stack: str, workers: int, deque: int, kills: int = 0) -> Any:
    summary = {"mean_jaccard": 0.9 - 0.05 * deque, "latency_p50_ms": 30.0 + workers,
               "latency_mean_ms": 31.0 + workers, "pss_total_mb": 100.0 * workers,
               "frames": 100, "latency_p99_ms": 60.0, "frames_lost": kills,
               "frames_late": 0}  # fmt: skip
    kill = {"worker": 0, "method": "sigkill", "kill_ns": 0, "restarted_ns": 2_000_000}
    return summary_entry(
        trial=f"{stack}-{workers}-{deque}-{kills}", workload="facetrack", stack=stack,
        backend=stack, workers=workers, deque_len=deque, kills=kills,
        kill_method="sigkill" if kills else "", dispatch="round_robin", sustained=True,
        facetrack={"stack": stack, "summary": summary, "kills": [kill] * kills, "kill_at": 5,
                   "jaccard": [0.9, None, 0.5, 0.7, 0.8, 0.2, 0.6, 0.9]},
    )  # fmt: skip


ENTRIES = [entry(s, w, d) for s in ("runtime", "ros1") for w in (1, 4) for d in (1, 5)] + [
    entry("runtime", 4, 1, kills=2)
]


def test_every_face_tracker_figure_is_interactive() -> None:
    for draw in (views.quality_vs_deque, views.latency_vs_workers, views.memory_vs_workers,
                 views.quality_after_kills, views.restart_times):  # fmt: skip
        fig = draw(ENTRIES)
        assert fig is not None and hasattr(fig, "to_plotly_json") and fig.data, draw.__name__
    # the paper's Table 4 beside ours, on a 0-1 axis
    quality = views.quality_vs_deque(ENTRIES)
    assert quality is not None and {t.name for t in quality.data} >= {"ROS (paper)", "runtime"}


def test_the_headline_gives_quality_latency_and_frames_lost_per_stack() -> None:
    h = headline(ENTRIES, lambda _trial: None, quick=False)
    ((title, lines),) = h.sections
    assert title == "Face tracker per stack"
    assert lines[1].startswith("runtime: mean Jaccard 0.")
    assert "frames lost over 5 trial(s)" in lines[1] and "2 frames lost" in lines[1]
