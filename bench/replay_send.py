"""What a replaying sender pays per message, as roboscale replays and as the alternative.

A replayed message is sent as recorded: its serialized bytes after the stamped
wrapper's id and stamp (`Publisher.send_body`), as `rosbag play` publishes a bag (ros_comm's
player hands the bag's MessageInstance to a ShapeShifter publisher, never deserializing
it). The alternative a replay could take is a node's: deserialize each recorded message
into the type and serialize it again on send. This measures both on the generated Stata
streams (a 4.25 KB LaserScan and a 308 KB Image), beside what deserializing the real
type costs (`deserialize_us`: what a ros1 subscriber pays either way; the dds backend's
subscribers read the stamp and forward the CDR without it):

- ros1 (genpy, in Debian's Python): the raw writer's `serialize` against `deserialize` +
  `serialize` of the genpy StampedLaserScan / StampedImage;
- dds (cyclonedds's Python types): the publisher's splice (its stamped prefix + the
  recorded CDR) against the IdlStruct's `deserialize` + `serialize`.

    .venv/bin/python bench/replay_send.py [--quick] [--json bench/out/replay_send.json]
"""

from __future__ import annotations

import json
import subprocess
import time
from typing import Any

import goals as judge
from common import counted_args, finish, header, table
from roboscale.lab.nodes import package_path

ROS1_PROBE = """
import io, json, sys, time
sys.path.insert(0, sys.argv[1])
import rospy
from roboscale.backends.ros1 import message_class, raw_class
from roboscale.workloads.replay import StataStream
stream, repeats, out = StataStream(), int(sys.argv[2]), {}
for kind, frame in (("laserscan", 0), ("image", 1)):
    body = stream.body(frame)
    cls = message_class(kind)
    msg, raw = cls(), raw_class(cls)()
    msg.id = raw.id = 1
    msg.t = raw.t = rospy.Time(1, 2)
    raw.body = body
    part = getattr(msg, cls.__slots__[2])
    def per(fn):
        t0 = time.perf_counter_ns()
        for _ in range(repeats):
            fn()
        return (time.perf_counter_ns() - t0) / repeats / 1e3
    wire = io.BytesIO()
    raw.serialize(wire)
    out[kind] = {
        "bytes": len(body),
        "as_recorded_us": per(lambda: raw.serialize(io.BytesIO())),
        "rebuilt_us": per(lambda: (part.deserialize(body), msg.serialize(io.BytesIO()))),
        "deserialize_us": per(lambda: cls().deserialize(wire.getvalue())),
    }
print(json.dumps(out))
"""


def ros1_costs(repeats: int) -> dict[str, Any]:
    res = subprocess.run(
        ["/usr/bin/python3", "-c", ROS1_PROBE, str(package_path()), str(repeats)],
        capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    costs: dict[str, Any] = json.loads(res.stdout)
    return costs


def dds_costs(repeats: int) -> dict[str, Any]:
    from roboscale.backends.base import MessageKind
    from roboscale.backends.dds_types import build_message, payload_offset, type_of
    from roboscale.workloads.replay import StataStream

    stream, out = StataStream(encoding="cdr"), {}
    for kind_name, frame in (("laserscan", 0), ("image", 1)):
        body = stream.body(frame)
        kind = MessageKind(kind_name, len(body))
        stamped: Any = type_of(kind)
        head = bytearray(build_message(kind).serialize()[: payload_offset(kind)])
        wire = bytes(head + body[4:])

        def per(fn: Any) -> float:
            t0 = time.perf_counter_ns()
            for _ in range(repeats):
                fn()
            return (time.perf_counter_ns() - t0) / repeats / 1e3

        out[kind_name] = {
            "bytes": len(body),
            "as_recorded_us": per(lambda: head + memoryview(body)[4:]),  # noqa: B023
            "rebuilt_us": per(lambda: stamped.deserialize(wire).serialize()),  # noqa: B023
            "deserialize_us": per(lambda: stamped.deserialize(wire)),  # noqa: B023
        }
    return out


def main() -> None:
    args, counts = counted_args(
        __doc__ or "",
        {"repeats": 2000},
        {"repeats": 200},
    )
    report = header()
    rows = []
    for backend, measure in (("ros1", ros1_costs), ("dds", dds_costs)):
        for kind, cost in measure(counts["repeats"]).items():
            rows.append({"backend": backend, "message": kind, **cost})
    table(rows, ["backend", "message", "bytes", "as_recorded_us", "rebuilt_us", "deserialize_us"])
    report["rows"] = rows
    faster = judge.Target("> 1x", lambda ratio: ratio > 1)
    goals = [
        judge.single(
            f"{r['backend']} {r['message']}: sending as recorded costs less than rebuilt",
            r["rebuilt_us"] / r["as_recorded_us"],
            faster,
            f"mean of {counts['repeats']:,} repeats each",
        )
        for r in rows
    ]
    finish(report, goals, args)


if __name__ == "__main__":
    main()
