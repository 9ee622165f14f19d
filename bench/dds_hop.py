"""Where a dds round trip spends its time beyond ddsperf's: the pieces of one hop.

1. take: the binding's `ddspy_take` (two copies and a SampleInfo object, GIL held)
   against the backend's `CdrReader` (references to Cyclone's serdata), per sample,
   on one participant (a writer and a reader of the same topic).
2. forward: `dds_write` of the received bytes (a copy into a new serdata, validated
   again) against `SampleForwarder` (`dds_writecdr` of the received serdata).
3. cold Python: the backend's per-sample path through ctypes (a `Sample`, its header
   read, the callback, a forward call: what runs where the C part `_dds_take` was not
   built, or with ROBOSCALE_DDS_PATH=ctypes), run in a loop and run once every 5 ms as a message
   wakes it: the cold run is what a round trip pays. Also once every 5 ms after a
   copy of 256 KB, 1 MB or 4 MB (memory traffic such as a large message's receive,
   reassembly and send): it pushes the interpreter's code and data out of the caches.
4. with --perf (root, `perf`): a timeline of ddsperf ping/pong and of the lab's dds
   echo (bench/dds.py's, in child processes, on the path its install takes) from the
   kernel's sendmsg/recvmsg tracepoints: per round trip, when the ping's last
   datagram left, when the echo's last datagram arrived, when the echo's first reply
   datagram left, when the pinger's last datagram arrived (medians, µs from the
   ping's first datagram), beside the round trip's p50 that bench/dds.py measured in
   the same run (ddsperf's doubled); and, from sched_switch, how often the pinger's sending
   thread was preempted while its datagrams went out (a receiver woken on the same
   core runs before the rest are sent). --ddsperf-also PATH traces another ddsperf
   build too.

    .venv/bin/python bench/dds_hop.py [--quick] [--perf [--ddsperf-also PATH]]
        [--json bench/out/dds_hop.json]
"""

from __future__ import annotations

import bisect
import ctypes
import json
import re
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import counted_args, finish, header, table
from roboscale.backends import dds as backend
from roboscale.backends.dds_cdr import CdrReader, Sample, SampleForwarder, SampleWriter
from roboscale.spec.payloads import format_size

SIZES = [65536, 262144, 1 << 20]
EVENTS = "syscalls:sys_enter_sendmsg,syscalls:sys_exit_recvmsg,sched:sched_switch"
BURST_GAP_US = 3000.0  # messages are 5 ms (or 20 ms) apart: a longer gap starts a new one
DATAGRAM = 13524  # Cyclone's default MaxMessageSize packs about this much per datagram


def median_us(samples: list[int]) -> float:
    return statistics.median(samples) / 1e3


def take_and_forward(size: int, repeats: int) -> dict[str, Any]:
    """Per sample: the binding's take against CdrReader's, dds_write against writecdr."""
    from cyclonedds._clayer import ddspy_take
    from cyclonedds.core import InstanceState, SampleState, ViewState
    from cyclonedds.pub import DataWriter
    from cyclonedds.topic import Topic

    from roboscale.backends.dds_types import StampedBytes, Time

    lease = backend.lease_domain()
    try:
        domain, reader, writer = backend.loopback_endpoints(lease.domain, "rt/hop")
        participant = writer.participant
        spare = DataWriter(participant, Topic(participant, "rt/hop_unread", StampedBytes))
        cdr = StampedBytes(id=1, t=Time(sec=1, nanosec=1), data=bytes(size)).serialize()
        write = SampleWriter(writer._ref)
        mask = SampleState.Any | ViewState.Any | InstanceState.Any
        samples = CdrReader(reader._ref, mask, 4)
        times: dict[str, list[int]] = {k: [] for k in ("binding", "cdr", "write", "writecdr")}
        forward, write_spare = SampleForwarder(spare._ref), SampleWriter(spare._ref)

        def on_sample(sample: Sample) -> None:
            t0 = time.perf_counter_ns()
            forward(sample)
            times["writecdr"].append(time.perf_counter_ns() - t0)

        for _ in range(repeats):
            write(cdr)
            t0 = time.perf_counter_ns()
            taken = ddspy_take(reader._ref, mask, 4)
            times["binding"].append(time.perf_counter_ns() - t0)
            t0 = time.perf_counter_ns()
            write_spare(taken[0][0])
            times["write"].append(time.perf_counter_ns() - t0)
            write(cdr)
            t0 = time.perf_counter_ns()
            samples.take(on_sample)  # includes on_sample's forward: subtracted below
            times["cdr"].append(time.perf_counter_ns() - t0 - times["writecdr"][-1])
        assert domain is not None
    finally:
        lease.release()
    return {
        "bytes": size,
        "take_binding_us": median_us(times["binding"]),
        "take_cdr_us": median_us(times["cdr"]),
        "forward_write_us": median_us(times["write"]),
        "forward_writecdr_us": median_us(times["writecdr"]),
    }


