"""One-way flood between two processes, the programs of bench/throughput.py.

    flood.py SYSTEM sub ENDPOINT    counts the flood's messages; each "report" line on
                                    stdin prints the current step's counts as one JSON line:
                                    {"step", "received", "in_order", "stale", "first_ns",
                                    "last_ns"} (arrival times on this process's monotonic clock)
    flood.py SYSTEM pub ENDPOINT    per stdin line "STEP RATE COUNT SIZE MAX_S": COUNT messages
                                    of SIZE bytes, message i due at i / RATE s after the start
                                    (up to AHEAD_S early, never late on purpose), stopping at
                                    MAX_S s; then {"step", "sent", "elapsed_s"}

Both print "ready" when their session is up and end at end of input. SYSTEM is one of
`runtime` (two runtimes, one node each, joined by the runtime's Zenoh bridge, on its native
per-message path where built), `zenoh` (zenoh-python peers), `dds` (the dds backend's
session: Cyclone through the project's C take path) and `rospy` (Debian's system Python,
under a roscore given by $ROS_MASTER_URI). Raw Zenoh in Rust speaks the same protocol
(baselines/zenoh_rs: `zenoh-echo-rs sub|pub ENDPOINT`).

Each message starts with 18 ASCII digits, its step (8) and its number in the step (10),
then `x` up to SIZE bytes (rospy's std_msgs/String takes text); the dds backend carries
step * STEP_SPAN + number as its message id and SIZE bytes of StampedBytes. A step's
messages arrive in order when message i is the i-th of that step to arrive; messages of
an earlier step are counted `stale` and ignored. Each publisher sends from where its
system's code runs: rospy, zenoh-python and dds from the pacing thread, the runtime's node
from its event loop (a loop timer paces it, in the same way). Every system is set up for throughput:
Zenoh publishers batch (not express) with congestion control BLOCK, the bridge's exports
too (`express: false`), rospy without tcp_nodelay and a synchronous publisher
(queue_size=None: it blocks rather than drops), dds reliable and keep-all.

This module imports only the standard library at its top: rospy runs it in Debian's
system Python.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

HEAD = 18
AHEAD_S = 0.001  # sends may leave this early: a shorter sleep would oversleep (timer slack)
LOOP_RESOLUTION_S = 0.001  # an event loop's timers: a shorter wait fires at once (a spin)
STEP_SPAN = 1_000_000  # dds: message id = step * STEP_SPAN + number (an int32)
KEY, TOPIC = "bench/flood", "/flood"
MAX_LIFETIME_S = 3600.0


class Tally:
    """The current step's counts, updated by whichever thread delivers messages."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.step = -1
        self.received = 0
        self.in_order = True
        self.stale = 0
        self.first_ns = 0
        self.last_ns = 0

    def note(self, step: int, seq: int) -> None:
        now = time.monotonic_ns()
        with self.lock:
            if step != self.step:
                if step < self.step:
                    self.stale += 1
                    return
                self.step, self.received, self.in_order, self.first_ns = step, 0, True, now
            if seq != self.received:
                self.in_order = False
            self.received += 1
            self.last_ns = now

    def note_payload(self, payload: bytes | str | memoryview) -> None:
        head = bytes(payload[:HEAD]) if isinstance(payload, memoryview) else payload[:HEAD]
        try:
            step, seq = int(head[:8]), int(head[8:])
        except ValueError:
            return  # not a flood message: ignored
        self.note(step, seq)

    def report(self) -> str:
        with self.lock:
            fields = ("step", "received", "in_order", "stale", "first_ns", "last_ns")
            return json.dumps({f: getattr(self, f) for f in fields})


def payload(step: int, seq: int, padding: str) -> str:
    return f"{step:08d}{seq:010d}" + padding


def serve_reports(tally: Tally) -> None:
    """Answer "report" lines until stdin ends."""
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() != "report":
            break
        print(tally.report(), flush=True)


def pace(rate: float, count: int, max_s: float, send: Callable[[int, int], None]) -> int:
    """Call send(first, end) for the messages due so far, until `count` or `max_s`; the
    number sent."""
    t0 = time.monotonic()
    sent = 0
    while sent < count:
        elapsed = time.monotonic() - t0
        if elapsed > max_s:
            break
        due = min(count, int((elapsed + AHEAD_S) * rate) + 1)
        if due > sent:
            send(sent, due)
            sent = due
        else:
            time.sleep(max(0.0, sent / rate - elapsed - AHEAD_S))
    return sent


