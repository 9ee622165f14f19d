from roboscale.facetrack.aggregator import Aggregator
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.controller import Controller, Move
from roboscale.facetrack.geometry import Rect

# 320x240 view, centre (160, 120); faces 40x40 so a face at x means centre x + 20.


def test_face_near_centre_keeps_the_camera_still() -> None:
    ctl = Controller(320, 240, 40)
    assert ctl.decide(Rect(160 - 20 + 39, 120 - 20 - 39, 40, 40)).still
    assert ctl.decide(None).still


def test_face_past_deadband_pans_or_tilts_on_that_axis_only() -> None:
    ctl = Controller(320, 240, 40)
    assert ctl.decide(Rect(160 - 20 + 50, 120 - 20, 40, 40)) == Move(50, 0)
    assert ctl.decide(Rect(160 - 20, 120 - 20 - 60, 40, 40)) == Move(0, -60)
    assert ctl.decide(Rect(0, 200, 40, 40)) == Move(20 - 160, 220 - 120)


def test_default_deadband_is_the_papers_80px_at_640_scaled() -> None:
    assert TrackerConfig().deadband == 40.0
    assert TrackerConfig(view_w=640, view_h=480).deadband == 80.0
    assert TrackerConfig(deadband_px=10).deadband == 10


def test_aggregator_averages_the_last_n_faces() -> None:
    agg = Aggregator(2)
    assert agg.add(None) is None
    assert agg.add(Rect(0, 0, 10, 10)) == Rect(0, 0, 10, 10)
    assert agg.add(Rect(10, 10, 20, 20)) == Rect(5, 5, 15, 15)
    assert agg.add(None) == Rect(5, 5, 15, 15)  # no face adds nothing
    assert agg.add(Rect(20, 20, 20, 20)) == Rect(15, 15, 20, 20)  # the oldest left
