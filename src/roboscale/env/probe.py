"""Small measurement tools run inside emulated hosts (stdlib only, bounded in time).

    python -m roboscale.env.probe udp-echo  --port P --duration S
    python -m roboscale.env.probe udp-ping  --to A --port P --count N --interval S
    python -m roboscale.env.probe tcp-sink  --port P --duration S
    python -m roboscale.env.probe tcp-bulk  --to A --port P --duration S
    python -m roboscale.env.probe udp-count --port P --duration S --idle S
    python -m roboscale.env.probe udp-burst --to A --port P --count N --rate PPS

Servers print READY once bound; every tool prints one JSON line of results.
"""

from __future__ import annotations

import argparse
import json
import select
import socket
import struct
import sys
import time

HEADER = struct.Struct("!qq")  # sequence number, send time (CLOCK_MONOTONIC ns)
CHUNK = 64 * 1024
THROUGHPUT_WARMUP_S = 0.3  # skip TCP slow start when computing the rate


def _ready() -> None:
    print("READY", flush=True)


def _emit(result: dict[str, object]) -> None:
    print(json.dumps(result), flush=True)


def udp_echo(port: int, duration: float, idle: float) -> None:
    """Echo datagrams until duration, or `idle` s after the last one."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("0.0.0.0", port))
    _ready()
    end = time.monotonic() + duration
    echoed = 0
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(min(left, idle) if echoed else left)
        try:
            data, peer = sock.recvfrom(65536)
        except TimeoutError:
            break
        sock.sendto(data, peer)
        echoed += 1
    _emit({"echoed": echoed})


def udp_ping(to: str, port: int, count: int, interval: float, size: int, wait: float) -> None:
    """Send `count` probes on absolute deadlines; collect replies until `wait` after the last.

    Between sends it blocks in select() on the socket, so a reply is stamped as soon
    as it arrives (a sleep loop would add its own granularity to every RTT)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    pad = b"\0" * max(0, size - HEADER.size)
    rtts: dict[int, int] = {}
    start = time.monotonic()
    seq = 0
    end = start + count * interval + wait
    while (now := time.monotonic()) < end:
        if seq < count and now >= start + seq * interval:
            sock.sendto(HEADER.pack(seq, time.monotonic_ns()) + pad, (to, port))
            seq += 1
            continue
        next_send = start + seq * interval if seq < count else end
        readable, _, _ = select.select([sock], [], [], max(0.0, min(next_send, end) - now))
        if readable:
            _drain_replies(sock, rtts)
    _drain_replies(sock, rtts)
    _emit({"sent": seq, "rtt_ns": [rtts[k] for k in sorted(rtts)]})


def _drain_replies(sock: socket.socket, rtts: dict[int, int]) -> None:
    while True:
        try:
            data = sock.recv(65536)
        except BlockingIOError:
            return
        seq, sent = HEADER.unpack_from(data)
        rtts.setdefault(seq, time.monotonic_ns() - sent)


def tcp_sink(port: int, duration: float) -> None:
    """Accept one connection; report bytes and time after the slow-start warm-up."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", port))
    server.listen(1)
    server.settimeout(duration)
    _ready()
    end = time.monotonic() + duration
    total = counted = 0
    first = mark = last = 0.0
    try:
        conn, _ = server.accept()
    except TimeoutError:
        _emit({"bytes": 0, "seconds": 0.0})
        return
    with conn:
        while (left := end - time.monotonic()) > 0:
            conn.settimeout(left)
            try:
                data = conn.recv(CHUNK)
            except TimeoutError:
                break
            if not data:
                break
            last = time.monotonic()
            first = first or last
            total += len(data)
            if mark:
                counted += len(data)
            elif last - first >= THROUGHPUT_WARMUP_S:
                mark = last
    _emit({"bytes": total, "counted": counted, "seconds": max(0.0, last - mark) if mark else 0.0})


def tcp_bulk(to: str, port: int, duration: float) -> None:
    sock = socket.create_connection((to, port), timeout=5)
    block = b"\0" * CHUNK
    sent = 0
    end = time.monotonic() + duration
    sock.settimeout(max(0.1, duration))
    try:
        while time.monotonic() < end:
            sent += sock.send(block)
    except (TimeoutError, OSError):
        pass
    sock.close()
    _emit({"sent": sent})


def udp_count(port: int, duration: float, idle: float) -> None:
    """Count distinct probe sequence numbers, and the byte rate after a warm-up;
    stop `idle` s after the last probe."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    sock.bind(("0.0.0.0", port))
    _ready()
    seen: set[int] = set()
    counted = 0
    first = mark = last = 0.0
    end = time.monotonic() + duration
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(min(left, idle) if seen else left)
        try:
            data = sock.recv(65536)
        except TimeoutError:
            break
        last = time.monotonic()
        first = first or last
        seen.add(HEADER.unpack_from(data)[0])
        if mark:
            counted += len(data) + 28  # IP and UDP headers: the link carries them too
        elif last - first >= THROUGHPUT_WARMUP_S:
            mark = last
    seconds = last - mark if mark else 0.0
    _emit({"received": len(seen), "counted": counted, "seconds": seconds})


def udp_burst(to: str, port: int, count: int, rate: float, size: int) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    pad = b"\0" * max(0, size - HEADER.size)
    start = time.monotonic()
    for seq in range(count):
        delay = start + seq / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        sock.sendto(HEADER.pack(seq, time.monotonic_ns()) + pad, (to, port))
    _emit({"sent": count})


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="roboscale.env.probe")
    sub = parser.add_subparsers(dest="tool", required=True)
    for name in ("udp-echo", "tcp-sink", "udp-count"):
        p = sub.add_parser(name)
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--duration", type=float, required=True)
        p.add_argument("--idle", type=float, default=0.5)
    for name in ("udp-ping", "tcp-bulk", "udp-burst"):
        p = sub.add_parser(name)
        p.add_argument("--to", required=True)
        p.add_argument("--port", type=int, required=True)
        p.add_argument("--count", type=int, default=100)
        p.add_argument("--interval", type=float, default=0.005)
        p.add_argument("--rate", type=float, default=1000.0)
        p.add_argument("--size", type=int, default=64)
        p.add_argument("--wait", type=float, default=0.5)
        p.add_argument("--duration", type=float, default=1.0)
    a = parser.parse_args(argv)
    if a.tool == "udp-echo":
        udp_echo(a.port, a.duration, a.idle)
    elif a.tool == "tcp-sink":
        tcp_sink(a.port, a.duration)
    elif a.tool == "udp-count":
        udp_count(a.port, a.duration, a.idle)
    elif a.tool == "udp-ping":
        udp_ping(a.to, a.port, a.count, a.interval, a.size, a.wait)
    elif a.tool == "tcp-bulk":
        tcp_bulk(a.to, a.port, a.duration)
    else:
        udp_burst(a.to, a.port, a.count, a.rate, a.size)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
