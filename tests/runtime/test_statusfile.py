"""The live status file: rates from the bus counters, atomic writes, reading, stale files."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

import pytest
from tests.conftest import EVENT_TIMEOUT_S

from roboscale.errors import UserError
from roboscale.runtime.bus import Bus
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.statusfile import (
    StatusPublisher,
    TopicRates,
    read_statuses,
    run_dir,
    status_path,
)
from roboscale.runtime.supervisor import ChildSpec, Supervisor, SupervisorRecipe


class Talker(Node):
    def on_start(self) -> None:
        self.publisher("/chatter")
        self.subscribe("/chatter", lambda msg: None)


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_rates_are_messages_per_second_over_the_last_second() -> None:
    loop = asyncio.new_event_loop()
    try:
        bus = Bus(loop, lambda event: None)
        clock = FakeClock()
        rates = TopicRates(bus, clock)
        topic = bus.topic("/scan")
        assert rates.sample()[0]["rate_hz"] == 0.0  # one snapshot: no span yet
        for _ in range(4):  # 50 messages every 0.5 s = 100/s
            clock.now += 0.5
            for _ in range(50):
                topic.publish(b"x")
            row = rates.sample()[0]
        assert row == {"topic": "/scan", "published": 200, "rate_hz": 100.0, "subscribers": 0}
        clock.now += 0.5  # silence: the rate falls as the window slides
        assert rates.sample()[0]["rate_hz"] == 50.0
        clock.now += 0.5
        assert rates.sample()[0]["rate_hz"] == 0.0
    finally:
        loop.close()


def tree(rt: Runtime) -> Supervisor:
    sub = SupervisorRecipe("sub", [ChildSpec(NodeRecipe("talker", Talker))])
    return Supervisor(rt, "robot", [ChildSpec(sub)])


def test_published_status_is_read_back(rt: Runtime, tmp_path: Path) -> None:
    root = tree(rt)
    rt.wait(root.start_async())
    publisher = StatusPublisher(
        root,
        rt.bus,
        directory=tmp_path,
        extra=lambda: {"chaos": {"kills": 0, "restarts": 0, "pending": 0}},
    )
    rt.call(rt.bus.topic("/chatter").publish, b"hi")
    rt.call(publisher.publish)
    (status,) = read_statuses(tmp_path)
    assert (status.name, status.stale) == ("robot", "")
    assert status.doc is not None and status.doc["alive"] is True and "chaos" in status.doc
    rows = status.doc["rows"]
    assert [r["path"] for r in rows] == ["/robot/sub", "/robot/sub/talker"]
    assert rows[1]["state"] == "running" and rows[1]["kind"] == "node"
    assert status.doc["topics"][0]["topic"] == "/chatter"
    assert status.doc["topics"][0]["published"] == 1
    assert not list(tmp_path.glob("*.part"))  # written through a rename
    assert read_statuses(tmp_path, "other") == []
    rt.wait(root.stop_async())


def test_publisher_rewrites_until_cancelled_then_removes_its_file(
    rt: Runtime, tmp_path: Path
) -> None:
    root = tree(rt)
    rt.wait(root.start_async())
    publisher = StatusPublisher(root, rt.bus, directory=tmp_path / "run")

    async def publish_a_while() -> bool:
        task = asyncio.ensure_future(publisher.run())
        while publisher.writes < 2:
            await asyncio.sleep(0.05)
        existed = publisher.path.exists()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return existed

    assert rt.wait(publish_a_while(), timeout_s=EVENT_TIMEOUT_S)
    assert not publisher.path.exists()
    assert (tmp_path / "run").stat().st_mode & 0o777 == 0o700
    rt.wait(root.stop_async())


def dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_a_stale_file_of_a_dead_pid_is_reported_and_removed(tmp_path: Path) -> None:
    pid = dead_pid()
    stale = status_path(tmp_path, "robot", pid)
    stale.write_text(json.dumps({"format": 1}))
    (status,) = read_statuses(tmp_path)
    assert status.doc is None and status.pid == pid and "not running" in status.stale
    assert not stale.exists()
    (tmp_path / "notes.json").write_text("{}")  # not NAME-PID.json: ignored
    assert read_statuses(tmp_path) == []


def test_an_unknown_format_is_refused_clearly(tmp_path: Path) -> None:
    import os

    path = status_path(tmp_path, "robot", os.getpid())
    path.write_text(json.dumps({"format": 99}))
    with pytest.raises(UserError, match="status format 99 is not supported"):
        read_statuses(tmp_path)
    path.write_text("{half")
    with pytest.raises(UserError, match="not a readable status file"):
        read_statuses(tmp_path)


def test_run_dir_prefers_xdg_runtime_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert run_dir() == tmp_path / "roboscale" / "launch"
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    assert run_dir().name == "launch" and run_dir().parent.name.startswith("roboscale-")