def serve_steps(send: Callable[[int, int, int, int], None]) -> None:
    """Run each "STEP RATE COUNT SIZE MAX_S" line with send(step, first, end, size),
    paced from this thread (`pace`)."""

    def run(step: int, rate: float, count: int, size: int, max_s: float) -> int:
        return pace(rate, count, max_s, functools.partial(send, step, size=size))

    serve_runs(run)


def serve_runs(run: Callable[[int, float, int, int, float], int]) -> None:
    """Run each "STEP RATE COUNT SIZE MAX_S" line with run(step, rate, count, size, max_s),
    which paces and sends the step and returns the number sent."""
    print("ready", flush=True)
    for line in sys.stdin:
        fields = line.split()
        if len(fields) != 5:
            break
        step, count, size = int(fields[0]), int(fields[2]), int(fields[3])
        rate, max_s = float(fields[1]), float(fields[4])
        t0 = time.monotonic()
        sent = run(step, rate, count, size, max_s)
        elapsed = time.monotonic() - t0
        print(json.dumps({"step": step, "sent": sent, "elapsed_s": elapsed}), flush=True)


# --------------------------------------------------------------------------- rospy


def rospy_sub(_endpoint: str) -> None:
    import rospy
    from std_msgs.msg import String

    rospy.init_node("flood_sub", disable_rosout=True)
    tally = Tally()
    rospy.Subscriber(TOPIC, String, lambda m: tally.note_payload(m.data))
    serve_reports(tally)
    rospy.signal_shutdown("done")


def rospy_pub(_endpoint: str) -> None:
    import rospy
    from std_msgs.msg import String

    rospy.init_node("flood_pub", disable_rosout=True)
    out = rospy.Publisher(TOPIC, String, queue_size=None)
    deadline = time.monotonic() + 30.0
    while out.get_num_connections() == 0 and time.monotonic() < deadline:
        time.sleep(0.01)  # the driver's probe step still finds out if it never connects

    def send(step: int, first: int, end: int, size: int) -> None:
        padding = "x" * max(0, size - HEAD)
        for i in range(first, end):
            out.publish(String(payload(step, i, padding)))

    serve_steps(send)
    rospy.signal_shutdown("done")


# --------------------------------------------------------------------------- zenoh-python


def zenoh_session(listen: list[str], connect: list[str]) -> Any:
    import zenoh

    from roboscale.runtime.zenoh_config import zenoh_config, zenoh_settings

    return zenoh.open(zenoh_config(zenoh_settings(listen, connect)))


def zenoh_sub(endpoint: str) -> None:
    import zenoh

    s = zenoh_session([endpoint], [])
    tally = Tally()
    sub = s.declare_subscriber(KEY, zenoh.handlers.FifoChannel(4096))

    def read() -> None:  # the FIFO channel's reader, as baselines/zenoh_echo.py reads
        while True:
            try:
                tally.note_payload(sub.recv().payload.to_bytes())
            except Exception:
                return  # the session closed: the process is ending

    threading.Thread(target=read, daemon=True).start()
    serve_reports(tally)
    s.close()


def zenoh_pub(endpoint: str) -> None:
    import zenoh

    s = zenoh_session([], [endpoint])
    out = s.declare_publisher(KEY, congestion_control=zenoh.CongestionControl.BLOCK, express=False)

    def send(step: int, first: int, end: int, size: int) -> None:
        padding = "x" * max(0, size - HEAD)
        for i in range(first, end):
            out.put(payload(step, i, padding).encode())

    serve_steps(send)
    s.close()


# --------------------------------------------------------------------------- the runtime


def runtime_side(config: dict[str, Any], node_class: Any) -> tuple[Any, Any, Any, Any]:
    """A runtime with one node under a supervisor, then its bridge (nodes subscribe first)."""
    from roboscale.runtime.bridge import Bridge, bridge_config
    from roboscale.runtime.executor import Runtime
    from roboscale.runtime.node import NodeRecipe
    from roboscale.runtime.supervisor import ChildSpec, Supervisor

    rt = Runtime().start()
    sup = Supervisor(rt, "flood", [ChildSpec(NodeRecipe("flood", node_class))])
    rt.wait(sup.start_async())
    handle = sup.child("flood")  # the running instance (a restart would make a new one)
    bridge = Bridge(rt, bridge_config({**config, "express": False})).open()
    return rt, sup, handle, bridge


def runtime_close(rt: Any, sup: Any, bridge: Any) -> None:
    bridge.close()
    rt.wait(sup.stop_async())
    rt.close()


def runtime_sub(endpoint: str) -> None:
    from roboscale.runtime.node import Node

    tally = Tally()

    class Counter(Node):
        def on_start(self) -> None:
            # A view of each sample: no copy into a bytes (the native link lends large ones).
            self.subscribe(TOPIC, tally.note_payload, msg_type=memoryview)

    rt, sup, _, bridge = runtime_side({"listen": [endpoint], "import": [TOPIC]}, Counter)
    serve_reports(tally)
    runtime_close(rt, sup, bridge)


