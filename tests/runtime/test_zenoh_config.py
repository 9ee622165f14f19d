"""The session settings every Zenoh session of roboscale is opened with."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import require

from roboscale.runtime.zenoh_config import (
    SHM_POOL,
    SHM_SETTINGS,
    SHM_THRESHOLD,
    THREAD_LAYOUT,
    THREADS_ENV,
    remove_orphaned_segments,
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


def test_shared_memory_settings_come_with_shared_memory_only() -> None:
    on = dict(zenoh_settings(["tcp/127.0.0.1:7447"], []))
    off = dict(zenoh_settings(["tcp/127.0.0.1:7447"], [], shared_memory=False))
    assert json.loads(on["transport/shared_memory/enabled"]) is True
    assert on.items() >= dict(SHM_SETTINGS).items()
    assert not any(
        key.startswith("transport/shared_memory/")
        for key in set(off) - {"transport/shared_memory/enabled"}
    )


@pytest.mark.zenoh
def test_zenoh_takes_the_shared_memory_settings(zenoh: None) -> None:
    config = zenoh_config(zenoh_settings(["tcp/127.0.0.1:7447"], []))
    optimization = json.loads(config.get_json("transport/shared_memory/transport_optimization"))
    assert optimization["enabled"] is True
    assert optimization["pool_size"] == SHM_POOL
    assert optimization["message_size_threshold"] == SHM_THRESHOLD


def test_a_sweep_removes_only_unheld_segments_and_never_follows_a_link(tmp_path: Path) -> None:
    held, orphan, victim = tmp_path / "1.zenoh", tmp_path / "2.zenoh", tmp_path / "victim"
    for path in (held, orphan, victim):
        path.write_bytes(b"x")
    (tmp_path / "3.zenoh").symlink_to(victim)  # planted by whoever can write the folder
    (tmp_path / "other.txt").write_bytes(b"x")
    with held.open("rb") as holder:
        fcntl.flock(holder, fcntl.LOCK_SH)  # as every process that maps a segment does
        assert remove_orphaned_segments(tmp_path) == [str(orphan)]
    assert held.exists() and victim.read_bytes() == b"x" and (tmp_path / "3.zenoh").is_symlink()
    assert (tmp_path / "other.txt").exists()


BLOCKED_PROGRAM = (
    "from roboscale.runtime.zenoh_config import shared_memory_blocked as b; print(b())"
)


def test_a_process_that_cannot_lock_a_pool_is_told_why() -> None:
    require(os.geteuid() == 0, "dropping CAP_IPC_LOCK for a child needs root's setpriv")
    as_is = [sys.executable, "-c", BLOCKED_PROGRAM]
    # The usual user's lot: an 8 MiB memlock limit, no CAP_IPC_LOCK.
    limited = ["prlimit", "--memlock=8388608:8388608", "setpriv", "--bounding-set=-ipc_lock"]
    said = subprocess.run([*limited, *as_is], capture_output=True, text=True, check=True)
    assert "may lock only 8192 KiB" in said.stdout and "ulimit -l" in said.stdout
    capable = subprocess.run([*limited[:2], *as_is], capture_output=True, text=True, check=True)
    assert capable.stdout.strip() == "None"  # root keeps CAP_IPC_LOCK: no limit applies
