"""The cursor file of a ROS 1 subscriber behind a durable relay (runtime/rosrelay.py).

The one reader and writer of that file. Standard library only, no roboscale import, so
that a rospy node (the system's Python, without roboscale) can use it: copy this file
beside the node's script and, in its callback, after handling a message:

    cursor = Cursor("/var/lib/robot/listener.cursor")   # once
    cursor.handled(msg)                                  # after each message's work

The file is 16 bytes, mapped shared: the relay's epoch (a random id per relay instance)
and the relay's sequence number of the last message handled, both unsigned 64-bit
little-endian. The relay numbers a connection's messages from `durable_first`, a field of
its TCPROS connection header (rospy gives every message its connection header), so the
node needs no change to its message types. A commit is two stores into the mapping, no
system call; the page cache keeps them when the node is killed (not across a power cut).
Committing after the work means a kill between the two hands that one message over
again to the next instance: at least once, never lost.
"""

from __future__ import annotations

import mmap
import os
import struct

_CURSOR = struct.Struct("<QQ")  # epoch, seq
SIZE = _CURSOR.size
_SEQ = struct.Struct("<Q")


def read_cursor(path: str) -> tuple[int, int] | None:
    """(epoch, seq) of the last message handled, or None when nothing was handled yet."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as f:
        data = f.read(SIZE + 1)
    if len(data) != SIZE:
        raise ValueError(f"{path}: {len(data)} bytes is not a cursor of {SIZE} bytes")
    epoch, seq = _CURSOR.unpack(data)
    return (epoch, seq) if epoch else None


class Cursor:
    """The subscriber's side: commits what it handled, per the relay's numbering."""

    def __init__(self, path: str) -> None:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)  # no link followed
        try:
            if os.fstat(fd).st_size != SIZE:
                os.ftruncate(fd, 0)
                os.ftruncate(fd, SIZE)
            self._map = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
        # The next seq of each connection: after a reconnection, messages of the old one may
        # still be in rospy's queue, interleaved with the new one's (the last few kept).
        self._next: dict[tuple[str, str, str], int] = {}
        self._epoch = _CURSOR.unpack_from(self._map)[0]

    def handled(self, msg: object) -> None:
        """`msg` was handled: commit its relay sequence number. A message that did not come
        through a relay (no durable fields in its connection header) is left alone."""
        header = getattr(msg, "_connection_header", None) or {}
        epoch, first = header.get("durable_epoch"), header.get("durable_first")
        if epoch is None or first is None:
            return
        connection = (str(header.get("callerid")), str(epoch), str(first))
        seq = self._next.pop(connection, None)
        if seq is None:  # a new connection numbers from its first
            seq = int(first)
            while len(self._next) >= 8:
                del self._next[next(iter(self._next))]
        self._next[connection] = seq + 1
        self.commit(int(epoch), seq)

    def commit(self, epoch: int, seq: int) -> None:
        if epoch != self._epoch:
            # Emptied first: a kill between the stores never pairs an epoch with a seq of
            # another relay instance.
            _SEQ.pack_into(self._map, 0, 0)
            _SEQ.pack_into(self._map, 8, seq)
            _SEQ.pack_into(self._map, 0, epoch)
            self._epoch = epoch
            return
        _SEQ.pack_into(self._map, 8, seq)  # one aligned store

    def close(self) -> None:
        if not self._map.closed:
            self._map.close()
