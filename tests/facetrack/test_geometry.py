import math

import pytest

from roboscale.facetrack.geometry import (
    Rect,
    clip_to_view,
    jaccard,
    mean_rect,
    tracking_error,
)


def test_identical_rectangles_score_one() -> None:
    assert jaccard(Rect(10, 20, 30, 40), Rect(10, 20, 30, 40)) == 1.0


def test_half_overlap_on_one_axis() -> None:
    # 10x10 squares shifted by 5 in x: overlap 5x10 = 50, union 100 + 100 - 50 = 150.
    assert jaccard(Rect(0, 0, 10, 10), Rect(5, 0, 10, 10)) == pytest.approx(50 / 150)


def test_overlap_on_both_axes() -> None:
    # Shifted by (5, 5): overlap 5x5 = 25, union 175. An x-only formula would give 1/3.
    assert jaccard(Rect(0, 0, 10, 10), Rect(5, 5, 10, 10)) == pytest.approx(25 / 175)


def test_contained_rectangle() -> None:
    assert jaccard(Rect(0, 0, 20, 20), Rect(5, 5, 10, 10)) == pytest.approx(100 / 400)


def test_no_overlap_and_touching_score_zero() -> None:
    assert jaccard(Rect(0, 0, 10, 10), Rect(20, 20, 5, 5)) == 0.0
    assert jaccard(Rect(0, 0, 10, 10), Rect(10, 0, 10, 10)) == 0.0
    # Overlap in x only is still no overlap.
    assert jaccard(Rect(0, 0, 10, 10), Rect(2, 50, 10, 10)) == 0.0


def test_jaccard_is_symmetric_and_never_capped_at_half() -> None:
    a, b = Rect(3, 4, 50, 60), Rect(10, 8, 50, 60)
    assert jaccard(a, b) == jaccard(b, a)
    assert jaccard(a, b) > 0.5


def test_mean_rect() -> None:
    assert mean_rect([Rect(0, 0, 10, 10), Rect(10, 20, 30, 40)]) == Rect(5, 10, 20, 25)
    assert mean_rect([]) is None


def test_tracking_error_is_distance_to_view_centre() -> None:
    # 320x240 view: centre (160, 120). A 20x20 face at (170, 150) has its centre at (180, 160).
    assert tracking_error(Rect(170, 150, 20, 20), 320, 240) == pytest.approx(math.hypot(20, 40))
    assert tracking_error(None, 320, 240) is None


def test_clip_to_view() -> None:
    assert clip_to_view(Rect(-10, 0, 40, 40), 320, 240, 0.5) == Rect(0, 0, 30, 40)
    assert clip_to_view(Rect(-30, 0, 40, 40), 320, 240, 0.5) is None  # a quarter shows
    assert clip_to_view(Rect(400, 0, 40, 40), 320, 240, 0.5) is None
