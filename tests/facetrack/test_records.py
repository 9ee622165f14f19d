from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.geometry import Rect
from roboscale.facetrack.records import (
    Dispatched,
    Handled,
    TrackerRun,
    assemble,
    summarize,
)

MS = 1_000_000
FACE = Rect(100, 100, 60, 60)


def test_assemble_joins_logs_and_attributes_kills() -> None:
    cfg = TrackerConfig(workers=2, late_ms=100)
    sent = [Dispatched(i, i * 100 * MS, i * 100 * MS + 1, i % 2, FACE) for i in range(6)]
    handled = [
        Handled(0, 0, 10 * MS, 11 * MS, FACE, FACE),
        Handled(1, 1, 110 * MS, 111 * MS, FACE, Rect(130, 100, 60, 60)),
        # frame 2 (worker 0) lost in the kill; frame 4 (worker 0) answered late
        Handled(3, 1, 310 * MS, 311 * MS, None, FACE),
        Handled(4, 0, 600 * MS, 601 * MS, FACE, FACE),
        Handled(5, 1, 510 * MS, 511 * MS, FACE, None),
    ]
    frames, kills = assemble(cfg, sent, handled, [(0, "sigkill", 150 * MS, 450 * MS)])
    assert [f.lost for f in frames] == [False, False, True, False, False, False]
    assert frames[0].jaccard == 1.0
    assert frames[1].jaccard == (30 * 60) / (2 * 3600 - 30 * 60)
    assert frames[2].jaccard == 0.0  # lost with the face in view: the tracker knew nothing
    assert frames[5].jaccard == 0.0  # no estimate
    assert frames[4].late and not frames[3].late
    assert frames[3].detected is False
    assert [(k.frames_lost, k.frames_late) for k in kills] == [(1, 1)]
    assert kills[0].restart_ms == 300.0

    run = TrackerRun("runtime", cfg, frames, kills, [])
    back = TrackerRun.from_dict(run.to_dict())
    assert back == run
    figures = summarize(run)
    assert figures.frames_lost == 1 and figures.kill_frames_late == 1
