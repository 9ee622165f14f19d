"""Test program: a durable subscriber of /data through the bridge, resuming from a cursor file.

argv: connect endpoint, cursor file. Prints "ready" once the bridge is open.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path

from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeHandle
from roboscale.runtime.supervisor import ChildSpec, Supervisor


class Sink(Node):
    def on_start(self) -> None:
        self.subscribe("/data", self.take, durable=True, queue_size=100_000)

    def take(self, msg: bytes) -> None:
        assert len(msg) == 8


connect, cursor = sys.argv[1], Path(sys.argv[2])
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
rt = Runtime().start()
sup = Supervisor(rt, "sub", [ChildSpec(NodeHandle(rt, "sink", Sink))])
rt.wait(sup.start_async())
config = bridge_config({"connect": [connect], "import": ["/data"], "durable": ["/data"]})
bridge = Bridge(rt, config, cursors={"/data": cursor}).open()
print("ready", flush=True)
done.wait(60.0)
bridge.close()
rt.wait(sup.stop_async())
rt.close()
