"""Test program: publish sequenced messages on durable /data at ~1 kHz through the bridge.

argv: listen endpoint, stop file, count file. Publishing stops when the stop file
exists; the number published is then written to the count file; the process keeps
serving retention queries until it is terminated.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor


class Source(Node):
    def on_start(self) -> None:
        self.pub = self.publisher("/data")
        self.sent = 0
        self.timer(0.001, self.tick)

    def tick(self) -> None:
        if os.path.exists(STOP):
            if self.sent >= 0:
                with open(COUNT, "w", encoding="ascii") as f:
                    f.write(str(self.sent))
                self.sent = -1
            return
        self.sent += 1
        self.pub.publish(self.sent.to_bytes(8, "little"))


listen, STOP, COUNT = sys.argv[1], sys.argv[2], sys.argv[3]
done = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: done.set())
rt = Runtime().start()
bridge = Bridge(rt, bridge_config({"listen": [listen], "export": ["/data"], "durable": ["/data"]}))
bridge.open()
sup = Supervisor(rt, "pub", [ChildSpec(NodeRecipe("source", Source))])
rt.wait(sup.start_async())
print("ready", flush=True)
done.wait(60.0)
rt.wait(sup.stop_async())
bridge.close()
rt.close()
