"""The session settings every Zenoh session of roboscale is opened with."""

from __future__ import annotations

import json
import os

import pytest

from roboscale.runtime.zenoh_config import (
    THREAD_LAYOUT,
    THREADS_ENV,
    use_thread_layout,
    zenoh_config,
    zenoh_settings,
)


def test_settings_name_the_endpoints_and_turn_scouting_off() -> None:
    settings = dict(zenoh_settings(["tcp/127.0.0.1:7447"], [], shared_memory=False))
    assert json.loads(settings["listen/endpoints"]) == ["tcp/127.0.0.1:7447"]
    assert json.loads(settings["connect/endpoints"]) == []
    assert settings["scouting/multicast/enabled"] == "false"
    assert settings["scouting/gossip/enabled"] == "false"
    assert json.loads(settings["transport/shared_memory/enabled"]) is False
    assert "connect/retry" not in settings


def test_a_retry_period_is_set_only_when_asked() -> None:
    settings = dict(zenoh_settings([], ["tcp/127.0.0.1:7447"], mode="client", retry_ms=50))
    assert json.loads(settings["mode"]) == "client"
    assert json.loads(settings["connect/retry"]) == {"period_init_ms": 50, "period_max_ms": 200}


def test_the_config_carries_the_settings() -> None:
    config = zenoh_config(zenoh_settings(["tcp/127.0.0.1:7447"], [], retry_ms=50))
    assert json.loads(config.get_json("connect/retry"))["period_init_ms"] == 50
    assert json.loads(config.get_json("listen/endpoints")) == ["tcp/127.0.0.1:7447"]


def test_zenoh_threads_take_the_runtime_layout_unless_the_user_set_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    use_thread_layout()
    assert os.environ[THREADS_ENV] == THREAD_LAYOUT
    monkeypatch.setenv(THREADS_ENV, "(rx: (worker_threads: 3))")
    use_thread_layout()
    assert os.environ[THREADS_ENV] == "(rx: (worker_threads: 3))"
