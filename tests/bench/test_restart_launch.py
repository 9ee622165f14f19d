"""Smoke test of bench/restart_launch.py: one launch file under roslaunch and roboscale."""

from __future__ import annotations

import pytest

import restart_launch  # bench/restart_launch.py, importable through tests/bench/conftest.py


@pytest.mark.slow
@pytest.mark.ros1
def test_both_runners_restart_the_same_node_and_count_loss(ros1: None) -> None:
    result = restart_launch.compare(kills=2, rounds=1, loss_kills=1)
    assert [len(result["samples_us"][r]) for r in restart_launch.RUNNERS] == [2, 2]
    assert all(row["n"] == 2 for row in result["rows"])
    plain, plain_rs, relayed = result["loss"]  # roslaunch, roboscale, roboscale + relay
    assert [row["kills"] for row in result["loss"]] == [1, 1, 1]
    assert all(row["published"] > 0 for row in result["loss"])
    assert plain["duplicated"] == plain_rs["duplicated"] == 0
    # Behind the relay: nothing lost; at least once, so a message handled but not yet
    # committed to the cursor when the kill came may arrive again (one per kill at most).
    assert relayed["lost"] == 0 and relayed["duplicated"] <= 1
    assert result["p50_ratio"] > 0
