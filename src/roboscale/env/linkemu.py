"""Userspace link emulator: a switch over TUN devices that adds delay, jitter, loss
and a bandwidth limit, because this kernel has no netem.

One process serves one host set. It opens one TUN device inside each host's
namespace (entering it with setns), so every IPv4 packet a host sends to the
subnet arrives here. For each packet it finds the destination host, passes it
through the bandwidth-limited queues of the path (star: the sender's uplink,
then the receiver's downlink; mesh: the pair's own link; a shared medium: the
one channel all hosts take turns on, as a Wi-Fi cell), drops it with
probability `loss` (after it used the link, as a radio loses a frame it sent),
holds it for delay ± jitter, and writes it into the destination's TUN device.
Release times sit in a heap; unless `reorder` is set, a packet never overtakes
an earlier one of the same pair. It stops on SIGTERM/SIGINT or when its parent
dies, and writes its counters as JSON.

    python -m roboscale.env.linkemu CONFIG.json     (prints READY when the TUNs exist)
"""

from __future__ import annotations

import ctypes
import fcntl
import heapq
import json
import os
import random
import select
import signal
import struct
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from roboscale.jsonfields import Fields
from roboscale.safewrite import write_text

TUNSETIFF = 0x400454CA
IFF_TUN = 0x0001
IFF_NO_PI = 0x1000
CLONE_NEWNET = 0x40000000
PR_SET_TIMERSLACK = 29
READ_BATCH = 64
PARENT_CHECK_S = 0.5


@dataclass
class Link:
    """One direction of a bandwidth-limited link with a tail-drop queue."""

    bits_per_ns: float
    queue_packets: int
    busy_until: int = 0
    in_flight: deque[int] = field(default_factory=deque)

    def transmit(self, arrival_ns: int, size: int) -> int | None:
        """When the packet has left this link, or None if the queue is full."""
        while self.in_flight and self.in_flight[0] <= arrival_ns:
            self.in_flight.popleft()
        if len(self.in_flight) >= self.queue_packets:
            return None
        start = max(arrival_ns, self.busy_until)
        self.busy_until = start + int(size * 8 / self.bits_per_ns)
        self.in_flight.append(self.busy_until)
        return self.busy_until


@dataclass
class Counters:
    received: int = 0
    forwarded: int = 0
    lost: int = 0
    queue_dropped: int = 0
    unroutable: int = 0
    write_failed: int = 0


class Emulator:
    def __init__(self, config: object, fds: list[int]) -> None:
        """`config` as hosts.py writes it (JSON), each field checked."""
        f = Fields(config, "link emulator config")
        profile = f.nested("profile")
        self.fds = fds
        self.by_address = {
            bytes(int(x) for x in h.text("address").split(".")): i
            for i, h in enumerate(f.nested_list("hosts"))
        }
        self.delay_ns = int(profile.number("delay_ms") * 1e6)
        self.jitter_ns = int(profile.number("jitter_ms") * 1e6)
        self.loss = profile.number("loss")
        self.reorder = profile.flag("reorder")
        self.mesh = f.text("topology") == "mesh"
        self.shared = profile.flag("shared_medium", False)
        self.rng = random.Random(f.whole("seed", 0))
        self.bits_per_ns = profile.number("bandwidth_mbit") * 1e6 / 1e9
        self.queue_packets = profile.whole("queue_packets")
        self.links: dict[tuple[str, int, int], Link] = {}
        self.last_release: dict[tuple[int, int], int] = {}
        self.pending: list[tuple[int, int, int, bytes]] = []
        self.seq = 0
        self.counters = Counters()

    def _link(self, key: tuple[str, int, int]) -> Link:
        link = self.links.get(key)
        if link is None:
            link = self.links[key] = Link(self.bits_per_ns, self.queue_packets)
        return link

    def _path_done(self, src: int, dst: int, now: int, size: int) -> int | None:
        if self.shared:  # one channel on the air for every host and direction
            return self._link(("air", 0, 0)).transmit(now, size)
        if self.mesh:
            return self._link(("pair", src, dst)).transmit(now, size)
        up = self._link(("up", src, 0)).transmit(now, size)
        return None if up is None else self._link(("down", dst, 0)).transmit(up, size)

    def accept(self, src: int, packet: bytes, now: int) -> None:
        """Route one packet from host src into the release heap (or drop it)."""
        self.counters.received += 1
        dst = self.by_address.get(packet[16:20]) if packet[0] >> 4 == 4 else None
        if dst is None or dst == src:
            self.counters.unroutable += 1
            return
        done = self._path_done(src, dst, now, len(packet))
        if done is None:
            self.counters.queue_dropped += 1
            return
        if self.loss and self.rng.random() < self.loss:
            self.counters.lost += 1
            return
        jitter = self.rng.randint(-self.jitter_ns, self.jitter_ns) if self.jitter_ns else 0
        release = done + max(0, self.delay_ns + jitter)
        if not self.reorder:
            release = max(release, self.last_release.get((src, dst), 0))
            self.last_release[(src, dst)] = release
        self.seq += 1
        heapq.heappush(self.pending, (release, self.seq, dst, packet))

    def release_due(self, now: int) -> None:
        while self.pending and self.pending[0][0] <= now:
            _, _, dst, packet = heapq.heappop(self.pending)
            try:
                os.write(self.fds[dst], packet)
                self.counters.forwarded += 1
            except (BlockingIOError, OSError):
                self.counters.write_failed += 1

    def read_ready(self, ready: list[int], index: dict[int, int]) -> None:
        for fd in ready:
            src = index[fd]
            for _ in range(READ_BATCH):
                try:
                    packet = os.read(fd, 65536)
                except BlockingIOError:
                    break
                self.accept(src, packet, time.monotonic_ns())

    def run(self, parent: int, stop: list[bool]) -> None:
        index = {fd: i for i, fd in enumerate(self.fds)}
        next_parent_check = time.monotonic() + PARENT_CHECK_S
        while not stop[0]:
            now = time.monotonic_ns()
            self.release_due(now)
            wait = PARENT_CHECK_S
            if self.pending:
                wait = min(wait, max(0.0, (self.pending[0][0] - now) / 1e9))
            ready, _, _ = select.select(self.fds, [], [], wait)
            self.read_ready(ready, index)
            if time.monotonic() > next_parent_check:
                next_parent_check = time.monotonic() + PARENT_CHECK_S
                if os.getppid() != parent:
                    return


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def enter_netns(libc: ctypes.CDLL, path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


def open_tun(libc: ctypes.CDLL, netns: str, name: str) -> int:
    """Create TUN device `name` inside /run/netns/<netns>; return its fd."""
    enter_netns(libc, f"/run/netns/{netns}")
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    return fd


def main(argv: list[str]) -> int:
    config = json.loads(Path(argv[0]).read_text())
    parent = os.getppid()
    libc = _libc()
    # Release times are µs-precise; the default 50 µs timer slack would blur them.
    libc.prctl(PR_SET_TIMERSLACK, 1, 0, 0, 0)
    home = os.open("/proc/self/ns/net", os.O_RDONLY)
    fds = [open_tun(libc, h["netns"], config["tun"]) for h in config["hosts"]]
    if libc.setns(home, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns back to the emulator's namespace")
    os.close(home)
    stop = [False]

    def on_signal(signum: int, frame: object) -> None:
        stop[0] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    emulator = Emulator(config, fds)
    print("READY", flush=True)
    try:
        emulator.run(parent, stop)
    finally:
        stats = config.get("stats")
        if stats:
            write_text(Path(stats), json.dumps(emulator.counters.__dict__))
        for fd in fds:
            os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
