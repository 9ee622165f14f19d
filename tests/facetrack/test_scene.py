import pytest

from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.geometry import jaccard
from roboscale.facetrack.scene import ASTRONAUT_FACE

cv2 = pytest.importorskip("cv2", reason="the facetrack extra (make test installs it)")
pytest.importorskip("skimage")

from roboscale.facetrack.detector import FaceDetector  # noqa: E402
from roboscale.facetrack.scene import Scene  # noqa: E402


def test_detector_finds_the_shipped_face() -> None:
    from skimage import data

    grey = cv2.cvtColor(data.astronaut(), cv2.COLOR_RGB2GRAY)
    found = FaceDetector().detect(grey)
    assert found is not None
    assert jaccard(found, ASTRONAUT_FACE) >= 0.5


def test_detector_finds_the_face_in_scene_frames() -> None:
    cfg = TrackerConfig(frames=40, seed=2)
    scene, detector = Scene(cfg), FaceDetector()
    scores = []
    for i in range(cfg.frames):
        frame = scene.capture(i, 0)
        assert frame.image.shape == (240, 320) and frame.image.dtype.name == "uint8"
        if frame.truth is not None:
            found = detector.detect(frame.image)
            scores.append(0.0 if found is None else jaccard(found, frame.truth))
    assert scores and sum(s >= 0.5 for s in scores) >= 0.9 * len(scores)


def test_frames_are_the_same_for_the_same_seed() -> None:
    cfg = TrackerConfig(frames=20, seed=4, noise=5.0, blur=3)
    a, b = Scene(cfg), Scene(cfg)
    for i in range(cfg.frames):
        fa, fb = a.capture(i, 1), b.capture(i, 2)
        assert fa.truth == fb.truth and (fa.image == fb.image).all()


def test_truth_follows_the_viewport() -> None:
    cfg = TrackerConfig(frames=10, camera="closed", pan_speed=1e5)
    scene = Scene(cfg)
    before = scene.capture(0, 0).truth
    assert before is not None
    scene.command(0, 30.0, -20.0)
    after = scene.capture(1, 0).truth  # the face holds still for the first second
    assert after is not None
    assert (after.x, after.y) == pytest.approx((before.x - 30, before.y + 20))


def test_missing_cascade_names_the_file() -> None:
    from roboscale.errors import UserError

    with pytest.raises(UserError, match=r"cascade.*no_such_cascade\.xml"):
        FaceDetector("no_such_cascade.xml")
