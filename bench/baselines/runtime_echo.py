"""The runtime's echo between two processes over the Zenoh bridge (bench/scale.py).

    runtime_echo.py echo LISTEN                 a runtime whose Echo node republishes /ping on
                                                /pong; the bridge listens on LISTEN, imports
                                                /ping and exports /pong
    runtime_echo.py ping CONNECT COUNT SIZE...  a runtime whose Pinger node, for each SIZE,
                                                probes until the path is up, sends WARMUP pings,
                                                then COUNT pings one after the other; one JSON
                                                line {"size": SIZE, "rtt_us": [...]} per size

$ROBOSCALE_ECHO_TRANSPORT (queued or lowlatency, default queued): both bridges' Zenoh
transport (`transport:` of the bridge); on lowlatency the ping skips the sizes over its
payload cap (it would refuse them at publish).

The round trip is timed on the runtime's loop (publish to the /pong callback), the
loop never hands a sample to another Python thread in between: it is what a node of
the runtime sees. The bridge's own drain thread carries samples from Zenoh to the loop.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeHandle, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor

WARMUP = 20
PROBE_S = 0.1
SETTLE_S = 0.2  # after the first probe reply, replies to earlier probes may still come
MATCH_TIMEOUT_S = 30.0
REPLY_TIMEOUT_S = 10.0
MAX_LIFETIME_S = 900.0
TRANSPORT_ENV = "ROBOSCALE_ECHO_TRANSPORT"


def transport() -> dict[str, str]:
    return {"transport": os.environ.get(TRANSPORT_ENV, "queued")}


class Echo(Node):
    def on_start(self) -> None:
        self.subscribe("/ping", self.publisher("/pong").publish)


class Pinger(Node):
    """Ping-pong on the loop: each reply sends the next ping."""

    def on_start(self) -> None:
        self.ping = self.publisher("/ping")
        self.subscribe("/pong", self._pong)
        self.mode = "idle"

    def begin(self, size: int, count: int, done: threading.Event) -> None:
        self.payload, self.count, self.done = bytes(size), count, done
        self.samples: list[float] = []
        self.i = 0
        self.mode = "probe"
        self._probe()

    def _probe(self) -> None:
        if self.mode == "probe":
            self.ping.publish(self.payload)
            self.runtime.loop.call_later(PROBE_S, self._probe)

    def _measure(self) -> None:
        self.mode = "measure"
        self._send()

    def _send(self) -> None:
        self.sent_ns = time.perf_counter_ns()
        self.ping.publish(self.payload)

    def _pong(self, _msg: Any) -> None:
        now = time.perf_counter_ns()
        if self.mode == "probe":
            self.mode = "settle"
            self.runtime.loop.call_later(SETTLE_S, self._measure)
        if self.mode != "measure":
            return
        if self.i >= WARMUP:
            self.samples.append((now - self.sent_ns) / 1000.0)
        self.i += 1
        if self.i >= WARMUP + self.count:
            self.mode = "idle"
            self.done.set()
        else:
            self._send()


def _runtime_with(name: str, factory: Callable[[], Node]) -> tuple[Runtime, Supervisor, NodeHandle]:
    rt = Runtime().start()
    sup = Supervisor(rt, name, [ChildSpec(NodeRecipe(name, factory))])
    rt.wait(sup.start_async())  # nodes subscribe before the bridge opens
    handle: NodeHandle = sup.child(name)  # the running instance
    return rt, sup, handle


def echo(listen: str, bridge_class: type[Bridge] = Bridge) -> None:
    rt, sup, _ = _runtime_with("echo", Echo)
    config = {"listen": [listen], "import": ["/ping"], "export": ["/pong"], **transport()}
    bridge = bridge_class(rt, bridge_config(config)).open()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print("ready", flush=True)
    done.wait(MAX_LIFETIME_S)
    bridge.close()
    rt.wait(sup.stop_async())
    rt.close()


def ping(connect: str, count: int, sizes: list[int], bridge_class: type[Bridge] = Bridge) -> None:
    rt, sup, handle = _runtime_with("ping", Pinger)
    config = {"connect": [connect], "import": ["/pong"], "export": ["/ping"], **transport()}
    bridge = bridge_class(rt, bridge_config(config)).open()
    limit = bridge.config.send_limit()
    try:
        for size in sizes:
            if limit is not None and size > limit:
                print(f"runtime ping: {size} B skipped: over the transport's cap", file=sys.stderr)
                continue
            node = handle.node
            assert isinstance(node, Pinger)
            done = threading.Event()
            rt.call(node.begin, size, count, done)
            if not done.wait(MATCH_TIMEOUT_S + SETTLE_S + REPLY_TIMEOUT_S + count * 0.01):
                sys.exit(f"runtime ping: {size} B round trips did not finish ({node.mode})")
            print(json.dumps({"size": size, "rtt_us": node.samples}), flush=True)
    finally:
        bridge.close()
        rt.wait(sup.stop_async())
        rt.close()


def main(bridge_class: type[Bridge] = Bridge, usage: str | None = __doc__) -> None:
    if sys.argv[1:2] == ["echo"] and len(sys.argv) == 3:
        echo(sys.argv[2], bridge_class)
    elif sys.argv[1:2] == ["ping"] and len(sys.argv) >= 5:
        ping(sys.argv[2], int(sys.argv[3]), [int(s) for s in sys.argv[4:]], bridge_class)
    else:
        sys.exit(usage)


if __name__ == "__main__":
    main()
