"""The lab report's findings (seed 003)."""

from __future__ import annotations

from roboscale.reproduce.declare import (
    ABOUT_THE_SAME,
    MANY,
    ONE_WAY,
    RTT,
    pick,
    ratio,
)
from roboscale.reproduce.model import (
    AtLeast,
    AtMost,
    Check,
    Difference,
    Finding,
    Within,
)


def findings() -> list[Finding]:
    ping, chain, fan = "labreport-ping", "labreport-chain", "labreport-fanout"
    increment = {
        size: Difference(
            a=pick(ping, RTT, ack=True, payload=size),
            b=pick(ping, ONE_WAY, ack=False, payload=size),
        )
        for size in ("256B", "1MB")
    }
    q6, rt = "labreport-q6-levels", "labreport-q5-rt"
    return [
        Finding(
            id="LR-size-grows",
            seed="labreport",
            section="Lab report Q1 (the size sweep)",
            quote="While the growing trend of transport time is still obvious",
            parameters="one publisher and one echoer, 256 B to 4 MB, reliable QoS, dds",
            experiments=["labreport-size"],
            checks=[
                Check(
                    label="p50 RTT, 4 MB / 256 B",
                    figure=ratio(
                        pick("labreport-size", RTT, payload="4MB"),
                        pick("labreport-size", RTT, payload="256B"),
                    ),
                    rule=AtLeast(bound=2),
                    unit="x",
                    seed_value="grows",
                ),
                Check(
                    label="p50 RTT, 64 KB / 256 B",
                    figure=ratio(
                        pick("labreport-size", RTT, payload="64KB"),
                        pick("labreport-size", RTT, payload="256B"),
                    ),
                    rule=AtLeast(bound=1.0),
                    unit="x",
                    seed_value="grows",
                ),
            ],
            reading="latency grows with size: 4 MB at least twice 256 B, and 64 KB no "
            "faster than 256 B",
        ),
        Finding(
            id="LR-fanout-large",
            seed="labreport",
            section="Lab report Q7, conclusion 2",
            quote="While delivering small size data, the amount of nodes will not affect much "
            "on the transport time of communication. While transporting big size data, the "
            "consuming time will grow fast",
            parameters="one publisher, 1 and 4 listeners, 4 KB and 1 MB, dds",
            experiments=[fan],
            checks=[
                Check(
                    label="one-way p50, 4 listeners / 1, at 4 KB",
                    figure=ratio(
                        pick(fan, ONE_WAY, listeners=MANY, payload="4KB"),
                        pick(fan, ONE_WAY, listeners=1, payload="4KB"),
                    ),
                    rule=Within(target=1.0, tolerance=ABOUT_THE_SAME),
                    unit="x",
                    seed_value="not much",
                ),
                Check(
                    label="one-way p50, 4 listeners / 1, at 1 MB",
                    figure=ratio(
                        pick(fan, ONE_WAY, listeners=MANY, payload="1MB"),
                        pick(fan, ONE_WAY, listeners=1, payload="1MB"),
                    ),
                    rule=AtLeast(bound=1.25),
                    unit="x",
                    seed_value="grows fast",
                ),
            ],
            reading="'not much' for small messages: within ±25 %; 'grow fast' for large "
            "ones: at least 25 % more with 4 listeners",
        ),
        Finding(
            id="LR-listener-sync",
            seed="labreport",
            section="Lab report Q7, conclusion 1",
            quote="ROS2 can preserve the synchronization when facing multiple destination "
            "communication task. Each node consumes almost same time to fully subscribe the "
            "content from the published topic.",
            parameters="one publisher, 4 listeners, 1 MB, dds",
            experiments=[fan],
            checks=[
                Check(
                    label="one message's arrival spread across 4 listeners (last - first), "
                    "p50 / one-way p50, 1 MB",
                    figure=ratio(
                        pick(fan, "flow.arrival_spread_us.p50", listeners=MANY, payload="1MB"),
                        pick(fan, ONE_WAY, listeners=MANY, payload="1MB"),
                    ),
                    rule=AtMost(bound=ABOUT_THE_SAME),
                    unit="x",
                    seed_value="almost same time",
                ),
                Check(
                    label="slowest / fastest listener's one-way p50, 4 listeners, 1 MB",
                    figure=pick(fan, "listener_p50_spread", listeners=MANY, payload="1MB"),
                    rule=AtMost(bound=1 + ABOUT_THE_SAME),
                    unit="x",
                    seed_value="almost the same",
                ),
            ],
            reading="'almost same time': one message reaches its last listener within a "
            "quarter of its latency after its first (median over messages), and every "
            "listener's median is within 25 % of the fastest's",
        ),
        Finding(
            id="LR-hop-ping",
            seed="labreport",
            section="Lab report Q8, chain phenomenon 1",
            quote="The median of each step of chain communication and the ping communication "
            "in Question 1 are almost the same.",
            parameters="a 5-node chain and a ping, 256 B and 1 MB, dds",
            experiments=[chain, ping],
            checks=[
                Check(
                    label=f"median hop p50 / ping one-way p50, {size}",
                    figure=ratio(
                        pick(chain, "hop_p50_median", payload=size),
                        pick(ping, ONE_WAY, ack=False, payload=size),
                    ),
                    rule=Within(target=1.0, tolerance=ABOUT_THE_SAME),
                    unit="x",
                    seed_value="almost the same",
                )
                for size in ("256B", "1MB")
            ],
            reading="'almost the same': within ±25 %",
        ),
        Finding(
            id="LR-hops-equal",
            seed="labreport",
            section="Lab report Q8, chain phenomenon 2",
            quote="The median of each step of chain communication are almost the same.",
            parameters="a 5-node chain, 256 B and 1 MB, dds",
            experiments=[chain],
            checks=[
                Check(
                    label=f"slowest / fastest hop p50, {size}",
                    figure=pick(chain, "hop_p50_spread", payload=size),
                    rule=AtMost(bound=1 + ABOUT_THE_SAME),
                    unit="x",
                    seed_value="almost the same",
                )
                for size in ("256B", "1MB")
            ],
            reading="'almost the same': the slowest hop's median within 25 % of the fastest's",
        ),
        Finding(
            id="LR-chain-additive",
            seed="labreport",
            section="Lab report Q8, chain phenomenon 4",
            quote="The median of latency of A to E is almost the linear addition of the "
            "median of time of the same step.",
            parameters="a 5-node chain, 256 B and 1 MB, dds",
            experiments=[chain],
            checks=[
                Check(
                    label=f"end-to-end p50 / sum of hop p50s, {size}",
                    figure=ratio(
                        pick(chain, ONE_WAY, payload=size),
                        pick(chain, "hop_p50_sum", payload=size),
                    ),
                    rule=Within(target=1.0, tolerance=ABOUT_THE_SAME),
                    unit="x",
                    seed_value="almost the sum",
                )
                for size in ("256B", "1MB")
            ],
            reading="'almost the linear addition': within ±25 % of the sum",
        ),
        Finding(
            id="LR-step-outliers",
            seed="labreport",
            section="Lab report Q8, chain phenomenon 3",
            quote="In each step of chain communication, there are more outliers than the "
            "result from Question 1.",
            parameters="a 5-node chain and a ping, 1 MB, dds",
            experiments=[chain, ping],
            checks=[
                Check(
                    label="share of box-plot outliers, median hop / ping, 1 MB",
                    figure=ratio(
                        pick(chain, "outlier_share_median", payload="1MB"),
                        pick(ping, "outlier_share_median", ack=False, payload="1MB"),
                    ),
                    rule=AtLeast(bound=1.0),
                    unit="x",
                    seed_value="more outliers",
                ),
                Check(
                    label="median hop p99/p50 over ping's p99/p50, 1 MB",
                    figure=ratio(
                        pick(chain, "hop_tail_median", payload="1MB"),
                        pick(ping, "tail", ack=False, payload="1MB"),
                    ),
                    rule=AtLeast(bound=1.0),
                    unit="x",
                    seed_value="more outliers",
                ),
            ],
            reading="'more outliers': a hop's share of values beyond the box plot's whiskers "
            "(Q1 - 1.5 IQR, Q3 + 1.5 IQR: the report's box plots) at least a ping's, and its "
            "tail (p99 over p50) at least as long",
        ),
        Finding(
            id="LR-pingpong-increment",
            seed="labreport",
            section="Lab report Q8, ping-pong",
            quote="Although the size of the acknowledgement message remains unchanged, the "
            "increment is different. The larger the data size, the longer the increment of "
            "latency.",
            parameters="ping and ping-pong (a few-byte acknowledgement), 256 B and 1 MB, dds",
            experiments=[ping],
            checks=[
                Check(
                    label="(ping-pong RTT p50 - ping one-way p50) at 1 MB / at 256 B",
                    figure=ratio(increment["1MB"], increment["256B"]),
                    rule=AtLeast(bound=1.0),
                    unit="x",
                    seed_value="longer for larger sizes",
                ),
                Check(
                    label="the acknowledgement's way back per message (RTT - one-way), p50, "
                    "1 MB / 256 B",
                    figure=ratio(
                        pick(ping, "flow.ack_return_us.p50", ack=True, payload="1MB"),
                        pick(ping, "flow.ack_return_us.p50", ack=True, payload="256B"),
                    ),
                    rule=AtLeast(bound=1.0),
                    unit="x",
                    seed_value="longer for larger sizes",
                ),
            ],
            reading="the increment grows with size: larger at 1 MB than at 256 B, between "
            "trials (ping-pong against ping) and within the ping-pong trials (the ack's way "
            "back)",
        ),
        Finding(
            id="LR-q5-load",
            seed="labreport",
            section="Lab report Q5, conclusion 1",
            quote="the absence of extra work load can also lead to a smaller transport time.",
            parameters="ping on two emulated hosts over Ethernet, 0.5 core each, with busy "
            "loops at half duty against none, 256 B and 64 KB, dds",
            experiments=["labreport-q5-load", "labreport-q5-noload"],
            checks=[
                Check(
                    label=f"ping one-way p50 with load / without, {size}",
                    figure=ratio(
                        pick("labreport-q5-load", ONE_WAY, workload="ping", cpu=0.5, payload=size),
                        pick(
                            "labreport-q5-noload", ONE_WAY, workload="ping", cpu=0.5, payload=size
                        ),
                    ),
                    rule=AtLeast(bound=1.0),
                    unit="x",
                    seed_value="smaller without load",
                )
                for size in ("256B", "64KB")
            ],
            reading="'smaller transport time' without load: the loaded median at least the "
            "unloaded one",
        ),
        Finding(
            id="LR-q5-realtime",
            seed="labreport",
            section="Lab report Q5, conclusion 1",
            quote="Real-time property can shorten the transport time",
            parameters="ping on this machine as normal processes against SCHED_FIFO ones "
            "(the priority axis), under heavy busy loops, 256 B and 64 KB, dds",
            experiments=[rt],
            checks=[
                Check(
                    label=f"ping one-way p50, SCHED_FIFO / normal, {size}",
                    figure=ratio(
                        pick(rt, ONE_WAY, priority="fifo", payload=size),
                        pick(rt, ONE_WAY, priority="normal", payload=size),
                    ),
                    rule=AtMost(bound=1.0),
                    unit="x",
                    seed_value="shorter",
                )
                for size in ("256B", "64KB")
            ],
            reading="'shorten': the real-time median at most the normal one",
        ),
        Finding(
            id="LR-q5-freq-scaling",
            seed="labreport",
            section="Lab report Q5, conclusion 2",
            quote="Turning on the CPU frequency scaling can accelerate the communication, "
            "leading to overall small delivering time.",
            parameters="ping with the CPU frequency governor on and off",
            reading="frequency scaling on shortens the median",
            cannot_run="this machine is a VM without /sys/devices/system/cpu/cpu0/cpufreq: "
            "its CPU frequency governor cannot be turned",
        ),
        Finding(
            id="LR-q6-jump",
            seed="labreport",
            section="Lab report Q6",
            quote="There is a big jump on the latency from 256 Kbytes to 512 Kbytes",
            parameters="ping over `wifi` with no, normal (5 Mbit/s) and heavy (15 Mbit/s) "
            "extra traffic, 256 KB and 512 KB at 10 Hz, dds",
            experiments=[q6],
            checks=[
                Check(
                    label=f"ping one-way p50, 512 KB / 256 KB, {level} traffic",
                    figure=ratio(
                        pick(q6, ONE_WAY, traffic=level, payload="512KB"),
                        pick(q6, ONE_WAY, traffic=level, payload="256KB"),
                    ),
                    rule=AtLeast(bound=4),
                    unit="x",
                    seed_value="a big jump",
                )
                for level in ("none", "normal", "heavy")
            ]
            + [
                Check(
                    label="share of 512 KB pings that arrived within the trial, no traffic",
                    figure=pick(q6, "delivered", traffic="none", payload="512KB"),
                    rule=AtMost(bound=0.5),
                    seed_value="could not finish in hours",
                )
            ],
            reading="'a big jump': at least twice what doubling the bytes alone gives (2x); "
            "where the 512 KB pings never arrive (no median), at most half of them arriving "
            "within the trial (its latency beyond the trial) is the jump",
            by_construction="512 KB at 10 Hz (42 Mbit/s) exceeds the wifi profile's 25 Mbit/s "
            "channel while 256 KB (21 Mbit/s) does not, alone; so a queue must grow",
        ),
        Finding(
            id="LR-q6-graded",
            seed="labreport",
            section="Lab report Q6, finding 1",
            quote="When the message size is relatively small (less than 512 kilobytes), the "
            "workload always deteriorates the performance.",
            parameters="ping over `wifi` with no, normal (5 Mbit/s) and heavy (15 Mbit/s) "
            "extra traffic (the traffic axis), 256 B at 10 Hz, dds",
            experiments=[q6],
            checks=[
                Check(
                    label=f"ping one-way p50 at 256 B, {level} traffic / none",
                    figure=ratio(
                        pick(q6, ONE_WAY, traffic=level, payload="256B"),
                        pick(q6, ONE_WAY, traffic="none", payload="256B"),
                    ),
                    rule=AtLeast(bound=1.0),
                    unit="x",
                    seed_value="deteriorates",
                )
                for level in ("normal", "heavy")
            ],
            reading="'always deteriorates': each level's median at least the median without",
        ),
    ]
