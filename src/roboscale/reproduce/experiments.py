"""The experiments that measure the seeds' findings: specs with the seeds' parameters,
and how their quick variants and the lab depart from them."""

from __future__ import annotations

from roboscale.reproduce.model import Experiment

EXPERIMENTS = [
    Experiment(
        id="thesis-knee",
        spec="experiments/thesis-knee.yaml",
        needs=["ros1"],
        quick_differs="1 and 4 kHz only, 2 s each (the full spec: 1-10 kHz, 10 s each)",
        full_differs="one host over loopback, not two Pis over Ethernet",
    ),
    Experiment(
        id="thesis-e2",
        spec="experiments/thesis-e2.yaml",
        backends=["ros1"],
        needs=["ros1"],
        runs=5,
        quick_differs="1 and 4 kHz, 300 messages (full: 1, 4, 7 and 10 kHz, 1,000)",
        full_differs="one host over loopback, not two Pis over Ethernet; the no-reboot "
        "side only, runs back to back",
    ),
    Experiment(
        id="thesis-e3-11b",
        spec="experiments/thesis-e3-11b.yaml",
        needs=["root", "ros1"],
        quick_differs="200, 1000 and 2000 Hz at 100 and 50 % CPU, 300 messages",
        full_differs="a CPU quota per emulated host stands for the Pi's underclocking",
    ),
    Experiment(
        id="thesis-e4-11b",
        spec="experiments/thesis-e4-11b.yaml",
        needs=["root", "ros1"],
        quick_differs="200, 1000 and 2000 Hz, 300 messages",
        full_differs="the Wi-Fi link is an emulation (25 Mbit/s shared channel), not radio",
    ),
    Experiment(
        id="thesis-e4-4kb",
        spec="experiments/thesis-e4.yaml",
        backends=["ros1"],
        needs=["root", "ros1"],
        quick_differs="4.25 KB only, 200, 400, 800, 1200 and 2000 Hz, 400 messages",
        full_differs="the Wi-Fi link is an emulation (25 Mbit/s shared channel), not radio",
    ),
    Experiment(
        id="thesis-e6",
        spec="experiments/thesis-e6.yaml",
        needs=["root", "ros1"],
        quick_differs="4.25 KB at 100, 300 and 600 Hz, 300 messages (full: 100-600 Hz by 50)",
        full_differs="the Wi-Fi link is an emulation (25 Mbit/s shared channel), not radio",
    ),
    Experiment(
        id="thesis-e5-sensor",
        spec="experiments/thesis-e5-sensor.yaml",
        needs=["root", "ros1"],
        quick_differs="400 and 1200 Hz at 100 and 50 % CPU, 300 messages",
        full_differs="generated 4.25 KB scans, not the Stata Center bag; a CPU quota "
        "stands for underclocking",
    ),
    Experiment(
        id="thesis-e5-video",
        spec="experiments/thesis-e5-video.yaml",
        needs=["root", "ros1"],
        quick_differs="20 and 40 Hz at 100 and 50 % CPU, 200 images, 10 s for late replies",
        full_differs="generated 308 KB images, not the Stata Center bag; a CPU quota "
        "stands for underclocking",
    ),
    Experiment(
        id="thesis-e7-100hz",
        spec="experiments/thesis-e7-100hz.yaml",
        needs=["root", "ros1"],
        quick_differs="400 messages per sender (full: the stream's 1194)",
        full_differs="generated 4.25 KB scans; emulated Wi-Fi",
    ),
    Experiment(
        id="thesis-e7-256",
        spec="experiments/thesis-e7-256.yaml",
        needs=["root", "ros1"],
        quick_differs="10 s per configuration (full: 30 s)",
        full_differs="64 and 128 pairs only; emulated Wi-Fi; both hosts share this machine",
    ),
    Experiment(
        id="thesis-e7-256-fast",
        spec="experiments/thesis-e7-256-fast.yaml",
        needs=["root", "ros1"],
        quick_differs="100 messages per sender (full: 1194)",
        full_differs="emulated Wi-Fi; both hosts share this machine",
    ),
    Experiment(
        id="labreport-size",
        spec="experiments/size-sweep.yaml",
        backends=["dds"],
        needs=["dds"],
        quick_differs="5 sizes at 50 Hz, 60 messages (full: 8 sizes at 10 Hz, 450)",
        full_differs="Cyclone DDS in ROS 2's wire format, not a ROS 2 install",
    ),
    Experiment(
        id="labreport-ping",
        spec="experiments/labreport-ping.yaml",
        backends=["dds"],
        needs=["dds"],
        quick_differs="256 B and 1 MB at 50 Hz, 60 messages (full: 5 sizes at 10 Hz, 450)",
        full_differs="Cyclone DDS in ROS 2's wire format, not a ROS 2 install",
    ),
    Experiment(
        id="labreport-chain",
        spec="experiments/labreport-chain.yaml",
        backends=["dds"],
        needs=["dds"],
        quick_differs="256 B and 1 MB at 50 Hz, 60 messages (full: 5 sizes at 10 Hz, 450)",
        full_differs="Cyclone DDS in ROS 2's wire format, not a ROS 2 install",
    ),
    Experiment(
        id="labreport-fanout",
        spec="experiments/labreport-fanout.yaml",
        backends=["dds"],
        needs=["dds"],
        quick_differs="1 and 4 listeners, 4 KB and 1 MB at 50 Hz, 60 messages "
        "(full: 1, 2, 5, 10 listeners, 5 sizes at 10 Hz, 450)",
        full_differs="Cyclone DDS in ROS 2's wire format, not a ROS 2 install",
    ),
    Experiment(
        id="labreport-q5-load",
        spec="experiments/labreport-q5.yaml",
        backends=["dds"],
        needs=["root", "dds"],
        quick_differs="256 B and 64 KB at 20 Hz, 0.5 core only, 40 messages",
        full_differs="a CPU quota, not frequency scaling; busy loops at half duty as the "
        "extra work load",
    ),
    Experiment(
        id="labreport-q5-noload",
        spec="experiments/labreport-q5-noload.yaml",
        backends=["dds"],
        needs=["root", "dds"],
        quick_differs="256 B and 64 KB at 20 Hz, 0.5 core only, 40 messages",
        full_differs="a CPU quota, not frequency scaling",
    ),
    Experiment(
        id="labreport-q6-levels",
        spec="experiments/labreport-q6-levels.yaml",
        needs=["root", "dds"],
        quick_differs="256 B, 256 KB and 512 KB, 40 messages (full: 5 sizes, 300)",
        full_differs="emulated Wi-Fi; the extra traffic is paced UDP between the hosts, "
        "not other stations' downloads",
    ),
    Experiment(
        id="labreport-q5-rt",
        spec="experiments/labreport-q5-rt.yaml",
        needs=["root", "dds"],
        quick_differs="256 B and 64 KB at 20 Hz, 60 messages (full: 5 sizes at 10 Hz, 450)",
        full_differs="one host; SCHED_FIFO at priority 10 for every node process, under "
        "heavy busy loops (0.75 duty)",
    ),
    Experiment(
        id="paper-restart",
        spec="experiments/paper-restart.yaml",
        stacks=["ros1", "erlang"],
        needs=["ros1", "erlang"],
        quick_differs="10 kills at 10 workers (full: 100 at 100; the paper: 200 at 100)",
        full_differs="a simulated camera; restart from the kill to the new worker started",
    ),
    Experiment(
        id="paper-restart-main",
        spec="experiments/paper-restart-main.yaml",
        needs=["ros1", "erlang"],
        quick_differs="30 frames (full: 50)",
        full_differs="the ROS main node's respawning part is the aggregator here (the "
        "harness plays the camera); one kill per trial",
    ),
    Experiment(
        id="paper-restart-supervisor",
        spec="experiments/paper-restart-supervisor.yaml",
        needs=["erlang"],
        quick_differs="30 frames (full: 50)",
        full_differs="SIGKILL's equivalent only: a supervisor traps exits, so the paper's "
        "SIGTERM row cannot be reproduced by a shutdown from outside the tree",
    ),
    Experiment(
        id="paper-quality",
        spec="experiments/paper-quality.yaml",
        stacks=["ros1", "erlang"],
        needs=["ros1", "erlang"],
        quick_differs="4 workers, 60 frames (full: 10 workers, 100 frames)",
        full_differs="a simulated camera over scikit-image's astronaut; random dispatch",
    ),
    Experiment(
        id="paper-latency",
        spec="experiments/paper-latency.yaml",
        stacks=["ros1", "erlang"],
        needs=["ros1", "erlang"],
        quick_differs="1, 4 and 16 workers, 40 frames (full: 1-64 workers, 100 frames)",
        full_differs="a simulated camera; latency from capture to camera command",
    ),
    Experiment(
        id="paper-memory-50",
        spec="experiments/paper-memory-50.yaml",
        needs=["ros1", "erlang"],
        quick_differs="20 frames (full: 30)",
        full_differs="PSS summed over a stack's processes",
    ),
    Experiment(
        id="paper-workers-held",
        spec="experiments/paper-workers-held.yaml",
        needs=["ros1", "erlang"],
        quick_differs="4, 16 and 64 workers, 20 frames (full: 8-256 workers, 30 frames)",
        full_differs="a simulated camera; a failure limit in one run of doubling workers, "
        "where the paper added workers until the stack failed",
    ),
    Experiment(
        id="paper-chaos-10-25",
        spec="experiments/paper-chaos-10-25.yaml",
        needs=["ros1", "erlang"],
        quick_differs="2 and 5 kills of 20 workers: the paper's 10 % and 25 %, 50 frames",
        full_differs="a simulated camera; a lost frame counts as Jaccard 0",
    ),
]

EXPERIMENT_BY_ID = {e.id: e for e in EXPERIMENTS}
