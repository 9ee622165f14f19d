"""Shared memory between the bridges of one host, shown by the bytes on the TCP socket:
a 4 MB message crosses as a descriptor of a few bytes with shared memory on, and as its
4 MB with it off (between emulated hosts, or `shared_memory: false`). Both links (native,
zenoh-python). And the /dev/shm segments: only their user can open them, none is left
once the processes that made them are gone."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import EVENT_TIMEOUT_S, require

from roboscale.backends.base import free_port
from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor
from roboscale.runtime.zenoh_config import SHM_POOL, remove_orphaned_segments
from roboscale.runtime.zlink import NativeLink

from .conftest import wait_until

SIZE = 4 * 1024 * 1024
DESCRIPTOR_BOUND = 64 * 1024  # a message by shared memory: its descriptor, frames, acks
PROGRAM = Path(__file__).parent / "programs" / "shm_pair.py"
# struct tcp_info (linux/tcp.h): tcpi_bytes_received, u64
TCP_INFO_BYTES_RECEIVED = struct.Struct("=Q")
TCP_INFO_BYTES_RECEIVED_OFFSET = 128


def socket_bytes(port: int) -> int:
    """Bytes received by both ends of this process's TCP connections to `port` (both
    bridges live in this process), from the kernel's TCP_INFO of each socket. Received,
    not sent: a message handed to its subscriber has been read whole, while the sender's
    count of acknowledged bytes may still lag."""
    inodes = set()
    for line in Path("/proc/self/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        ports = {int(end.rsplit(":", 1)[1], 16) for end in fields[1:3]}
        if port in ports and fields[3] == "01":  # established
            inodes.add(fields[9])
    total = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            if not (target.startswith("socket:[") and target[8:-1] in inodes):
                continue
            with socket.socket(fileno=os.dup(int(fd))) as sock:
                info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
        except OSError:
            continue  # closed meanwhile
        (received,) = TCP_INFO_BYTES_RECEIVED.unpack_from(info, TCP_INFO_BYTES_RECEIVED_OFFSET)
        total += received
    assert inodes, f"no TCP connection on port {port}"
    return total


def mapped_segments(pid: int | str = "self") -> set[str]:
    """The Zenoh shared memory segments (/dev/shm/*.zenoh) a process has mapped."""
    maps = Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.split()[-1] for line in maps if line.endswith(".zenoh")}


def pools() -> set[str]:
    """The transport's pools mapped in this process (by their sender and receiver); a
    segment whose file is already gone (unlinked while still mapped) is no pool to use."""
    found = set()
    for path in mapped_segments():
        with contextlib.suppress(FileNotFoundError):
            if os.stat(path).st_size >= SHM_POOL:
                found.add(path)
    return found


class Sizes(Node):
    def on_start(self) -> None:
        got: list[int] = self.params["got"]
        self.subscribe("/big", lambda msg: got.append(len(msg)))


Linked = tuple[Runtime, int, list[int], Bridge]


@pytest.fixture
def linked(zenoh: None, bridge_path: str, request: pytest.FixtureRequest) -> Iterator[Linked]:
    """Runtime a exports /big (listening), b imports it; shared memory on both as
    `request.param`. Yields a, the listening port, b's received sizes and b's bridge,
    once joined."""
    a, b = Runtime().start(), Runtime().start()
    port, got = free_port(), []
    try:
        sup = Supervisor(b, "s", [ChildSpec(NodeRecipe("sizes", Sizes, {"got": got}))])
        b.wait(sup.start_async())
        endpoint, shm = f"tcp/127.0.0.1:{port}", request.param
        out = {"listen": [endpoint], "export": ["/big"], "shared_memory": shm}
        into = {"connect": [endpoint], "import": ["/big"], "shared_memory": shm}
        with Bridge(a, bridge_config(out)), Bridge(b, bridge_config(into)) as receiver:
            wait_until(lambda: probe(a, got))
            yield a, port, got, receiver
    finally:
        a.close()
        b.close()


def probe(a: Runtime, got: list[int]) -> bool:
    """Publish a small message: true once one came through (the link is up)."""
    a.call(lambda: a.bus.topic("/big").publish(b"hi"))
    return bool(got)


def cross(a: Runtime, port: int, got: list[int]) -> int:
    """Publish one SIZE message, wait for it: the bytes its crossing put on the socket."""
    before, n = socket_bytes(port), len(got)
    a.call(lambda: a.bus.topic("/big").publish(bytes(SIZE)))
    wait_until(lambda: SIZE in got[n:])
    return socket_bytes(port) - before


@pytest.mark.zenoh
@pytest.mark.parametrize("linked", [True], indirect=True, ids=["shm"])
def test_with_shared_memory_a_4_mb_message_crosses_as_a_descriptor(linked: Linked) -> None:
    a, port, got, receiver = linked
    # The sending session makes its pool on its first large message, in Zenoh's own
    # thread; what is sent before it is handed over goes over TCP. A mapped pool is no sign
    # of that (this session's is mapped before it is handed over, and an earlier session's
    # of this process may still be mapped): a message that crossed as a descriptor is.
    wait_until(lambda: cross(a, port, got) < DESCRIPTOR_BOUND)
    crossed = [cross(a, port, got) for _ in range(3)]
    assert max(crossed) < DESCRIPTOR_BOUND, f"bytes on the socket per message: {crossed}"
    if isinstance(receiver.link, NativeLink):  # and the receiver read them in place
        assert receiver.link.inbox.shm_received() >= 2


@pytest.mark.zenoh
@pytest.mark.parametrize("linked", [False], indirect=True, ids=["no-shm"])
def test_without_shared_memory_a_4_mb_message_crosses_as_its_bytes(linked: Linked) -> None:
    a, port, got, receiver = linked
    before = pools()
    crossed = [cross(a, port, got) for _ in range(3)]
    assert min(crossed) >= SIZE, f"bytes on the socket per message: {crossed}"
    assert pools() <= before, "shared memory off, yet a pool was made"
    if isinstance(receiver.link, NativeLink):
        assert receiver.link.inbox.shm_received() == 0


@pytest.mark.zenoh
def test_segments_only_their_user_opens(zenoh: None, bridge_path: str) -> None:
    require(os.geteuid() == 0, "opening a segment as another user needs root to switch")
    proc, segments = start_pair()
    try:
        for segment in segments:
            mode = os.stat(segment)
            assert mode.st_mode & 0o777 == 0o600 and mode.st_uid == os.getuid(), segment
            # The attack: another local user maps a segment to read (or write) messages.
            assert not can_open(segment, as_user=65534), f"nobody opened {segment}"
            assert can_open(segment, as_user=None), segment  # the check itself works
    finally:
        end(proc)
        remove_orphaned_segments()


@pytest.mark.zenoh
def test_no_segment_outlives_the_processes_that_made_it(zenoh: None, bridge_path: str) -> None:
    proc, segments = start_pair()
    end(proc)
    # Zenoh removes the pools at exit; its metadata and 12 KB segments stay, unheld
    # (measured), and go with the next process's first use of shared memory or a sweep.
    assert not [s for s in segments if os.path.exists(s) and os.stat(s).st_size >= SHM_POOL]
    remove_orphaned_segments()
    assert not [s for s in segments if os.path.exists(s)]
    killed, segments = start_pair()
    killed.kill()  # SIGKILL: no exit handler runs, every segment stays
    killed.wait()
    proc, _ = start_pair()  # Zenoh removes unheld segments when it first makes one
    try:
        left = [s for s in segments if os.path.exists(s)]
        assert not left, f"a killed process's segments were not removed: {left}"
    finally:
        end(proc)
        remove_orphaned_segments()


def end(proc: subprocess.Popen[str]) -> None:
    """Let PROGRAM close its bridges and exit (killed if it does not)."""
    try:
        assert proc.stdin is not None
        proc.stdin.write("close\n")
        proc.stdin.flush()
        assert proc.wait(EVENT_TIMEOUT_S) == 0
    finally:
        proc.kill()
        proc.wait()


def start_pair() -> tuple[subprocess.Popen[str], list[str]]:
    """PROGRAM, once its pool is mapped; with the segments it maps."""
    proc = subprocess.Popen(
        [sys.executable, str(PROGRAM), f"tcp/127.0.0.1:{free_port()}", str(SIZE)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    report: dict[str, Any] = json.loads(proc.stdout.readline() or "{}")
    segments: list[str] = report.get("segments", [])
    if not any(os.stat(s).st_size >= SHM_POOL for s in segments):
        proc.kill()
        proc.wait()
        raise AssertionError(f"no shared memory pool mapped: {report}")
    return proc, segments


def can_open(path: str, as_user: int | None) -> bool:
    """Whether `as_user` (None: this process's user) can open `path` for reading."""
    opened = subprocess.run(
        ["/bin/sh", "-c", 'exec 3<"$1"', "sh", path],
        user=as_user,
        cwd="/",
        capture_output=True,
        check=False,
    )
    return opened.returncode == 0


EVENTS_PROGRAM = """
import sys
from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime
rt, kinds = Runtime().start(), []
rt.subscribers.append(lambda event: kinds.append(event.kind))
config = {"listen": [sys.argv[1]], "shared_memory": sys.argv[2] == "on"}
Bridge(rt, bridge_config(config)).open().close()
rt.close()
print(" ".join(kinds))
"""


@pytest.mark.zenoh
@pytest.mark.parametrize("shared_memory", ["on", "off"])
def test_a_bridge_that_cannot_lock_its_pool_says_so(
    zenoh: None, bridge_path: str, shared_memory: str
) -> None:
    require(os.geteuid() == 0, "dropping CAP_IPC_LOCK for a child needs root's setpriv")
    limited = ["prlimit", "--memlock=8388608:8388608", "setpriv", "--bounding-set=-ipc_lock"]
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    program = [sys.executable, "-c", EVENTS_PROGRAM, endpoint, shared_memory]
    ran = subprocess.run([*limited, *program], capture_output=True, text=True, check=True)
    assert ("shared_memory_blocked" in ran.stdout.split()) == (shared_memory == "on"), ran