TRAFFIC = (256 << 10, 1 << 20, 4 << 20)
COLD_MODES = [
    ("in a loop", 0.0, 0),
    ("once every 5 ms", 0.005, 0),
    *((f"once every 5 ms, after a {format_size(n)} copy", 0.005, n) for n in TRAFFIC),
]


def cold_python(repeats: int) -> list[dict[str, Any]]:
    """The backend's per-sample Python path: hot (in a loop), cold (every 5 ms), and cold
    after memory traffic (a copy of 256 KB to 4 MB before each run)."""
    data = b"\x00\x01\x00\x00" + struct.pack("<iiI", 5, 1, 2) + bytes(64)
    buffer = ctypes.create_string_buffer(data, len(data))
    unpack, forwarded = struct.Struct("<iiI").unpack_from, []

    def callback(seq: int, msg: Sample) -> None:
        forwarded.append(msg.serdata())

    def one() -> None:
        sample = Sample(1, ctypes.addressof(buffer), len(data))
        try:
            head = sample.head()
            if len(head) == 16 and head[1] == 1:
                callback(unpack(head, 4)[0], sample)
        finally:
            sample.release()

    source, target = bytearray(max(TRAFFIC)), bytearray(max(TRAFFIC))
    rows = []
    for mode, pause_s, traffic in COLD_MODES:
        spent = []
        for _ in range(repeats):
            if pause_s:
                time.sleep(pause_s)
            target[:traffic] = source[:traffic]
            t0 = time.perf_counter_ns()
            one()
            spent.append(time.perf_counter_ns() - t0)
        rows.append({"python_path": mode, "us": median_us(spent)})
    return rows


