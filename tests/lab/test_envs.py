"""Echo trials across emulated hosts: real namespaces, the wifi profile, ros1 and zenoh."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from rich.console import Console

from roboscale.env.cleanup import PREFIX
from roboscale.env.netcmd import netns_names
from roboscale.errors import UserError
from roboscale.lab.runner import run_sweep
from roboscale.records.folder import ResultsFolder
from roboscale.spec.loader import load_spec
from roboscale.spec.planner import plan

SPEC = """\
name: hosts
sweep:
  backend: [zenoh, ros1]
  rate_hz: 100
  payload: laserscan
  pairs: 4
  hosts: 3
  link: wifi
trial:
  runs: 1
  messages: 100
  warmup: 10
  drain_s: 1
"""


def sweep(tmp_path: Path, text: str, backends: list[str] | None = None) -> Path:
    spec_path = tmp_path / "spec.yaml"
    spec_path.write_text(text)
    spec = load_spec(spec_path)
    out = tmp_path / "run"
    outcome = run_sweep(spec, plan(spec, backends), out, text, "test", Console(quiet=True))
    assert outcome.failed == 0 and not outcome.interrupted
    return out


@pytest.mark.netns
@pytest.mark.ros1
@pytest.mark.zenoh
def test_echo_across_three_wifi_hosts(tmp_path: Path, root: None, ros1: None, zenoh: None) -> None:
    out = sweep(tmp_path, SPEC)
    summary = json.loads((out / "summary.json").read_text())["trials"]
    assert [e["backend"] for e in summary] == ["zenoh", "ros1"]
    for e in summary:
        assert e["received"] == e["sent"] == 400
        # Two hops of the wifi profile's 2 ms delay each way: the RTT cannot be below 8 ms
        # of added delay minus jitter (4 x 1 ms).
        assert e["rtt_us"]["p50"] > 4000
        records = ResultsFolder(out).records(e["trial"]).to_pydict()
        assert set(records["host"]) == {"h0"}  # one sender host of three: h0; echoers h1, h2
        meta = json.loads((out / "trials" / e["trial"] / "metadata.json").read_text())
        assert meta["env"]["link_profile"]["name"] == "wifi"
        assert meta["env"]["link_measured"]["ok"] is True
        echo_hosts = {n["host"] for n in meta["nodes"] if n["role"] == "echoer"}
        assert echo_hosts == {"h1", "h2"}
    assert [n for n in netns_names() if n.startswith(PREFIX)] == []


def test_native_cannot_span_hosts(tmp_path: Path) -> None:
    text = SPEC.replace("[zenoh, ros1]", "native")
    with pytest.raises(UserError, match="cannot spread a pair over 3 hosts"):
        sweep(tmp_path, text)
    assert not (tmp_path / "run").exists()  # refused before anything ran


@pytest.mark.zenoh
def test_background_cpu_load_runs_during_the_trial_and_ends_with_it(
    tmp_path: Path, zenoh: None
) -> None:
    """The lab report's extra workload, on this machine: busy loops beside the nodes."""
    text = (
        "name: loaded\nsweep:\n  backend: zenoh\n  rate_hz: 100\n"
        "trial:\n  runs: 1\n  messages: 100\n  warmup: 10\n  drain_s: 1\nenv:\n  load_cpu: 0.5\n"
    )
    out = sweep(tmp_path, text)
    (entry,) = json.loads((out / "summary.json").read_text())["trials"]
    assert entry["received"] == 100 and entry["load_cpu"] == 0.5
    left = subprocess.run(["pgrep", "-f", "roboscale.env.load cpu"], capture_output=True)
    assert left.stdout == b""  # stopped with the trial, not left to run out its bound


ROUTED = """\
name: routed
sweep:
  backend: [zenoh, native-proc]
  rate_hz: 100
  payload: laserscan
  pairs: 2
  hosts: HOSTS
  link: LINK
env:
  zenoh_routers: true
  verify_link: false
trial:
  runs: 1
  messages: 100
  warmup: 10
  drain_s: 1
"""


@pytest.mark.zenoh
def test_zenoh_nodes_as_clients_of_a_router(tmp_path: Path, zenoh: None) -> None:
    out = sweep(tmp_path, ROUTED.replace("HOSTS", "1").replace("LINK", "loopback"))
    entries = json.loads((out / "summary.json").read_text())["trials"]
    assert [e["received"] for e in entries] == [200, 200]
    assert [n.name for n in (out / "infra").iterdir()] and all(
        (d / "router-0.log").exists() for d in (out / "infra").iterdir()
    )
    left = subprocess.run(["pgrep", "-f", "roboscale.backends.zenoh_router"], capture_output=True)
    assert left.stdout == b""  # the routers stopped with their environment


@pytest.mark.netns
@pytest.mark.zenoh
def test_a_router_per_emulated_host(tmp_path: Path, root: None, zenoh: None) -> None:
    out = sweep(tmp_path, ROUTED.replace("HOSTS", "3").replace("LINK", "ethernet"))
    entries = json.loads((out / "summary.json").read_text())["trials"]
    assert [e["received"] for e in entries] == [200, 200]
    routers = sorted(p.name for d in (out / "infra").iterdir() for p in d.glob("router-*.log"))
    assert routers == ["router-0.log", "router-0.log", "router-1.log", "router-1.log",
                       "router-2.log", "router-2.log"]  # fmt: skip
    assert [n for n in netns_names() if n.startswith(PREFIX)] == []
