"""Emulated hosts on real network namespaces: profiles hold, teardown leaves nothing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.conftest import EVENT_TIMEOUT_S, IN_CI, require

from roboscale.env import netcmd
from roboscale.env.cleanup import cleanup_stale, leftovers
from roboscale.env.cpu import CpuLimit
from roboscale.env.hosts import HostSet, host_addresses
from roboscale.env.links import BUILTIN, LinkProfile
from roboscale.env.netcmd import require_root
from roboscale.errors import UserError

REPO = Path(__file__).resolve().parents[2]


def test_no_root_says_hosts_need_root_and_single_host_still_works() -> None:
    with pytest.raises(UserError) as err:
        require_root(euid=1000)
    text = str(err.value)
    assert "emulated hosts need root" in text and "single-host experiments" in text
    require_root(euid=0)


def test_more_hosts_than_addresses_is_refused() -> None:
    assert host_addresses("10.231.0.0/29", 6)[-1] == "10.231.0.6"
    with pytest.raises(UserError, match=r"7 hosts do not fit in 10.231.0.0/29: it has 6"):
        host_addresses("10.231.0.0/29", 7)
    with pytest.raises(UserError, match="not private"):
        host_addresses("8.8.8.0/24", 2)
    with pytest.raises(UserError, match="not an IPv4 network"):
        HostSet(2, subnet="10.231.0.0/33")


def ping(hs: HostSet, src: int, dst: int) -> dict[str, object]:
    """A few UDP pings from host src to host dst, with our probe tools."""
    from roboscale.env.verify import PING_SIZE, _probe, _serve_and_run

    a, b = hs.hosts[src], hs.hosts[dst]
    _, result = _serve_and_run(
        _probe(b, "udp-echo", "--port", "47500", "--duration", "5"),
        _probe(a, "udp-ping", "--to", b.address, "--port", "47500", "--count", "5",
               "--interval", "0.01", "--size", str(PING_SIZE)),
        timeout=15,
    )  # fmt: skip
    return dict(result)


@pytest.mark.netns
def test_three_wifi_hosts_hold_their_profile_and_leave_nothing(root: None) -> None:
    with HostSet(3, BUILTIN["wifi"]) as hs:
        report = hs.link_report
        assert report["ok"], json.dumps(report["checks"], indent=1)
        assert report["fabric"] == "emulator"
        assert len(ping(hs, 2, 0)["rtt_ns"]) >= 4  # type: ignore[arg-type]
        facts = hs.facts()
        assert facts["link_measured"]["checks"]["rtt_ms"]["ok"]
        run_id = hs.run_id
        assert leftovers(run_id)
    assert hs.emulator_stats["forwarded"] > 1000
    assert leftovers(run_id) == []


@pytest.mark.netns
def test_ethernet_mesh_with_cpu_quota_places_processes(root: None) -> None:
    hs = HostSet(3, BUILTIN["ethernet"], topology="mesh", cpu=CpuLimit(quota=0.5))
    with hs:
        hs.up()  # idempotent
        assert hs.link_report["ok"], json.dumps(hs.link_report["checks"], indent=1)
        for src, dst in ((0, 2), (1, 2)):
            assert len(ping(hs, src, dst)["rtt_ns"]) == 5  # type: ignore[arg-type]
        host = hs.hosts[1]
        done = host.run(["sh", "-c", "cat /proc/self/cgroup; ip -o -4 addr"], timeout=10)
        assert f":cpu:/{host.netns}" in done.stdout or f"/{host.netns}\n" in done.stdout
        assert host.address in done.stdout
        run_id = hs.run_id
    assert leftovers(run_id) == []


@pytest.mark.netns
def test_loss_only_profile_uses_iptables(root: None) -> None:
    require(netcmd.have("iptables"), "iptables is not installed (apt-get install iptables)")
    lossy = LinkProfile("lossy", bandwidth_mbit=100.0, loss=0.05)
    with HostSet(2, lossy) as hs:
        assert hs.fabric == "kernel"
        assert hs.link_report["checks"]["loss"]["ok"]
        run_id = hs.run_id
    assert leftovers(run_id) == []


CHILD = """
import os, signal, sys
from roboscale.env.cpu import CpuLimit
from roboscale.env.hosts import HostSet
from roboscale.env.links import BUILTIN
hs = HostSet(2, BUILTIN[sys.argv[1]], cpu=CpuLimit(quota=0.5), verify_link=False).up()
print(hs.run_id, flush=True)
if sys.argv[2] == "crash":
    os.kill(os.getpid(), signal.SIGKILL)
sys.stdin.read()  # until the test closes stdin, or a signal ends it
"""


def start_child(profile: str, how: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, profile, how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    assert proc.stdout is not None
    run_id = proc.stdout.readline().strip()
    assert run_id, "child did not bring its hosts up"
    return proc, run_id


@pytest.mark.netns
def test_stale_hosts_of_a_crashed_run_are_removed(root: None) -> None:
    proc, run_id = start_child("wifi", "crash")
    proc.wait(EVENT_TIMEOUT_S)
    assert proc.returncode == -signal.SIGKILL
    assert any(name.endswith("-h1") for name in leftovers(run_id))
    assert run_id in cleanup_stale()
    assert leftovers(run_id) == []


@pytest.mark.netns
def test_sigterm_tears_down(root: None) -> None:
    proc, run_id = start_child("ethernet", "wait")
    assert leftovers(run_id)
    proc.send_signal(signal.SIGTERM)
    proc.wait(15)
    assert leftovers(run_id) == []


@pytest.mark.netns
def test_cleanup_keeps_runs_of_live_owners(root: None) -> None:
    proc, run_id = start_child("ethernet", "wait")
    try:
        cleanup_stale()
        assert leftovers(run_id)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(EVENT_TIMEOUT_S)  # teardown takes well under a second
        finally:
            proc.kill()
    assert proc.returncode != -signal.SIGKILL, "SIGINT did not end the HostSet's owner"
    assert leftovers(run_id) == []


def test_ci_runs_as_root() -> None:
    if IN_CI:
        assert os.geteuid() == 0