def trace(system: str, size: int, messages: int, also: str) -> dict[str, Any]:
    """perf's timeline (sendmsg, recvmsg, sched_switch) of one bench/dds.py measurement."""
    with tempfile.TemporaryDirectory(prefix="roboscale-hop-") as work:
        data, measured = Path(work) / "perf.data", Path(work) / "dds.json"
        bench = [sys.executable, str(Path(__file__).with_name("dds.py"))]
        run = [*bench, "--sizes", format_size(size), "--systems", system, "--json", str(measured)]
        if system == "ddsperf-also":
            run = [*bench, "--sizes", format_size(size), "--systems", "none",
                   "--ddsperf-also", also, "--json", str(measured)]  # fmt: skip
        subprocess.run(
            ["perf", "record", "-q", "-e", EVENTS, "-o", str(data), "--", *run,
             "--messages", str(messages), "--warmup", "10"],
            check=True, stdout=subprocess.DEVNULL, timeout=300,
        )  # fmt: skip
        script = subprocess.run(
            ["perf", "script", "-i", str(data), "-F", "pid,tid,time,event,trace"],
            capture_output=True, text=True, check=True, timeout=120,
        )  # fmt: skip
        p50 = json.loads(measured.read_text())["rows"][0]["p50_us"]
    stages = timeline(script.stdout, -(-size // DATAGRAM))
    # The round trip's p50 as bench/dds.py measured it, less the ping's last datagram:
    # what the pinger's own receive adds before its timestamp (medians of two series).
    ends = {"rtt_p50_us": p50, "ping_end_us": p50 - stages["ping_in_us"]}
    return {"system": system, "bytes": size, **stages, **ends}


TRACE_LINE = re.compile(r"\s*(\d+)/(\d+)\s+([\d.]+):\s+(\S+):(.*)")
Event = tuple[float, int, int, bool]  # µs, pid, tid, a send (else a receive)


def trace_events(output: str) -> tuple[list[Event], dict[int, list[float]]]:
    """`perf script -F pid,tid,time,event,trace` lines: the sends and receives, and
    when each thread was preempted (switched out still runnable), by thread id."""
    events: list[Event] = []
    preempted: dict[int, list[float]] = {}
    for line in output.splitlines():
        m = TRACE_LINE.match(line)
        if not m:
            continue
        t_us, tid, kind = float(m[3]) * 1e6, int(m[2]), m[4]
        if kind in ("syscalls:sys_enter_sendmsg", "syscalls:sys_exit_recvmsg"):
            events.append((t_us, int(m[1]), tid, kind.endswith("sendmsg")))
        elif kind == "sched:sched_switch" and re.search(r"prev_state=R\+? ", m[5]):
            preempted.setdefault(tid, []).append(t_us)
    return sorted(events), preempted


def timeline(output: str, datagrams: int) -> dict[str, Any]:
    events, preempted = trace_events(output)
    bursts: list[list[Event]] = [[]]
    for e in events:
        if bursts[-1] and e[0] - bursts[-1][-1][0] > BURST_GAP_US:
            bursts.append([])
        bursts[-1].append(e)
    keys = ("ping_out_us", "echo_in_us", "echo_out_us", "ping_in_us", "ping_preempted")
    stages: dict[str, list[float]] = {k: [] for k in keys}
    for burst in bursts:
        sends = [e for e in burst if e[3]]
        if len(sends) < 2 * datagrams:
            continue
        pinger, sender, t0 = sends[0][1], sends[0][2], sends[0][0]
        ping_sends = [e[0] for e in sends if e[2] == sender]  # not its acknowledgements
        echo_sends = [e[0] for e in sends if e[1] != pinger]
        echo_recvs = [e[0] for e in burst if not e[3] and e[1] != pinger]
        ping_recvs = [e[0] for e in burst if not e[3] and e[1] == pinger]
        if min(len(ping_sends), len(echo_sends), len(echo_recvs), len(ping_recvs)) < datagrams:
            continue
        out = ping_sends[datagrams - 1]
        switched = preempted.get(sender, [])
        stages["ping_out_us"].append(out - t0)
        stages["ping_preempted"].append(
            bisect.bisect_left(switched, out) - bisect.bisect_left(switched, t0)
        )
        stages["echo_in_us"].append(echo_recvs[datagrams - 1] - t0)
        stages["echo_out_us"].append(echo_sends[0] - t0)
        stages["ping_in_us"].append(ping_recvs[datagrams - 1] - t0)
    if not stages["echo_in_us"]:
        raise RuntimeError("perf saw no complete round trip")
    medians = {k: statistics.median(v) for k, v in stages.items()}
    medians["echo_turn_us"] = medians["echo_out_us"] - medians["echo_in_us"]
    return {"round_trips": len(stages["echo_in_us"]), **medians}


def add_perf(p: Any) -> None:
    p.add_argument("--perf", action="store_true", help="also trace ddsperf and the dds echo")
    p.add_argument(
        "--ddsperf-also",
        metavar="PATH",
        default="",
        help="with --perf, trace this ddsperf build too (bench/dds.py's option)",
    )


def main() -> None:
    args, counts = counted_args(__doc__ or "", {"repeats": 200}, {"repeats": 30}, add_perf)
    report = header()
    rows = [take_and_forward(size, counts["repeats"]) for size in SIZES]
    print("\nper sample (µs, median):")
    table(rows, ["bytes", "take_binding_us", "take_cdr_us", "forward_write_us",
                 "forward_writecdr_us"])  # fmt: skip
    cold = cold_python(counts["repeats"])
    print("\nthe backend's per-sample Python path (µs, median):")
    table(cold, ["python_path", "us"])
    traces = []
    if args.perf:
        for size in (65536, 262144):
            systems = ["ddsperf", *(["ddsperf-also"] if args.ddsperf_also else []), "dds"]
            traces += [trace(system, size, 300, args.ddsperf_also) for system in systems]
        print("\nround-trip timeline (µs from the ping's first datagram, medians):")
        table(traces, ["system", "bytes", "round_trips", "ping_out_us", "ping_preempted",
                       "echo_in_us", "echo_out_us", "echo_turn_us", "ping_in_us",
                       "rtt_p50_us", "ping_end_us"])  # fmt: skip
    report.update({"per_sample": rows, "cold_python": cold, "timeline": traces})
    finish(report, [], args)


if __name__ == "__main__":
    main()
