import math

from roboscale.facetrack.trajectory import AWAY, JUMP, SMOOTH, Trajectory, Viewport

BOUNDS = (70.0, 70.0, 954.0, 710.0)


def test_same_seed_same_path_other_seed_other_path() -> None:
    a, b, c = (Trajectory(s, 60.0, BOUNDS) for s in (1, 1, 2))
    times = [i / 10 for i in range(600)]
    assert [a.at(t) for t in times] == [b.at(t) for t in times]
    assert [a.at(t) for t in times] != [c.at(t) for t in times]


def test_path_stays_in_bounds_and_has_every_kind() -> None:
    path = Trajectory(3, 120.0, BOUNDS)
    kinds = {s.kind for s in path.segments}
    assert {SMOOTH, JUMP, AWAY} <= kinds
    for i in range(1200):
        x, y, _ = path.at(i / 10)
        assert BOUNDS[0] <= x <= BOUNDS[2] and BOUNDS[1] <= y <= BOUNDS[3]


def test_smooth_moves_are_continuous_and_jumps_are_steps() -> None:
    path = Trajectory(5, 120.0, BOUNDS)
    for s in path.segments:
        if s.kind == SMOOTH:
            assert s.at(s.t0) == s.start
            assert math.dist(s.at(s.t1), s.end) < 1e-9
            mid = s.at((s.t0 + s.t1) / 2)
            assert min(s.start[0], s.end[0]) - 1e-9 <= mid[0] <= max(s.start[0], s.end[0]) + 1e-9
        if s.kind == JUMP:  # a step of at most 80 px (less where the bounds clamp it)
            assert math.dist(s.start, s.end) <= 80 + 1e-9
            assert path.at(s.t0)[:2] == s.end  # at once, no motion in between


def test_face_is_invisible_while_away() -> None:
    path = Trajectory(3, 120.0, BOUNDS)
    away = next(s for s in path.segments if s.kind == AWAY)
    assert path.at((away.t0 + away.t1) / 2)[2] is False
    assert path.at(0.5)[2] is True  # the first second is a visible hold


def test_viewport_moves_at_bounded_speed() -> None:
    vp = Viewport(1024, 780, 320, 240, pan_speed=100.0)
    start = (vp.cx, vp.cy)
    vp.aim(vp.cx + 300, vp.cy)
    vp.step(0.5)
    assert math.dist(start, (vp.cx, vp.cy)) == 50.0
    for _ in range(10):
        vp.step(0.5)
    assert (vp.cx, vp.cy) == vp.target


def test_viewport_stays_inside_the_scene() -> None:
    vp = Viewport(1024, 780, 320, 240, pan_speed=1e6)
    vp.aim(-500, 5000)
    vp.step(1.0)
    assert vp.origin == (0, 780 - 240)
    vp.nudge(10_000, -10_000)
    vp.step(1.0)
    assert vp.origin == (1024 - 320, 0)
