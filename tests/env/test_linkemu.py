"""The link emulator's forwarding logic, fed packets directly (no TUN needed)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from roboscale.env.linkemu import Emulator, Link

MS = 1_000_000


def packet(dst: str, size: int = 100) -> bytes:
    header = bytes([0x45]) + bytes(15) + bytes(int(x) for x in dst.split("."))
    return header + bytes(size - len(header))


@pytest.fixture
def pipes() -> Iterator[list[tuple[int, int]]]:
    made = [os.pipe() for _ in range(2)]
    for r, _ in made:
        os.set_blocking(r, False)
    yield made
    for r, w in made:
        os.close(r)
        os.close(w)


def emulator(pipes: list[tuple[int, int]], **profile: float | bool) -> Emulator:
    base = {"bandwidth_mbit": 8.0, "delay_ms": 2.0, "jitter_ms": 0.0, "loss": 0.0,
            "queue_packets": 10, "reorder": False} | profile  # fmt: skip
    config = {
        "hosts": [{"address": "10.0.0.1"}, {"address": "10.0.0.2"}],
        "topology": "star",
        "profile": base,
    }
    return Emulator(config, [w for _, w in pipes])


def test_link_serialises_at_its_rate_and_tail_drops() -> None:
    link = Link(bits_per_ns=8e6 / 1e9, queue_packets=2)  # 1 byte per µs
    assert link.transmit(0, 1000) == 1_000_000
    assert link.transmit(0, 1000) == 2_000_000
    assert link.transmit(0, 1000) is None  # two in flight: queue full
    assert link.transmit(1_000_000, 1000) == 3_000_000  # the first has left


def test_packet_is_released_after_serialisation_and_delay(pipes: list[tuple[int, int]]) -> None:
    emu = emulator(pipes)
    emu.accept(0, packet("10.0.0.2"), now=0)
    release = emu.pending[0][0]
    # 100 B at 8 Mbit/s = 100 µs per link, two links (up and down), plus 2 ms
    assert release == 2 * 100_000 + 2 * MS
    emu.release_due(release - 1)
    assert emu.counters.forwarded == 0
    emu.release_due(release)
    assert os.read(pipes[1][0], 1000) == packet("10.0.0.2")


def test_unknown_destination_and_self_are_unroutable(pipes: list[tuple[int, int]]) -> None:
    emu = emulator(pipes)
    emu.accept(0, packet("10.0.0.9"), 0)
    emu.accept(0, packet("10.0.0.1"), 0)
    assert emu.counters.unroutable == 2 and not emu.pending


def test_jitter_never_reorders_unless_asked(pipes: list[tuple[int, int]]) -> None:
    emu = emulator(pipes, jitter_ms=1.9, bandwidth_mbit=1000.0, queue_packets=1000)
    for i in range(200):
        emu.accept(0, packet("10.0.0.2"), now=i * 1000)
    releases = [r for r, seq, _, _ in sorted(emu.pending, key=lambda p: p[1])]
    assert releases == sorted(releases)
    emu = emulator(pipes, jitter_ms=1.9, bandwidth_mbit=1000.0, queue_packets=1000, reorder=True)
    for i in range(200):
        emu.accept(0, packet("10.0.0.2"), now=i * 1000)
    releases = [r for r, seq, _, _ in sorted(emu.pending, key=lambda p: p[1])]
    assert releases != sorted(releases)


def test_loss_drops_about_its_share(pipes: list[tuple[int, int]]) -> None:
    emu = emulator(pipes, loss=0.2, bandwidth_mbit=1000.0, queue_packets=100_000)
    for i in range(5000):
        emu.accept(0, packet("10.0.0.2"), now=i * 10_000)
    assert 800 < emu.counters.lost < 1200  # 1000 expected, 6 sigma is about 170


def test_shared_medium_makes_both_directions_take_turns(pipes: list[tuple[int, int]]) -> None:
    """One channel for all: a reply waits for the request still on the air (half duplex)."""
    emu = emulator(pipes, shared_medium=True, delay_ms=0.0)
    emu.accept(0, packet("10.0.0.2"), now=0)
    emu.accept(1, packet("10.0.0.1"), now=0)
    releases = sorted(p[0] for p in emu.pending)
    # 100 B at 8 Mbit/s = 100 µs on the one channel: the second waits for the first
    assert releases == [100_000, 200_000]
    separate = emulator(pipes, delay_ms=0.0)
    separate.accept(0, packet("10.0.0.2"), now=0)
    separate.accept(1, packet("10.0.0.1"), now=0)
    # Full duplex star: each crosses its own uplink and downlink, 2 x 100 µs, in parallel
    assert sorted(p[0] for p in separate.pending) == [200_000, 200_000]
