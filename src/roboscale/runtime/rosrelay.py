"""A durable relay in front of one ROS 1 subscriber: what it missed while dead, replayed.

A ROS 1 subscriber that is killed and respawned misses everything published while it was
down. The relay sits between the publisher and that subscriber:

    talker --/seq--> relay (retains the last N) --/seq_durable--> listener (+ cursor file)

- In: a TCPROS subscriber of `--topic` (runtime/tcpros.py, no node registered); each
  message gets the relay's sequence number (1, 2, ...) and goes into a `Retention`
  (runtime/durable.py), the runtime's durable store.
- Out: a TCPROS publisher of `--to`, registered with the master once the input's type is
  known (from its publisher's connection header). Each subscriber connection's header
  carries `durable_epoch` (this relay instance) and `durable_first` (the relay sequence
  number of the connection's first message); messages follow in order.
- Cursor: the subscriber commits what it handled into its cursor file
  (runtime/roscursor.py, which a rospy node imports). When a subscriber connects, the relay
  reads that file and first sends what it retained after it: what the last instance did
  not handle, then live messages. No file, or another relay's epoch: a first start, from
  the oldest message retained (as durable topics do).

- Durable runtime topic (`--durable TOPIC`, runtime/rosdurable.py): the relay also
  mirrors what it takes in into a durable topic of the runtime, over Zenoh (`--listen` or
  `--connect`): retained, numbered and replayed from each importer's cursor, so that a
  runtime node, or a relay on another host, resumes where it stopped. With `--durable`,
  `--to` and `--cursor` are optional: the relay is then a bridge from ROS 1 only.

Messages are bytes end to end (never decoded). What it does not do: survive its own
restart (the retention is in memory, as a durable publisher's), serve more than one
durable subscriber well (one cursor file), or slow the publisher down: a subscriber down
longer than the retention holds loses the oldest messages, counted as `gaps`.

    python -m roboscale.runtime.rosrelay --topic /seq --to /seq_durable \\
        --cursor listener.cursor [--retain 10000]      (ROS_MASTER_URI from the env)
    python -m roboscale.runtime.rosrelay --topic /seq --durable /seq \\
        --listen tcp/127.0.0.1:7447                   (a durable runtime topic)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import selectors
import signal
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xmlrpc.server import SimpleXMLRPCServer

from roboscale.runtime.durable import Retention
from roboscale.runtime.roscursor import read_cursor
from roboscale.runtime.tcpros import (
    BAD_ANSWER,
    RPC_TIMEOUT_S,
    FrameReader,
    TopicSubscriber,
    encode_header,
    frame,
    proxy,
)

POLL_S = 0.05


@dataclass
class Stats:
    relayed: int = 0  # messages in
    replayed: int = 0  # messages sent again from the retention to a new connection
    gaps: int = 0  # messages a subscriber's cursor wanted that the retention had dropped
    connections: int = 0


@dataclass
class _Out:
    sock: socket.socket
    reader: FrameReader = field(default_factory=lambda: FrameReader(keep=False))
    ready: bool = False  # header answered: messages go to it


class Relay(TopicSubscriber):
    """The relay's state and loop; `run` until `stop` is set, then `close`."""

    def __init__(
        self,
        master_uri: str,
        topic: str,
        out: str | None,
        cursor: Path | None,
        retain: int,
        name: str,
        mirror: Callable[[bytes], None] | None = None,
    ) -> None:
        super().__init__(master_uri, topic, name, keep=True)
        self.out_topic = out  # None: no ROS subscriber behind it (a mirror only)
        self.cursor = cursor
        self.mirror = mirror  # each message in, also to a durable runtime topic
        self.retention = Retention(retain)
        self.seq = 0
        self.epoch = random.getrandbits(63) or 1
        self.stats = Stats()
        self.input_header: dict[str, str] | None = None
        self.registered = False
        # Subscriber connections by a number never reused: an event of one closed earlier
        # in the same select round (its fd perhaps already another's) finds nothing.
        self.outs: dict[int, _Out] = {}
        self._next_out = 0
        self.server = socket.create_server(("127.0.0.1", 0))
        self.server.setblocking(False)
        self.sel.register(self.server, selectors.EVENT_READ, "accept")
        self.rpc = SimpleXMLRPCServer(("127.0.0.1", 0), logRequests=False, allow_none=True)
        self.rpc.register_function(self._request_topic, "requestTopic")
        self.rpc.register_function(lambda caller: [1, "", os.getpid()], "getPid")
        self.rpc_uri = f"http://127.0.0.1:{self.rpc.server_address[1]}/"
        self._rpc_thread = threading.Thread(
            target=self.rpc.serve_forever, name="relay xmlrpc", daemon=True
        )
        self._rpc_thread.start()

    def _request_topic(self, caller: object, topic: object, protocols: object) -> list[Any]:
        if topic != self.out_topic:
            return [-1, f"not a publisher of {topic}", []]
        return [1, "ready", ["TCPROS", "127.0.0.1", self.server.getsockname()[1]]]

    # -- in ------------------------------------------------------------------------------------
    def received(self, uri: str, reader: FrameReader, frames: list[bytes]) -> None:
        if self.input_header is None:
            self.input_header = reader.header
            if self.out_topic is not None:
                self._register()
        for body in frames:
            self.seq += 1
            self.stats.relayed += 1
            if self.mirror is not None:
                self.mirror(body)
            self.retention.add(self.seq, body, b"")
            data = frame(body)
            for conn, out in list(self.outs.items()):
                if out.ready:
                    self._send(conn, data)

    def _register(self) -> None:
        kind = (self.input_header or {}).get("type", "*")
        code, message, _ = proxy(self.master_uri).registerPublisher(
            self.caller, self.out_topic, kind, self.rpc_uri
        )
        if code != 1:
            raise RuntimeError(f"the master refused {self.out_topic}: {message}")
        self.registered = True

    # -- out -----------------------------------------------------------------------------------
    def dispatch(self, key: selectors.SelectorKey) -> bool:
        """Handle the relay's own sockets; False for an input connection."""
        if key.data == "accept":
            with contextlib.suppress(BlockingIOError):
                sock, _ = self.server.accept()
                sock.settimeout(RPC_TIMEOUT_S)  # a stuck subscriber is dropped, not waited on
                self._next_out += 1
                self.outs[self._next_out] = _Out(sock)
                self.sel.register(sock, selectors.EVENT_READ, ("out", self._next_out))
            return True
        if isinstance(key.data, tuple):
            self._read_out(key.data[1])
            return True
        return False

    def _read_out(self, conn: int) -> None:
        out = self.outs.get(conn)
        if out is None:  # closed earlier in this select round (a send to it failed)
            return
        try:
            data = out.sock.recv(1 << 16)
            if not data:
                raise ConnectionError("closed")
            out.reader.feed(data)
        except (OSError, ValueError):
            self._close_out(conn)
            return
        if not out.ready and out.reader.header is not None:
            self._answer(conn, out, out.reader.header)

    def _answer(self, conn: int, out: _Out, header: dict[str, str]) -> None:
        """A subscriber's header: answer it, replay from its cursor, then it gets live ones."""
        given, out_topic = self.input_header, self.out_topic
        md5 = header.get("md5sum", "")
        wrong = given is None or md5 not in ("*", given.get("md5sum"))
        if wrong or out_topic is None or header.get("topic") != out_topic:
            self._close_out(conn)
            return
        assert given is not None
        backlog = self._backlog()
        first = backlog[0][0] if backlog else self.seq + 1
        fields = {
            "callerid": self.caller, "topic": out_topic, "latching": "0",
            "type": given.get("type", "*"), "md5sum": given.get("md5sum", "*"),
            "message_definition": given.get("message_definition", ""),
            "durable_epoch": str(self.epoch), "durable_first": str(first),
        }  # fmt: skip
        self.stats.connections += 1
        if not self._send(conn, encode_header(fields)):
            return
        out.ready = True
        for _, body, _ in backlog:
            self.stats.replayed += 1
            if not self._send(conn, frame(body)):
                return

    def _backlog(self) -> list[tuple[int, bytes, bytes]]:
        """What the subscriber's cursor has not handled, as retained."""
        try:
            cursor = read_cursor(str(self.cursor)) if self.cursor is not None else None
        except (OSError, ValueError) as e:
            print(f"relay: {e}; starting that subscriber afresh", file=sys.stderr, flush=True)
            cursor = None
        after = cursor[1] if cursor is not None and cursor[0] == self.epoch else 0
        backlog = self.retention.after(min(after, self.seq))
        if cursor is not None and cursor[0] == self.epoch and backlog:
            self.stats.gaps += max(0, backlog[0][0] - after - 1)
        return backlog

    def _send(self, conn: int, data: bytes) -> bool:
        out = self.outs.get(conn)
        if out is None:
            return False
        try:
            out.sock.sendall(data)
        except OSError:
            self._close_out(conn)
            return False
        return True

    def _close_out(self, conn: int) -> None:
        out = self.outs.pop(conn, None)
        if out is not None:
            self.sel.unregister(out.sock)
            out.sock.close()

    def close(self) -> None:
        if self.registered:
            with contextlib.suppress(*BAD_ANSWER):
                proxy(self.master_uri).unregisterPublisher(
                    self.caller, self.out_topic, self.rpc_uri
                )
        self.rpc.shutdown()
        self._rpc_thread.join()
        self.rpc.server_close()
        for conn in list(self.outs):
            self._close_out(conn)
        self.sel.unregister(self.server)
        self.server.close()
        super().close()


