"""The workload registry and the agent's configuration (what the lab writes, agents read)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from roboscale.errors import UserError
from roboscale.workloads.base import (
    AGENT_CONFIG_VERSION,
    AgentConfig,
    AgentConfigError,
    NodeSpec,
    get_workload,
    known_workloads,
)
from roboscale.workloads.echo import EchoConfig
from roboscale.workloads.oneway import FlowConfig

STREAM = {
    "kind": {"kind": "text", "size": 11}, "rate_hz": 100.0, "messages": 10, "warmup": 2,
    "drain_s": 1.0, "publisher_queue": 0, "subscriber_queue": 0, "wait_for_match": True,
    "match_timeout_s": 5.0,
}  # fmt: skip


def config() -> tuple[AgentConfig, AgentConfig]:
    echo = EchoConfig.from_dict({**STREAM, "pair": 0, "topic_out": "/o", "topic_back": "/b"})
    flow = FlowConfig.from_dict(
        {
            **STREAM,
            "workload": "chain",
            "node": 1,
            "nodes": 2,
            "topic_in": "/h1",
            "topic_out": "/h2",
            "topic_ack": "/a",
            "ack": False,
        }
    )
    return AgentConfig(
        backend="zenoh",
        workload="echo",
        name="pair_0",
        role="pair",
        host="local",
        host_index=0,
        nodes=(
            NodeSpec("echoer_0", "echoer", "/tmp/e.raw", {"listen": ["tcp/x"]}, echo),
            NodeSpec("sender_0", "sender", "/tmp/s.raw", {}, echo),
        ),
        close=False,
    ), AgentConfig(
        backend="native",
        workload="chain",
        name="hop01",
        role="sink",
        host="h1",
        host_index=1,
        nodes=(NodeSpec("hop01", "sink", "/tmp/h.raw", {}, flow),),
        close=True,
    )


def test_agent_config_round_trips_typed() -> None:
    for cfg in config():
        back = AgentConfig.from_json(cfg.to_json())
        assert back == cfg
        assert type(back.nodes[0].program) is type(cfg.nodes[0].program)


def test_agent_config_refuses_another_version() -> None:
    data = json.loads(config()[0].to_json())
    data["version"] = AGENT_CONFIG_VERSION + 1
    with pytest.raises(AgentConfigError, match=r"agent configuration version 3; .* version 2"):
        AgentConfig.from_json(json.dumps(data))


def test_agent_exits_2_with_a_clear_error_on_another_version(tmp_path: Path) -> None:
    data = json.loads(config()[0].to_json())
    data["version"] = 99
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(data))
    proc = subprocess.run(
        [sys.executable, "-m", "roboscale.workloads.agent", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"error: {path}: agent configuration version 99;")
    assert "Traceback" not in proc.stderr


def test_unknown_workload_names_the_known_ones() -> None:
    with pytest.raises(UserError, match=r"workload 'star' is not available .* echo, fanout"):
        get_workload("star")


def test_every_registered_workload_loads() -> None:
    for name in known_workloads():
        assert get_workload(name).name == name
