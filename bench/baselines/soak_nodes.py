"""What bench/soak.py and bench/chaos_scale.py run in their nodes: the exactly-once tally,
the 1 kHz sequence source, and the process-node target of the soak.

soak_nodes:process_node (a ProcessNode target) runs a runtime with one node durably
subscribed to config["read"] through the bridge (connecting to config["connect"],
resuming from the cursor file config["cursor"]), tallying every sequence number; with
config["write"] it also publishes 1, 2, ... on that topic at 1 kHz, exported durably,
from the moment its first message arrives (so both directions start together) until
the file config["stop"] exists. Every second it replaces the JSON file config["tally"]
with its counts.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeHandle, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor

PERIOD_S = 0.001  # 1 kHz
STOP_EVERY = 100  # the stop file is looked at every this many ticks: a stat per tick costs
QUEUE = 100_000  # durable inbox bound: far above any stall of the loop at 1 kHz
MAX_LIFETIME_S = 4 * 3600.0  # a program the benchmark lost track of still ends


class Tally:
    """Exactly-once check of one subscriber's stream 1, 2, 3, ... in O(1) memory.

    Durable topics deliver in order, so a stream is exactly once when each message is
    the next expected one. A jump forward is counted as `skipped` (lost unless it comes
    later, which is then `behind`); a number at or below the last one is `behind` (a
    duplicate, or a late message whose gap was already counted): both miss the goal.
    """

    __slots__ = ("behind", "next", "received", "skipped")

    def __init__(self) -> None:
        self.received = 0
        self.next = 1
        self.skipped = 0
        self.behind = 0

    def take(self, seq: int) -> None:
        self.received += 1
        if seq == self.next:
            self.next += 1
        elif seq > self.next:
            self.skipped += seq - self.next
            self.next = seq + 1
        else:
            self.behind += 1

    def take_bytes(self, msg: bytes) -> None:
        self.take(int.from_bytes(msg, "little"))

    def counts(self, published: int) -> dict[str, int]:
        """Lost (never handed over: gaps and the missing tail) and duplicated."""
        tail = max(0, published - (self.next - 1))
        return {
            "received": self.received,
            "lost": self.skipped + tail,
            "duplicated": self.behind,
        }

    def as_dict(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in ("received", "next", "skipped", "behind")}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Tally:
        tally = cls()
        for key in ("received", "next", "skipped", "behind"):
            setattr(tally, key, int(raw[key]))
        return tally


class SeqSource(Node):
    """Publishes 1, 2, ... as 8-byte little-endian payloads every PERIOD_S once `go()`
    is true, until `stop()` is; `sent` is the count published."""

    def on_start(self) -> None:
        self.pub = self.publisher(self.get_param("topic"))
        self.go: Callable[[], bool] = self.get_param("go")
        self.stop: Callable[[], bool] = self.get_param("stop")
        self.sent = 0
        self.stopped = False
        self.timer(float(self.get_param("period_s", PERIOD_S)), self.tick)

    def tick(self) -> None:
        if self.stopped or not self.go():
            return
        if self.sent % STOP_EVERY == 0 and self.stop():
            self.stopped = True
            return
        self.sent += 1
        self.pub.publish(self.sent.to_bytes(8, "little"))


class Reader(Node):
    """A durable subscriber that tallies every sequence number it is handed."""

    def on_start(self) -> None:
        tally: Tally = self.get_param("tally")
        self.subscribe(self.get_param("topic"), tally.take_bytes, durable=True, queue_size=QUEUE)


class _Reporter(Node):
    """Writes the process's counts to a JSON file every second (replaced atomically)."""

    def on_start(self) -> None:
        self.path = Path(self.get_param("path"))
        self.counts: Callable[[], dict[str, Any]] = self.get_param("counts")
        self.timer(1.0, self.write)

    def write(self) -> None:
        write_json(self.path, self.counts())


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def process_node(config: dict[str, Any], ready: Callable[[], None]) -> int:
    tally = Tally()
    stop_file = Path(config.get("stop", "/nonexistent"))
    rt = Runtime().start()
    reader = NodeRecipe("reader", Reader, {"tally": tally, "topic": config["read"]})
    children = [ChildSpec(reader)]
    has_source = bool(config.get("write"))
    if has_source:
        params = {"topic": config["write"], "go": lambda: tally.received > 0}
        source = NodeRecipe("source", SeqSource, {**params, "stop": stop_file.exists})
        children.append(ChildSpec(source))

    def counts() -> dict[str, Any]:
        running: NodeHandle | None = sup.instance("source") if has_source else None
        node: Any = running.node if running is not None else None
        sent = node.sent if node is not None else 0
        stopped = bool(not has_source or (node is not None and node.stopped))
        return {"tally": tally.as_dict(), "published": sent, "stopped": stopped}

    reporter = {"path": config["tally"], "counts": counts}
    children.append(ChildSpec(NodeRecipe("reporter", _Reporter, reporter)))
    sup = Supervisor(rt, "proc", children)
    rt.wait(sup.start_async())  # the durable subscription exists before the bridge opens
    raw: dict[str, Any] = {"connect": [config["connect"]], "import": [config["read"]]}
    raw["durable"] = [config["read"]]
    if config.get("write"):
        raw |= {"export": [config["write"]], "durable": [config["read"], config["write"]]}
        raw["retain"] = int(config.get("retain", 10_000))
    bridge = Bridge(rt, bridge_config(raw), cursors={config["read"]: Path(config["cursor"])})
    bridge.open()
    ready()
    _serve_until_term()
    rt.call(lambda: write_json(Path(config["tally"]), counts()))
    rt.wait(sup.stop_async())
    bridge.close()
    rt.close()
    return 0


def _serve_until_term() -> None:
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    done.wait(MAX_LIFETIME_S)
