"""Measure an emulated link and compare it with its profile.

Between two hosts of a set: RTT and its spread (UDP ping; the spread is the
median absolute deviation, robust to a scheduler hiccup), throughput (a bounded
TCP bulk transfer, slow start excluded) and one-way loss (a paced UDP probe
burst, well below the bandwidth so that only the profile's loss drops probes).
Each figure is compared with what the profile implies; the tolerance is 10 %,
widened only where a measurement cannot be that exact: a floor for timing noise
of Python probes, and a 3-sigma binomial interval for loss.
"""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from roboscale.env import netcmd
from roboscale.env.hosts import Host, HostSet
from roboscale.env.links import LinkProfile
from roboscale.errors import UserError

TOLERANCE = 0.10
RTT_FLOOR_MS = 0.25  # Python send/receive and emulator wake-up, measured on veth
JITTER_FLOOR_MS = 0.15  # the emulator's own wake-up noise adds ~0.1 ms of spread
PORT = 47_000
PING_SIZE = 64
BASELINE_PINGS = 100
UDP_OVERLOAD = 1.2  # offered/bandwidth when measuring capacity with UDP
TCP_MSS = 1448  # 1500 MTU - 20 IP - 32 TCP with timestamps


@dataclass(frozen=True)
class Budget:
    """How long each measurement runs (all bounded)."""

    pings: int = 200
    ping_interval_s: float = 0.005
    bulk_s: float = 1.5
    probes: int = 4000
    probe_rate: float = 4000.0


def _probe(host: Host, *args: str) -> list[str]:
    # Measurement tools run in the host's namespace but outside its CPU quota:
    # they measure the link, not the host.
    argv = [sys.executable, "-m", "roboscale.env.probe", *args]
    return [*netcmd.netns_exec_prefix(host.netns), *argv]


def _serve_and_run(server: list[str], client: list[str], timeout: float) -> tuple[Any, Any]:
    """Start a probe server, wait for READY, run the client; both results as JSON."""
    with subprocess.Popen(server, stdout=subprocess.PIPE, text=True) as proc:
        try:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "READY":
                raise UserError(f"link probe server did not start: {' '.join(server)}")
            done = subprocess.run(
                client, capture_output=True, text=True, timeout=timeout, check=False
            )
            if done.returncode != 0:
                raise UserError(f"link probe failed: {done.stderr.strip()[-400:]}")
            out, _ = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
    return json.loads(out.strip().splitlines()[-1]), json.loads(
        done.stdout.strip().splitlines()[-1]
    )


def _tcp_throughput(src: Host, dst: Host, budget: Budget) -> Any:
    sink, _ = _serve_and_run(
        _probe(dst, "tcp-sink", "--port", str(PORT + 1), "--duration", str(budget.bulk_s + 3)),
        _probe(src, "tcp-bulk", "--to", dst.address, "--port", str(PORT + 1),
               "--duration", str(budget.bulk_s)),
        timeout=budget.bulk_s + 10,
    )  # fmt: skip
    return sink


def _udp_throughput(src: Host, dst: Host, budget: Budget, offered_mbit: float) -> Any:
    """Offer more than the link carries; what arrives is its capacity after loss."""
    rate = offered_mbit * 1e6 / 8 / 1500
    count = int(rate * budget.bulk_s)
    sink, _ = _serve_and_run(
        _probe(dst, "udp-count", "--port", str(PORT + 1), "--duration", str(budget.bulk_s + 5)),
        _probe(src, "udp-burst", "--to", dst.address, "--port", str(PORT + 1),
               "--count", str(count), "--rate", str(rate), "--size", "1472"),
        timeout=budget.bulk_s + 10,
    )  # fmt: skip
    return sink


class LinkFigures(TypedDict):
    """What `measure` found between two hosts."""

    rtt_ms: float | None
    rtt_mad_ms: float | None
    probe_overhead_ms: float
    probe_overhead_mad_ms: float
    rtt_stdev_ms: float | None
    ping_loss: float
    throughput_mbit: float
    loss: float
    probes: int
    pings: int


class Check(TypedDict):
    """One figure of a profile: expected, measured, the deviation allowed, and whether it
    holds."""

    expected: float
    measured: float | None
    allowed: float
    ok: bool


