"""The harness's link to a stack that runs outside its process (ROS 1, Erlang/OTP). Stdlib only.

One loopback TCP connection (127.0.0.1 only) carrying messages framed as Erlang's
`{packet, 4}` frames them: a 4-byte big-endian length, then the bytes. The same framing
runs over the pipes of the Erlang port programs. Each message starts with a tag byte:

| tag | direction | after the tag |
|---|---|---|
| `F` | harness → stack | worker u32 (big-endian), then a frame (`wire`) for that worker |
| `K` | harness → Erlang | method u8 (0 shutdown, 1 kill), role u8, index i32 |
| `S` | harness → Erlang | (ask for memory figures) |
| `Q` | harness → stack | (stop) |
| `H` | stack → harness | the stack's OS pid u32, then its name and version |
| `U` | stack → harness | `ProcessEvent`: a process started or is ready |
| `N` | stack → harness | role u8, index i32: a kill found no such process |
| `O` | stack → harness | the tracker's output: `R` + a command or `D` + a handled entry (`wire`) |
| `M` | Erlang → harness | VM memory u64, malformed u32, then (role u8, index i32, bytes u64)* |

Frames, results and commands are the pipeline's own `wire` bytes, unchanged.
"""

from __future__ import annotations

import enum
import os
import select
import socket
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from roboscale.errors import UserError

LENGTH = struct.Struct(">I")
MAX_MESSAGE = 64 * 2**20  # a 4K grey frame is 8 MB
WORKER = struct.Struct(">I")
KILL = struct.Struct(">BBi")
EVENT = struct.Struct(">BiIBqq")
MISSED = struct.Struct(">Bi")
MEMORY_HEAD = struct.Struct(">QI")
MEMORY_ROW = struct.Struct(">BiQ")


class Role(enum.IntEnum):
    """Processes of the stacks, as the `U`, `N`, `K` and `M` messages number them."""

    WORKER = 0  # a detector: Erlang face_server, ROS worker node
    AGGREGATOR = 2  # the aggregator and controller
    CAMERA = 4  # the ROS camera node
    FACE_SUPERVISOR = 5
    AGGREGATOR_SUPERVISOR = 6


class LinkClosed(UserError):
    """The stack closed the link or sent something that is not a message."""


@dataclass(frozen=True, slots=True)
class ProcessEvent:
    """A process of the stack started (`ready` False) or is ready to work (`ready` True).

    `t_ns` is the stack's clock (CLOCK_MONOTONIC for rospy nodes, Erlang's monotonic time
    for the VM); `since_kill_ns` is measured inside the stack from its predecessor's kill
    (None when the stack leaves that to the harness, or nothing was killed).
    """

    role: Role
    index: int
    os_pid: int
    ready: bool
    t_ns: int
    since_kill_ns: int | None

    def encode(self) -> bytes:
        since = -1 if self.since_kill_ns is None else self.since_kill_ns
        fields = (self.role, self.index, self.os_pid, self.ready, self.t_ns, since)
        return b"U" + EVENT.pack(*fields)

    @classmethod
    def decode(cls, body: bytes) -> ProcessEvent:
        try:
            role, index, os_pid, ready, t_ns, since = EVENT.unpack(body)
            return cls(Role(role), index, os_pid, bool(ready), t_ns, None if since < 0 else since)
        except (struct.error, ValueError) as e:
            raise ValueError(f"malformed process event: {e}") from None


def read_packet(fd: int) -> bytes | None:
    """One framed message from a file descriptor; None at end of input."""
    head = _read_exactly(fd, LENGTH.size)
    if head is None:
        return None
    (size,) = LENGTH.unpack(head)
    if size > MAX_MESSAGE:
        raise ValueError(f"message of {size} bytes is over the {MAX_MESSAGE} limit")
    body = _read_exactly(fd, size)
    if body is None:
        raise ValueError("end of input inside a message")
    return body


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            if left == size:
                return None
            raise ValueError("end of input inside a message")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def write_packet(fd: int, data: bytes) -> None:
    view = memoryview(LENGTH.pack(len(data)) + data)
    while view:
        view = view[os.write(fd, view) :]


class Link:
    """The harness's end: framed messages over one connected socket."""

    def __init__(self, sock: socket.socket, peer: str) -> None:
        self.sock = sock
        self.peer = peer
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buffer = bytearray()

    def send(self, data: bytes) -> None:
        try:
            self.sock.sendall(LENGTH.pack(len(data)) + data)
        except OSError as e:
            raise LinkClosed(f"{self.peer} closed the link: {e}") from None

    def receive(self, timeout_s: float) -> bytes | None:
        """The next message, or None when none came within `timeout_s`."""
        deadline = time.monotonic() + max(0.0, timeout_s)
        while (message := self._take()) is None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                return None
            try:
                chunk = self.sock.recv(1 << 20)
            except OSError as e:
                raise LinkClosed(f"{self.peer} closed the link: {e}") from None
            if not chunk:
                raise LinkClosed(f"{self.peer} closed the link")
            self._buffer += chunk
        return message

    def _take(self) -> bytes | None:
        if len(self._buffer) < LENGTH.size:
            return None
        (size,) = LENGTH.unpack_from(self._buffer)
        if size > MAX_MESSAGE:
            raise LinkClosed(f"{self.peer} sent a message of {size} bytes")
        if len(self._buffer) < LENGTH.size + size:
            return None
        message = bytes(self._buffer[LENGTH.size : LENGTH.size + size])
        del self._buffer[: LENGTH.size + size]
        return message

    def close(self) -> None:
        self.sock.close()


class Listener:
    """A listening socket on 127.0.0.1 and a free port, for the stack to connect to."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1)
        self.port: int = self.sock.getsockname()[1]

    def accept(self, peer: str, timeout_s: float, alive: Callable[[], bool]) -> Link:
        """The stack's connection; fails early when `alive()` says the stack died."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if select.select([self.sock], [], [], 0.1)[0]:
                conn, _ = self.sock.accept()
                return Link(conn, peer)
            if not alive():
                raise UserError(f"{peer} exited before it connected")
        raise UserError(f"{peer} did not connect within {timeout_s:g} s")

    def close(self) -> None:
        self.sock.close()