def runtime_pub(endpoint: str) -> None:
    import asyncio

    from roboscale.runtime.node import Node

    class Source(Node):
        def on_start(self) -> None:
            self.out = self.publisher(TOPIC)

        async def flood(self, step: int, rate: float, count: int, size: int, max_s: float) -> int:
            """The step, paced on the node's own loop as `pace` paces a thread: each loop
            turn publishes the messages due (up to AHEAD_S early), then a loop timer
            wakes it for the next, at least a millisecond later. A node publishes from
            its loop; pacing it from this process's main thread instead cost a thread
            hop into the loop per burst (`Runtime.call`), which no other system's
            publisher pays."""
            loop = asyncio.get_running_loop()
            done: asyncio.Future[int] = loop.create_future()
            padding, publish = "x" * max(0, size - HEAD), self.out.publish
            t0, sent = loop.time(), 0

            def turn() -> None:
                nonlocal sent
                try:
                    elapsed = loop.time() - t0
                    if elapsed <= max_s:
                        due = min(count, int((elapsed + AHEAD_S) * rate) + 1)
                        for i in range(sent, due):
                            publish(payload(step, i, padding).encode())
                        sent = due
                    if sent >= count or elapsed > max_s:
                        done.set_result(sent)
                    else:  # never sooner than the loop's resolution: it would spin
                        wait = t0 + sent / rate - AHEAD_S - loop.time()
                        loop.call_later(max(wait, LOOP_RESOLUTION_S), turn)
                except BaseException as e:  # the driver sees it, not the loop's log
                    done.set_exception(e)

            turn()
            return await done

    rt, sup, handle, bridge = runtime_side({"connect": [endpoint], "export": [TOPIC]}, Source)

    def run(step: int, rate: float, count: int, size: int, max_s: float) -> int:
        sent: int = rt.wait(handle.node.flood(step, rate, count, size, max_s), timeout_s=max_s + 60)
        return sent

    serve_runs(run)
    runtime_close(rt, sup, bridge)


# --------------------------------------------------------------------------- dds


def dds_session(role: str) -> tuple[Any, Any, Any]:
    """The dds backend's session, in a domain leased by the driver ($FLOOD_DDS_DOMAIN)."""
    from roboscale.backends.base import MessageKind, NodeContext
    from roboscale.backends.dds import BACKEND, cyclone_xml, message_path, take_mode

    domain = int(os.environ["FLOOD_DDS_DOMAIN"])
    size = int(os.environ["FLOOD_DDS_SIZE"])
    config = {
        "domain": domain,
        "xml": cyclone_xml(domain, "lo", ["127.0.0.1"], 4),
        "qos": {"reliability": "reliable", "history": "keep_all"},
        "take": take_mode(),
        "path": message_path(),
    }
    session = BACKEND.open(NodeContext(role, "127.0.0.1", config))
    return session, MessageKind("bytes", size), BACKEND


def dds_sub(_endpoint: str) -> None:
    session, kind, _ = dds_session("flood_sub")
    tally = Tally()

    def got(msg_id: int, _msg: object) -> None:
        tally.note(*divmod(msg_id, STEP_SPAN))

    session.subscribe(TOPIC, kind, got, 0)
    serve_reports(tally)
    session.close()


def dds_pub(_endpoint: str) -> None:
    session, kind, _ = dds_session("flood_pub")
    out = session.publisher(TOPIC, kind, 0)

    def send(step: int, first: int, end: int, size: int) -> None:
        if size != kind.size:
            sys.exit(f"dds flood: built for {kind.size} B, asked for {size} B")
        base = step * STEP_SPAN
        for i in range(first, end):
            out.send(base + i, 0)

    serve_steps(send)
    session.close()


ROLES: dict[str, dict[str, Callable[[str], None]]] = {
    "rospy": {"sub": rospy_sub, "pub": rospy_pub},
    "zenoh": {"sub": zenoh_sub, "pub": zenoh_pub},
    "runtime": {"sub": runtime_sub, "pub": runtime_pub},
    "dds": {"sub": dds_sub, "pub": dds_pub},
}


def main() -> None:
    args = sys.argv[1:]
    if len(args) == 3 and args[0] in ROLES and args[1] in ROLES[args[0]]:
        # Bounded even if the driver is gone without closing stdin (a blocked session).
        ender = threading.Timer(MAX_LIFETIME_S, os._exit, (3,))
        ender.daemon = True
        ender.start()
        ROLES[args[0]][args[1]](args[2])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