def measure(
    src: Host, dst: Host, budget: Budget = Budget(), offered_mbit: float | None = None
) -> LinkFigures:
    """RTT, RTT spread, throughput and loss from src to dst.

    Throughput is a TCP bulk transfer, or with offered_mbit a UDP stream at that
    rate: with loss, TCP backs off and would measure its own congestion control,
    not the link's capacity."""
    ping_s = budget.pings * budget.ping_interval_s + 1.0
    _, ping = _serve_and_run(
        _probe(dst, "udp-echo", "--port", str(PORT), "--duration", str(ping_s + 2)),
        _probe(src, "udp-ping", "--to", dst.address, "--port", str(PORT),
               "--count", str(budget.pings), "--interval", str(budget.ping_interval_s),
               "--size", str(PING_SIZE)),
        timeout=ping_s + 10,
    )  # fmt: skip
    if offered_mbit is None:
        sink = _tcp_throughput(src, dst, budget)
    else:
        sink = _udp_throughput(src, dst, budget, offered_mbit)
    burst_s = budget.probes / budget.probe_rate
    count, _ = _serve_and_run(
        _probe(dst, "udp-count", "--port", str(PORT + 2), "--duration", str(burst_s + 5)),
        _probe(src, "udp-burst", "--to", dst.address, "--port", str(PORT + 2),
               "--count", str(budget.probes), "--rate", str(budget.probe_rate)),
        timeout=burst_s + 10,
    )  # fmt: skip
    # The probes' own cost (two Python processes waking up), measured on the
    # destination's loopback, is added to the expected RTT: it is not the link.
    _, base = _serve_and_run(
        _probe(dst, "udp-echo", "--port", str(PORT + 3), "--duration", "5"),
        _probe(dst, "udp-ping", "--to", "127.0.0.1", "--port", str(PORT + 3),
               "--count", str(BASELINE_PINGS), "--interval", "0.002", "--wait", "0.2"),
        timeout=15,
    )  # fmt: skip
    base_ms = [r / 1e6 for r in base["rtt_ns"]]
    rtts_ms = [r / 1e6 for r in ping["rtt_ns"]]
    seconds = sink["seconds"]
    return LinkFigures(
        rtt_ms=statistics.median(rtts_ms) if rtts_ms else None,
        rtt_mad_ms=_median_abs_deviation(rtts_ms),
        probe_overhead_ms=statistics.median(base_ms) if base_ms else 0.0,
        probe_overhead_mad_ms=_median_abs_deviation(base_ms) or 0.0,
        rtt_stdev_ms=statistics.pstdev(rtts_ms) if len(rtts_ms) > 1 else None,
        ping_loss=1 - len(rtts_ms) / max(1, ping["sent"]),
        throughput_mbit=sink["counted"] * 8 / seconds / 1e6 if seconds > 0 else 0.0,
        loss=1 - count["received"] / budget.probes,
        probes=budget.probes,
        pings=budget.pings,
    )


def _median_abs_deviation(values: list[float]) -> float | None:
    """Spread that a few scheduler hiccups on a shared machine cannot inflate."""
    if len(values) < 2:
        return None
    middle = statistics.median(values)
    return statistics.median(abs(v - middle) for v in values)


def expected(profile: LinkProfile, fabric: str, topology: str) -> dict[str, float]:
    """What the profile implies for the measured figures."""
    hops = 2 if topology == "star" else 1  # links a packet crosses one way
    l2 = 14 if fabric == "kernel" else 0  # tbf counts the Ethernet header, TUN does not
    ping_wire = (PING_SIZE + 28 + l2) * 8 / (profile.bandwidth_mbit * 1e3)  # ms per link
    return {
        "rtt_ms": 2 * (profile.delay_ms + hops * ping_wire),
        # RTT adds two independent uniform(-j, j) delays: a triangular spread on
        # [-2j, 2j], whose median absolute deviation is 2j(1 - 1/sqrt 2).
        "rtt_mad_ms": 2 * profile.jitter_ms * (1 - 1 / math.sqrt(2)),
        # TCP: payload of full segments; UDP (lossy profiles): IP bytes that arrive.
        "throughput_mbit": profile.bandwidth_mbit * TCP_MSS / (1500 + l2)
        if profile.loss == 0
        else profile.bandwidth_mbit * 1500 / (1500 + l2) * (1 - profile.loss),
        "loss": profile.loss,
    }


def compare(exp: dict[str, float], got: Mapping[str, object], probes: int) -> dict[str, Check]:
    """Per figure: expected, measured, allowed deviation and whether it holds."""
    p = exp["loss"]
    allowed = {
        "rtt_ms": max(TOLERANCE * exp["rtt_ms"], RTT_FLOOR_MS),
        "rtt_mad_ms": max(TOLERANCE * exp["rtt_mad_ms"], JITTER_FLOOR_MS),
        "throughput_mbit": TOLERANCE * exp["throughput_mbit"],
        # A burst of n probes cannot pin a small p to 10 %: use 3 binomial sigmas.
        "loss": max(TOLERANCE * p, 3 * math.sqrt(max(p, 1 / probes) * (1 - p) / probes)),
    }
    out: dict[str, Check] = {}
    for key, want in exp.items():
        value = got.get(key)
        measured = float(value) if isinstance(value, int | float) else None
        ok = measured is not None and abs(measured - want) <= allowed[key]
        out[key] = Check(expected=want, measured=measured, allowed=allowed[key], ok=ok)
    return out


def verify(
    hostset: HostSet, budget: Budget = Budget(), *, strict: bool = True
) -> dict[str, object]:
    """Measure host 0 -> host 1 (or nothing for a single host) and check the profile."""
    if len(hostset.hosts) < 2:
        return {"profile": hostset.profile.as_dict(), "checked": False}
    exp = expected(hostset.profile, hostset.fabric, hostset.topology)
    profile = hostset.profile
    offered = UDP_OVERLOAD * profile.bandwidth_mbit if profile.loss > 0 else None
    got = measure(hostset.hosts[0], hostset.hosts[1], budget, offered)
    exp["rtt_ms"] += got["probe_overhead_ms"]
    exp["rtt_mad_ms"] = math.hypot(exp["rtt_mad_ms"], got["probe_overhead_mad_ms"])
    checks = compare(exp, got, budget.probes)
    held = all(c["ok"] for c in checks.values())
    report: dict[str, object] = {
        "profile": hostset.profile.as_dict(),
        "fabric": hostset.fabric,
        "topology": hostset.topology,
        "checked": True,
        "ok": held,
        "checks": checks,
        "measured": got,
    }
    if strict and not held:
        bad = [f"{k}: measured {c['measured']}, expected {c['expected']:.4g} ± {c['allowed']:.3g}"
               for k, c in checks.items() if not c["ok"]]  # fmt: skip
        raise UserError(
            f"link profile {hostset.profile.name!r} does not hold: " + "; ".join(bad),
            hint="the machine may be overloaded; rerun, or lower the profile's bandwidth",
        )
    return report
