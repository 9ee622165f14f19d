"""bench/nodes.py with small counts: real runtimes and a real Erlang VM, no timing asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

import nodes  # bench/nodes.py, importable through tests/bench/conftest.py


@pytest.mark.slow
@pytest.mark.erlang
def test_idle_erlang_processes_are_measured_in_a_fresh_vm(erlang: None, tmp_path: Path) -> None:
    result = nodes.erlang_idle(1000, nodes.compile_erlang(tmp_path))
    assert result["processes"] == 1000
    assert result["rss_bytes_per_process"] > 0 and result["process_info_bytes"] > 0


@pytest.mark.slow
def test_publishing_nodes_deliver_every_message_they_publish() -> None:
    result = nodes.publishing(50, 2)
    assert result["started"] == 50 and result["due"] == 100
    assert result["delivered"] == result["published"]


def test_goals_not_measured_at_a_hundred_thousand_are_not_judged() -> None:
    goals = nodes.goals({nodes.RUNTIME: {1000: []}, nodes.ERLANG: {}}, {})
    assert [g["met"] for g in goals] == [nodes.NOT_JUDGED]


def test_bad_counts_are_refused_with_what_is_allowed() -> None:
    with pytest.raises(nodes.UserError, match="whole numbers"):
        nodes.parse_counts("10k", quick=False)
    assert nodes.parse_counts(None, quick=True) == nodes.QUICK_COUNTS