def main(argv: list[str] | None = None) -> int:
    raw = sys.argv[1:] if argv is None else argv
    # roslaunch's and roboscale's node arguments (__name:=, __log:=, remaps) set the name
    # only; remapping the relay's topics is what --topic and --to are for.
    special = dict(a.split(":=", 1) for a in raw if ":=" in a)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--topic", required=True, help="the ROS 1 topic to relay")
    parser.add_argument("--to", help="the topic the durable subscriber reads")
    parser.add_argument("--cursor", type=Path, help="the subscriber's cursor (with --to)")
    parser.add_argument("--retain", type=int, default=10_000, help="messages kept for replay")
    parser.add_argument("--durable", metavar="TOPIC", help="also mirror into this durable "
                        "runtime topic over Zenoh (runtime/rosdurable.py)")  # fmt: skip
    parser.add_argument("--listen", action="append", default=[], metavar="ENDPOINT",
                        help="--durable: the Zenoh endpoint to listen on, e.g. "
                        "tcp/127.0.0.1:7447")  # fmt: skip
    parser.add_argument("--connect", action="append", default=[], metavar="ENDPOINT",
                        help="--durable: a Zenoh endpoint to connect to")  # fmt: skip
    args = parser.parse_args([a for a in raw if ":=" not in a])
    _check(parser, args)
    master = os.environ.get("ROS_MASTER_URI")
    if not master:
        parser.error("ROS_MASTER_URI is not set")
    namespace = os.environ.get("ROS_NAMESPACE", "/").rstrip("/")
    name = f"{namespace}/{special.get('__name', 'roboscale_relay')}"
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    mirror = None
    if args.durable:
        from roboscale.errors import UserError
        from roboscale.runtime.rosdurable import DurableMirror

        try:
            mirror = DurableMirror(args.durable, args.listen, args.connect, args.retain)
        except UserError as e:
            parser.error(str(e))
    relay = Relay(master, args.topic, args.to, args.cursor, args.retain, name, mirror)
    outs = [f"{args.to}, cursor {args.cursor}"] if args.to else []
    outs += [f"durable runtime topic {args.durable}"] if args.durable else []
    print(f"relay {name}: {args.topic} -> {' and '.join(outs)}", flush=True)
    try:
        while not stop.is_set():
            relay.poll(POLL_S)
    finally:
        relay.close()
        if mirror is not None:
            mirror.close()
        mirrored = f", mirrored={mirror.mirrored}" if mirror is not None else ""
        print(f"relay {name}: {relay.stats}{mirrored}", flush=True)
    return 0


def _check(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.to is None and args.durable is None:
        parser.error("give --to (with --cursor), --durable, or both: where messages go")
    if (args.to is None) != (args.cursor is None):
        parser.error("--to and --cursor go together: the subscriber behind it and its cursor")
    if args.to is not None and args.topic == args.to:
        parser.error(f"--to must differ from --topic ({args.to}): the relay would read itself")
    if args.retain < 1:
        parser.error(f"--retain must be at least 1, got {args.retain}")
    if args.durable is not None and not (args.listen or args.connect):
        parser.error("--durable needs --listen or --connect: where the runtime's peers are")
    if (args.listen or args.connect) and args.durable is None:
        parser.error("--listen and --connect are for --durable")


if __name__ == "__main__":
    raise SystemExit(main())
