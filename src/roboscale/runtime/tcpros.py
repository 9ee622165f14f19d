"""TCPROS and the ROS 1 master's XML-RPC, in the standard library: what the watchdog's topic
tap and the durable relay (runtime/rosrelay.py) need to speak to ROS 1 nodes without rospy.

A TCPROS connection starts with a header (a length-prefixed list of length-prefixed
`key=value` fields) from each side, then carries length-prefixed messages. Everything read
from a connection is outside data: sizes are bounded, a malformed header is a ValueError.
"""

from __future__ import annotations

import contextlib
import http.client
import queue
import selectors
import socket
import struct
import threading
import xmlrpc.client
from typing import Any

RPC_TIMEOUT_S = 2.0
MAX_HEADER = 1 << 16  # a TCPROS connection header larger than this is refused
MAX_FRAME = 1 << 26  # a message larger than this (64 MiB) is refused when kept
DISCOVER_S = 0.5  # how often the master is asked for a topic's publishers
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


class TopicSubscriber:
    """A TCPROS subscriber of one topic that registers no node: `poll` reads, `received`
    (overridden) gets each connection's messages; `keep=False` skips their bodies.

    The master is asked on a thread of its own (`_discover_loop`, joined by
    `close`): a slow or hung master (each call bounded by RPC_TIMEOUT_S) delays only the
    discovery of new publishers, never `poll`, so a watchdog's clock and the stamps of
    the messages it counts stay on time.
    """

    def __init__(self, master_uri: str, topic: str, caller: str, keep: bool = True) -> None:
        self.master_uri = master_uri
        self.topic = topic
        self.caller = caller
        self.keep = keep
        self.sel = selectors.DefaultSelector()
        self.conns: dict[str, tuple[socket.socket, FrameReader]] = {}  # publisher URI -> conn
        self._found: queue.SimpleQueue[tuple[str, socket.socket]] = queue.SimpleQueue()
        self._known: set[str] = set()  # URIs connected or being handed over (under _lock)
        self.discoveries = 0  # rounds of asking the master, done or failed
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._thread = threading.Thread(
            target=self._discover_loop, name=f"tap {topic}", daemon=True
        )
        self._thread.start()

    def poll(self, timeout_s: float) -> None:
        while True:
            try:
                uri, sock = self._found.get_nowait()
            except queue.Empty:
                break
            self.conns[uri] = (sock, FrameReader(self.keep))
            self.sel.register(sock, selectors.EVENT_READ, uri)
        if not self.sel.get_map():
            self._closed.wait(timeout_s)
            return
        for key, _ in self.sel.select(timeout_s):
            if self.dispatch(key):
                continue
            uri = key.data
            if uri not in self.conns:  # dropped earlier in this round
                continue
            sock, reader = self.conns[uri]
            try:
                data = sock.recv(1 << 16)
                frames = reader.feed(data) if data else None
            except (OSError, ValueError):
                frames = None
            if frames is None:
                self._drop(uri)
                continue
            if frames:
                self.received(uri, reader, frames)

    def received(self, uri: str, reader: FrameReader, frames: list[bytes]) -> None:
        """The messages just read from the publisher at `uri` (its header in `reader`)."""

    def dispatch(self, key: selectors.SelectorKey) -> bool:
        """A subclass's own socket in the selector: handle it and say True."""
        return False

    def _discover_loop(self) -> None:
        while not self._closed.is_set():
            # The graph's answers are outside data: a malformed one skips that publisher
            # (a struct for a list is a LookupError), never ends the tap.
            with contextlib.suppress(*BAD_ANSWER):
                self._discover()
            with self._lock:
                self.discoveries += 1
            self._closed.wait(DISCOVER_S)

    def _discover(self) -> None:
        _, _, (publishers, _, _) = proxy(self.master_uri).getSystemState(self.caller)
        nodes: list[str] = next((n for t, n in publishers if t == self.topic), [])
        for node in nodes:
            with contextlib.suppress(*BAD_ANSWER):
                self._connect(node)

    def _connect(self, node: str) -> None:
        """A connection to one publisher of the topic, unless it has one."""
        code, _, uri = proxy(self.master_uri).lookupNode(self.caller, node)
        with self._lock:
            if code != 1 or uri in self._known:
                return
        code, _, proto = proxy(uri).requestTopic(self.caller, self.topic, [["TCPROS"]])
        if code != 1 or len(proto) < 3 or proto[0] != "TCPROS":
            return
        sock = socket.create_connection((proto[1], int(proto[2])), timeout=RPC_TIMEOUT_S)
        try:
            sock.sendall(self._header())
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        with self._lock:
            if self._closed.is_set():
                sock.close()
                return
            self._known.add(uri)
        self._found.put((uri, sock))

    def _drop(self, uri: str) -> None:
        sock, _ = self.conns.pop(uri)
        self.sel.unregister(sock)
        sock.close()
        with self._lock:
            self._known.discard(uri)

    def close(self) -> None:
        with self._lock:
            self._closed.set()
        self._thread.join()
        for uri in list(self.conns):
            self._drop(uri)
        while True:
            try:
                _, sock = self._found.get_nowait()
            except queue.Empty:
                break
            sock.close()
        self.sel.close()

    def _header(self) -> bytes:
        md5 = "*"  # any type, as rostopic hz: the publisher's answer names it
        fields = {"callerid": self.caller, "topic": self.topic, "md5sum": md5, "type": "*"}
        return encode_header({**fields, "tcp_nodelay": "1"})
