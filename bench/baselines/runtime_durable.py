"""The runtime's cross-process durable topic under kills (bench/restart.py), over the Zenoh bridge.

python runtime_durable.py pub LISTEN STOP COUNT   publishes seq 1, 2, ... as 8-byte
    little-endian payloads on durable /data at 1 kHz, exported on Zenoh (listening on
    LISTEN, retaining the last RETAIN messages); prints "ready" once exporting; when the
    file STOP exists it stops publishing and writes the number published to COUNT, then
    keeps answering retention queries until SIGTERM or SIGINT.
runtime_durable:sink (a ProcessNode target)  a runtime with one node durably subscribed
    to /data through the bridge (connecting to config["connect"], resuming from the cursor
    file config["cursor"]); appends "<pid> <seq>" to config["log"] for every message, one
    unbuffered O_APPEND write each, so a SIGKILL loses nothing already written. With
    config["delivery"] = "at_least_once" the bridge redelivers the message in flight at a
    kill, and the sink is idempotent by sequence: it starts from the last seq of its log and
    writes "<pid> <seq> again" instead for a message it already acted on.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor

RETAIN = 200_000  # more than a full run publishes: no message ever falls out of retention
PERIOD_S = 0.001
MAX_LIFETIME_S = 900.0  # a program the benchmark lost track of still ends


class Source(Node):
    def on_start(self) -> None:
        self.pub = self.publisher("/data")
        self.sent = 0
        self.stop_file = Path(self.get_param("stop"))
        self.count_file = Path(self.get_param("count"))
        self.timer(PERIOD_S, self.tick)

    def tick(self) -> None:
        if self.sent < 0:
            return
        # Checked every 100 messages: a stat per tick would cost more than the publish.
        if self.sent % 100 == 0 and self.stop_file.exists():
            self.count_file.write_text(str(self.sent))
            self.sent = -1
            return
        self.sent += 1
        self.pub.publish(self.sent.to_bytes(8, "little"))


class Sink(Node):
    def on_start(self) -> None:
        self.out = int(self.get_param("fd"))
        self.acted = int(self.get_param("acted", 0))  # idempotent: the last seq acted on
        self.pid = os.getpid()
        self.subscribe("/data", self.take, durable=True, queue_size=RETAIN)

    def take(self, msg: bytes) -> None:
        seq = int.from_bytes(msg, "little")
        again = " again" if seq <= self.acted else ""
        self.acted = max(self.acted, seq)
        os.write(self.out, f"{self.pid} {seq}{again}\n".encode())


def last_acted(log: str) -> int:
    """The last sequence number a sink wrote to `log` as acted on (0 for none)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 4096))
            lines = f.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return 0
    seqs = [int(p[1]) for p in map(str.split, lines) if len(p) == 2 and p[1].isdigit()]
    return seqs[-1] if seqs else 0


def _serve_until_term() -> None:
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):  # stop_group sends SIGINT first
        signal.signal(sig, lambda *_: done.set())
    done.wait(MAX_LIFETIME_S)


def pub(listen: str, stop: str, count: str) -> None:
    rt = Runtime().start()
    config = {"listen": [listen], "export": ["/data"], "durable": ["/data"], "retain": RETAIN}
    bridge = Bridge(rt, bridge_config(config)).open()
    params = {"stop": stop, "count": count}
    sup = Supervisor(rt, "pub", [ChildSpec(NodeRecipe("source", Source, params))])
    rt.wait(sup.start_async())
    print("ready", flush=True)
    _serve_until_term()
    rt.wait(sup.stop_async())
    bridge.close()
    rt.close()


def sink(config: dict[str, Any], ready: Callable[[], None], rt: Runtime | None = None) -> int:
    """The durable subscriber; a warm standby started its runtime (`prepare`) already."""
    fd = os.open(config["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    delivery = config.get("delivery", "at_most_once")
    params = {"fd": fd, "acted": last_acted(config["log"]) if delivery == "at_least_once" else 0}
    rt = rt or Runtime().start()
    sup = Supervisor(rt, "sub", [ChildSpec(NodeRecipe("sink", Sink, params))])
    rt.wait(sup.start_async())  # the durable subscription exists before the bridge opens
    bridge_cfg = {"connect": [config["connect"]], "import": ["/data"], "durable": ["/data"]}
    bridge_cfg["delivery"] = delivery
    bridge = Bridge(rt, bridge_config(bridge_cfg), cursors={"/data": Path(config["cursor"])})
    bridge.open()
    # On the loop's thread, which runs the node's callbacks and commits the cursor: the
    # death notice it takes there is released only once that thread is dying.
    rt.call(ready)
    _serve_until_term()
    bridge.close()
    rt.wait(sup.stop_async())
    rt.close()
    return 0


def _start_runtime() -> Runtime:
    return Runtime().start()


# A warm standby starts the runtime before its hand-over: no node, no bridge, no cursor
# yet, so it is not an instance of the sink until the hand-over.
sink.prepare = _start_runtime  # type: ignore[attr-defined]


if __name__ == "__main__":
    if len(sys.argv) != 5 or sys.argv[1] != "pub":
        sys.exit("usage: runtime_durable.py pub LISTEN STOP COUNT")
    pub(*sys.argv[2:])
