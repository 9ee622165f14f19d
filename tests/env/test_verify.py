"""What a profile implies for the measured figures, and the tolerances (pure logic)."""

from __future__ import annotations

import math

from roboscale.env.links import BUILTIN, LinkProfile
from roboscale.env.verify import compare, expected


def test_wifi_expectations() -> None:
    exp = expected(BUILTIN["wifi"], "emulator", "star")
    assert 4.0 < exp["rtt_ms"] < 4.2  # 2 x 2 ms plus four 92-byte serialisations
    assert math.isclose(exp["rtt_mad_ms"], 2 * (1 - 1 / math.sqrt(2)))
    assert math.isclose(exp["throughput_mbit"], 25 * (1 - 0.005))  # UDP: lossy profile
    assert exp["loss"] == 0.005


def test_ethernet_expects_tcp_goodput_of_full_frames() -> None:
    exp = expected(BUILTIN["ethernet"], "kernel", "mesh")
    assert math.isclose(exp["throughput_mbit"], 1000 * 1448 / 1514)


def test_compare_uses_ten_percent_with_honest_floors() -> None:
    exp = expected(LinkProfile("x", 10.0, delay_ms=10.0, loss=0.01), "emulator", "mesh")
    good = {"rtt_ms": exp["rtt_ms"] * 1.09, "rtt_mad_ms": 0.05,
            "throughput_mbit": exp["throughput_mbit"] * 0.92, "loss": 0.012}  # fmt: skip
    checks = compare(exp, good, probes=4000)
    assert all(c["ok"] for c in checks.values()), checks
    bad = good | {"throughput_mbit": exp["throughput_mbit"] * 0.85, "loss": 0.03}
    checks = compare(exp, bad, probes=4000)
    assert not checks["throughput_mbit"]["ok"] and not checks["loss"]["ok"]
    assert checks["loss"]["allowed"] > 0.001  # 3 binomial sigmas, wider than 10 % of 1 %
