"""TCPROS and the ROS 1 master's XML-RPC, in the standard library: what the watchdog's topic
tap and the durable relay (runtime/rosrelay.py) need to speak to ROS 1 nodes without rospy.

A TCPROS connection starts with a header (a length-prefixed list of length-prefixed
`key=value` fields) from each side, then carries length-prefixed messages. Everything read
from a connection is outside data: sizes are bounded, a malformed header is a ValueError.
"""

from __future__ import annotations

import http.client
import struct
import xmlrpc.client
from typing import Any

RPC_TIMEOUT_S = 2.0
MAX_HEADER = 1 << 16  # a TCPROS connection header larger than this is refused
MAX_FRAME = 1 << 26  # a message larger than this (64 MiB) is refused when kept
BAD_ANSWER = (OSError, xmlrpc.client.Error, ValueError, TypeError, LookupError)
_SIZE = struct.Struct("<I")


class _Transport(xmlrpc.client.Transport):
    """XML-RPC with a timeout: a hung node or master must not hang its caller."""

    def make_connection(self, host: Any) -> http.client.HTTPConnection:
        conn = super().make_connection(host)
        conn.timeout = RPC_TIMEOUT_S
        return conn


def proxy(uri: str) -> Any:
    """An XML-RPC proxy to a master or node whose calls time out after RPC_TIMEOUT_S."""
    return xmlrpc.client.ServerProxy(uri, transport=_Transport())


def encode_header(fields: dict[str, str]) -> bytes:
    body = b"".join(
        _SIZE.pack(len(f)) + f for f in (f"{k}={v}".encode() for k, v in fields.items())
    )
    return _SIZE.pack(len(body)) + body


def parse_header(body: bytes) -> dict[str, str]:
    """The fields of a connection header's body (without its own length prefix)."""
    fields: dict[str, str] = {}
    at = 0
    while at < len(body):
        if at + 4 > len(body):
            raise ValueError("TCPROS header field cut short")
        (size,) = _SIZE.unpack_from(body, at)
        field = body[at + 4 : at + 4 + size]
        if len(field) != size or b"=" not in field:
            raise ValueError("malformed TCPROS header field")
        key, _, value = field.decode("utf-8", "replace").partition("=")
        fields[key] = value
        at += 4 + size
    return fields


class FrameReader:
    """One connection's bytes in, its header and its messages out.

    The buffer is a bytearray consumed once per `feed` (appending to a `bytes` and slicing
    it per frame copied the rest of the buffer for every frame: quadratic). With
    `keep=False` message bodies are skipped as they arrive, never buffered: counting a
    topic holds no more than a 4-byte prefix, whatever the messages' size.
    """

    def __init__(self, keep: bool = True) -> None:
        self.keep = keep
        self.header: dict[str, str] | None = None
        self._buf = bytearray()
        self._skip = 0  # bytes of a skipped message still to come

    def feed(self, data: bytes) -> list[bytes]:
        """The messages completed by `data` (empty bodies when not kept); ValueError on a
        header or message over its bound."""
        frames: list[bytes] = []
        view = memoryview(data)
        if self._skip:
            taken = min(self._skip, len(view))
            self._skip -= taken
            view = view[taken:]
        self._buf += view
        buf, at = self._buf, 0
        while len(buf) - at >= 4:
            (size,) = _SIZE.unpack_from(buf, at)
            if self.header is None:
                if size > MAX_HEADER:
                    raise ValueError("TCPROS header too large")
                if len(buf) - at - 4 < size:
                    break
                self.header = parse_header(bytes(buf[at + 4 : at + 4 + size]))
            elif not self.keep:
                frames.append(b"")
                available = min(size, len(buf) - at - 4)
                if available < size:
                    self._skip = size - available
                at += 4 + available
                continue
            else:
                if size > MAX_FRAME:
                    raise ValueError(f"a message of {size} bytes, over {MAX_FRAME}")
                if len(buf) - at - 4 < size:
                    break
                frames.append(bytes(buf[at + 4 : at + 4 + size]))
            at += 4 + size
        del buf[:at]
        return frames


def frame(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body
