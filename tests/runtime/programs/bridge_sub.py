"""Test program: a durable subscriber of /data through the bridge, resuming from a cursor file.

argv: connect endpoint, cursor file, output file[, delivery[, stall]]. Prints "ready" once
the bridge is open. Every message's "pid seq" is appended to the output file with one
O_APPEND write: the callback's effect, which a SIGKILL cannot tear. `delivery` is the
bridge's (default at_most_once); with `stall`, the callback of that sequence number prints
"stalled" and sleeps before writing, to be killed there.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor


class Sink(Node):
    def on_start(self) -> None:
        self.subscribe("/data", self.take, durable=True, queue_size=100_000)

    def take(self, msg: bytes) -> None:
        seq = int.from_bytes(msg, "little")
        if seq == STALL:
            print("stalled", flush=True)
            time.sleep(60.0)
        os.write(OUT, f"{PID} {seq}\n".encode())


connect, cursor = sys.argv[1], Path(sys.argv[2])
OUT = os.open(sys.argv[3], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
PID = os.getpid()
DELIVERY = sys.argv[4] if len(sys.argv) > 4 else "at_most_once"
STALL = int(sys.argv[5]) if len(sys.argv) > 5 else 0
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
rt = Runtime().start()
sup = Supervisor(rt, "sub", [ChildSpec(NodeRecipe("sink", Sink))])
rt.wait(sup.start_async())
raw = {"connect": [connect], "import": ["/data"], "durable": ["/data"], "delivery": DELIVERY}
config = bridge_config(raw)
bridge = Bridge(rt, config, cursors={"/data": cursor}).open()
print("ready", flush=True)
done.wait(60.0)
bridge.close()
rt.wait(sup.stop_async())
rt.close()
