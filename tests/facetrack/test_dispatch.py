from roboscale.facetrack.dispatch import Dispatcher


def test_random_is_seeded_and_covers_workers() -> None:
    a = [Dispatcher("random", 5, seed=3).choose() for _ in range(1)]
    d1, d2 = Dispatcher("random", 5, seed=3), Dispatcher("random", 5, seed=3)
    picks = [d1.choose() for _ in range(200)]
    assert picks == [d2.choose() for _ in range(200)]
    assert set(picks) == set(range(5)) and a[0] == picks[0]


def test_round_robin() -> None:
    d = Dispatcher("round_robin", 3)
    assert [d.choose() for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]


def test_least_loaded_takes_the_idlest_and_shares_ties() -> None:
    d = Dispatcher("least_loaded", 3)
    assert d.choose([2, 0, 1]) == 1
    assert d.choose([0, 0, 0]) == 2  # tie: the first at or after the pointer (after 1)
    assert d.choose([0, 0, 0]) == 0
