import pytest

from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.records import TrackerRun, assemble, summarize

pytest.importorskip("cv2", reason="the facetrack extra (make test installs it)")
pytest.importorskip("skimage")

from roboscale.facetrack.pipeline import CameraRole, TrackerRole, WorkerRole


def test_roles_track_the_face_in_a_closed_loop() -> None:
    cfg = TrackerConfig(workers=3, frames=30, deque_len=1, camera="closed")
    camera, tracker = CameraRole(cfg), TrackerRole(cfg)
    workers = [WorkerRole(i) for i in range(cfg.workers)]
    for i in range(cfg.frames):
        data, worker = camera.next_frame(i)
        answer = workers[worker].handle(data)
        assert answer is not None
        command = tracker.handle(answer)
        assert command is not None
        assert camera.apply(command) is not None
    assert camera.outstanding == [0, 0, 0]
    frames, kills = assemble(cfg, camera.dispatched, tracker.handled)
    figures = summarize(TrackerRun("test", cfg, frames, kills, []))
    assert figures.frames_lost == 0 and figures.frames == 30
    assert figures.mean_jaccard > 0.8


def test_roles_count_and_drop_malformed_messages() -> None:
    cfg = TrackerConfig(workers=1, frames=2)
    camera, tracker, worker = CameraRole(cfg), TrackerRole(cfg), WorkerRole(0)
    assert worker.handle(b"FT\x01\x01junk") is None and worker.malformed == 1
    assert tracker.handle(b"nonsense") is None and tracker.malformed == 1
    assert camera.apply(b"") is None and camera.malformed == 1
