"""Test program: two runtimes of this process joined by bridges with shared memory on;
large messages cross until the sender's pool is mapped and two more crossed.

argv: endpoint, message size. Prints one JSON line {"segments": [the /dev/shm/*.zenoh
this process maps]}, then waits for a line on stdin, closes the bridges and runtimes
and prints {"after_close": [the segments still mapped]} before it exits (0).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor
from roboscale.runtime.zenoh_config import SHM_POOL

DEADLINE_S = 60.0
MAX_MESSAGES = 50


def mapped() -> list[str]:
    lines = Path("/proc/self/maps").read_text().splitlines()
    return sorted({line.split()[-1] for line in lines if line.endswith(".zenoh")})


def pool_mapped() -> bool:
    return any(Path(s).stat().st_size >= SHM_POOL for s in mapped() if Path(s).exists())


class Sizes(Node):
    def on_start(self) -> None:
        got: list[int] = self.params["got"]
        self.subscribe("/big", lambda msg: got.append(len(msg)))


def wait(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not predicate():
        if time.monotonic() > deadline:
            sys.exit(f"shm_pair: timed out waiting for {what}; received {got[-5:]}")
        time.sleep(0.005)


endpoint, size = sys.argv[1], int(sys.argv[2])
a, b = Runtime().start(), Runtime().start()
got: list[int] = []
sup = Supervisor(b, "s", [ChildSpec(NodeRecipe("sizes", Sizes, {"got": got}))])
b.wait(sup.start_async())
out = Bridge(a, bridge_config({"listen": [endpoint], "export": ["/big"]})).open()
into = Bridge(b, bridge_config({"connect": [endpoint], "import": ["/big"]})).open()


def probe() -> bool:
    """Publish a small message: true once one came through (the link is up)."""
    a.call(lambda: a.bus.topic("/big").publish(b"hi"))
    return bool(got)


wait(probe, "the link")
sent = 0
for i in range(MAX_MESSAGES):
    if sent >= 2:
        break
    n = len(got)
    a.call(lambda: a.bus.topic("/big").publish(bytes(size)))
    wait(lambda n=n: size in got[n:], f"message {i + 1} (pool mapped: {pool_mapped()})")
    sent = sent + 1 if pool_mapped() else 0
else:
    sys.exit(f"shm_pair: no shared memory pool after {MAX_MESSAGES} messages")
print(json.dumps({"segments": mapped()}), flush=True)
sys.stdin.readline()
out.close()
into.close()
b.wait(sup.stop_async())
a.close()
b.close()
print(json.dumps({"after_close": mapped()}), flush=True)
