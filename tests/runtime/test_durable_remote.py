"""Cross-process durable topics with real processes: a subscriber SIGKILLed again and again."""

from __future__ import annotations

import os
import random
import select
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from roboscale.backends.base import free_port

PROGRAMS = Path(__file__).parent / "programs"
KILLS = 20


def spawn(program: str, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(PROGRAMS / program), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def wait_ready(proc: subprocess.Popen[bytes], timeout_s: float = 15.0) -> None:
    """Read the 'ready' line; fail with the program's stderr if it does not come."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout_s
    seen = b""
    while b"ready" not in seen:
        left = deadline - time.monotonic()
        readable, _, _ = select.select([fd], [], [], max(0.0, min(left, 0.1)))
        chunk = os.read(fd, 4096) if readable else b""
        seen += chunk
        if (readable and not chunk) or left <= 0:
            proc.kill()
            _, err = proc.communicate(timeout=5)
            raise AssertionError(f"not ready (exit {proc.returncode}): {err[-2000:]!r}")


def handed_over(cursor: Path) -> list[tuple[int, int]]:
    data = cursor.read_bytes() if cursor.exists() else b""
    return list(struct.iter_unpack("<QQ", data))


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@pytest.mark.zenoh
def test_subscriber_killed_20_times_loses_and_duplicates_nothing(
    tmp_path: Path, zenoh: None
) -> None:
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    stop_file, count_file, cursor = tmp_path / "stop", tmp_path / "count", tmp_path / "cursor"
    publisher = spawn("bridge_pub.py", endpoint, str(stop_file), str(count_file))
    subscriber: subprocess.Popen[bytes] | None = None
    rng = random.Random(5)
    try:
        wait_ready(publisher)
        for _ in range(KILLS):
            subscriber = spawn("bridge_sub.py", endpoint, str(cursor))
            wait_ready(subscriber)
            time.sleep(rng.uniform(0.0, 0.15))
            subscriber.kill()  # SIGKILL: no cleanup, no goodbye
            subscriber.wait(timeout=10)
        subscriber = spawn("bridge_sub.py", endpoint, str(cursor))
        wait_ready(subscriber)
        stop_file.touch()
        deadline = time.monotonic() + 15.0
        while not count_file.exists() or not count_file.read_text():
            assert time.monotonic() < deadline, "the publisher did not stop"
            time.sleep(0.01)
        published = int(count_file.read_text())
        while not handed_over(cursor) or handed_over(cursor)[-1][1] < published:
            assert time.monotonic() < deadline, "the last subscriber did not catch up"
            time.sleep(0.01)
    finally:
        for proc in (subscriber, publisher):
            if proc is not None:
                stop(proc)
    records = handed_over(cursor)
    assert len({p for p, _ in records}) == 1  # one publisher
    seqs = [s for _, s in records]
    assert published > 1000  # ran at ~1 kHz for seconds
    assert seqs == list(range(1, published + 1))  # each message once, in order, none lost
