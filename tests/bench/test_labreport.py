"""bench/labreport.py's reading of summary entries: the three findings and their rules."""

from __future__ import annotations

from typing import Any

import labreport  # bench/labreport.py, importable through tests/bench/conftest.py


def entry(workload: str, size: int, **fields: Any) -> dict[str, Any]:
    return {"backend": "dds", "workload": workload, "payload_bytes": size, "received": 10,
            "hosts": 1, "link": "loopback", "cpu": None, **fields}  # fmt: skip


def dist(p50: float) -> dict[str, float]:
    return {"p50": p50}


def test_latency_growing_with_size_agrees() -> None:
    es = [entry("echo", s, rtt_us=dist(v)) for s, v in ((256, 100.0), (4096, 95.0), (1 << 20, 900))]
    row = labreport.size_finding(es, "dds")
    assert row is not None and row["agrees"] is True
    falling = [*es, entry("echo", 4 << 20, rtt_us=dist(500.0))]  # 900 -> 500: a 44 % fall
    assert labreport.size_finding(falling, "dds")["agrees"] is False  # type: ignore[index]


def test_fanout_ratio_is_compared_between_sizes() -> None:
    es = [
        entry("fanout", 256, listeners=1, one_way_us=dist(100.0)),
        entry("fanout", 256, listeners=4, one_way_us=dist(150.0)),
        entry("fanout", 1 << 20, listeners=1, one_way_us=dist(1000.0)),
        entry("fanout", 1 << 20, listeners=4, one_way_us=dist(3000.0)),
    ]
    row = labreport.fanout_finding(es, "dds")
    assert row is not None and row["agrees"] is True
    assert "1.50x at 256 B, 3.00x at 1048576 B" in row["figure"]


def test_chain_hops_are_compared_with_pings_of_the_same_size() -> None:
    hops = [{"hop_us": dist(v)} for v in (90.0, 110.0, 130.0)]
    es = [
        entry("ping", 256, ack=False, one_way_us=dist(100.0)),
        entry("ping", 256, ack=True, one_way_us=dist(999.0)),  # ping-pong is not the reference
        entry("chain", 256, per_node=hops, one_way_us=dist(330.0)),
    ]
    row = labreport.chain_finding(es, "dds")
    assert row is not None and row["agrees"] is True
    assert row["figure"].endswith("256 B 1.10x")


def test_a_hop_ratio_just_outside_the_rule_does_not_print_as_its_bound() -> None:
    es = [
        entry("ping", 256, ack=False, one_way_us=dist(1000.0)),
        entry("chain", 256, per_node=[{"hop_us": dist(499.6)}], one_way_us=dist(2000.0)),
    ]
    row = labreport.chain_finding(es, "dds")
    assert row is not None and row["agrees"] is False
    assert row["figure"].endswith("256 B 0.4996x")


def test_environments_are_never_mixed() -> None:
    here = entry("echo", 256)
    there = entry("echo", 256, hosts=2, link="wifi", load_net_mbit=15.0)
    groups = labreport.by_environment([here, there])
    assert sorted(groups) == ["2 hosts wifi, +15 Mbit/s", "this machine"]
