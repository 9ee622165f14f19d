"""The Erlang paper's findings (seed 004)."""

from __future__ import annotations

from roboscale.reproduce.declare import (
    ABOUT_THE_SAME,
    ft,
    ratio,
)
from roboscale.reproduce.model import (
    AtLeast,
    AtMost,
    Between,
    Check,
    Finding,
    Limit,
    Scalar,
    Within,
)

# Keeping up with the camera: no frame dropped, the median capture to command within 500 ms.
KEEPS_UP = {"facetrack.summary.frames_lost": 0.0, "facetrack.summary.latency_p50_ms": 500.0}


def findings() -> list[Finding]:
    restart, quality, latency = "paper-restart", "paper-quality", "paper-latency"
    chaos, held = "paper-chaos-10-25", "paper-workers-held"
    main, sup = "paper-restart-main", "paper-restart-supervisor"
    tenth: list[Scalar] = [2, 10]
    quarter: list[Scalar] = [5, 25]  # 10 % and 25 % of the workers: quick, full
    return [
        Finding(
            id="P-restart",
            seed="paper",
            section="Paper §4.4, Table 5",
            quote="ROS takes between 291ms and 420ms to restart a failed node, whereas Erlang "
            "restarts its processes in 0.224ms–0.368ms, which is approximately 0.06% to "  # noqa: RUF001
            "0.08% of the time taken by ROS.",
            parameters="face tracker workers killed 5 ms apart (the paper's '200 random "
            "terminations every 1 second') by SIGTERM and by SIGKILL, ros1 (roslaunch "
            "respawn) and erlang (one_for_one supervisor)",
            experiments=[restart],
            checks=[
                Check(
                    label="worker restart (kill to the new worker's init) p50, ros1 / erlang, "
                    f"{method.upper()}",
                    figure=ratio(
                        ft(restart, "restart_init_p50_ms", stack="ros1", kill_method=method),
                        ft(restart, "restart_init_p50_ms", stack="erlang", kill_method=method),
                    ),
                    rule=Between(low=938, high=2083),
                    unit="x",
                    seed_value=seed,
                )
                for method, seed in (
                    ("sigterm", "369 / 0.224 = 1,647x"),
                    ("sigkill", "291 / 0.249 = 1,169x"),
                )
            ],
            reading="0.06-0.08 % is 1,250-1,667x; the rule allows ±25 % around that range "
            "(938-2,083x), for each kill method. Restart is timed, as the paper's, from the "
            "kill to the new worker's init (SEED-NOTES), not to its detector being ready",
        ),
        Finding(
            id="P-restart-main-supervisor",
            seed="paper",
            section="Paper §4.4, Table 5",
            quote="ROS Main node 420ms 400ms [...] Erlang Supervisor process 0.368ms 0.352ms "
            "[SIGTERM, SIGKILL]",
            parameters="one kill of the aggregator (ros1: respawned by roslaunch; erlang: by "
            "aggregator_supervisor) by SIGTERM and SIGKILL, and of each Erlang supervisor "
            "by exit kill, 10 workers. The ROS stack here has no single main node: the "
            "paper's face_tracking_main held the camera, the dispatch and the aggregator in "
            "one script, and here the harness plays the camera, so the aggregator node, "
            "the main node's respawned part, **stands in for the main node**",
            experiments=[main, sup],
            checks=[
                *[
                    Check(
                        label=f"ros1 aggregator (for the main node) restart, {method.upper()}",
                        figure=ft(main, "restart_init_p50_ms", stack="ros1", kill_method=method),
                        rule=Within(target=seed, tolerance=ABOUT_THE_SAME),
                        unit=" ms",
                        seed_value=f"{seed:g} ms (main node)",
                    )
                    for method, seed in (("sigterm", 420.0), ("sigkill", 400.0))
                ],
                *[
                    Check(
                        label=f"erlang aggregator restart, {method.upper()}",
                        figure=ft(main, "restart_init_p50_ms", stack="erlang", kill_method=method),
                        rule=Within(target=seed, tolerance=ABOUT_THE_SAME),
                        unit=" ms",
                        seed_value=f"{seed:g} ms (worker and aggregator)",
                    )
                    for method, seed in (("sigterm", 0.224), ("sigkill", 0.249))
                ],
                *[
                    Check(
                        label=f"erlang {target} restart, SIGKILL",
                        figure=ft(sup, "restart_init_p50_ms", kill_target=target),
                        rule=Within(target=0.352, tolerance=ABOUT_THE_SAME),
                        unit=" ms",
                        seed_value="0.352 ms (supervisor)",
                    )
                    for target in ("face_supervisor", "aggregator_supervisor")
                ],
            ],
            reading="each restart (kill to the new process's init) about the paper's (within "
            "±25 %); the paper's SIGTERM "
            "supervisor row (0.368 ms) has no counterpart: an OTP supervisor outlives a "
            "shutdown sent from outside its tree",
        ),
        Finding(
            id="P-quality-deque",
            seed="paper",
            section="Paper §4.3, Table 4",
            quote="if aggregation is performed, the values of J_Q drops with each increase in "
            "dequeue size. [Table 4, ROS: 0.947, 0.591, 0.285 at 1, 5, 10]",
            parameters="random dispatch, deque lengths 1, 5, 10, ros1 and erlang",
            experiments=[quality],
            checks=[
                Check(
                    label="mean Jaccard, deque 10 / deque 1, ros1",
                    figure=ratio(
                        ft(quality, "mean_jaccard", stack="ros1", deque_len=10),
                        ft(quality, "mean_jaccard", stack="ros1", deque_len=1),
                    ),
                    rule=Within(target=0.30, tolerance=ABOUT_THE_SAME),
                    unit="x",
                    seed_value="0.285 / 0.947 = 0.30x",
                ),
                Check(
                    label="mean Jaccard at deque 5, erlang / ros1",
                    figure=ratio(
                        ft(quality, "mean_jaccard", stack="erlang", deque_len=5),
                        ft(quality, "mean_jaccard", stack="ros1", deque_len=5),
                    ),
                    rule=Within(target=1.0, tolerance=0.1),
                    unit="x",
                    seed_value="0.608 / 0.591 = 1.03x",
                ),
            ],
            reading="the drop as large as the paper's (within ±25 % of 0.30x), and 'no "
            "significant difference' between stacks: within ±10 % (the paper's differences "
            "are at most 5.6 %)",
        ),
        Finding(
            id="P-quality-workers",
            seed="paper",
            section="Paper §4.3, Table 4",
            quote="there is no significant difference between the quality indices resulting "
            "from ROS and Erlang programs [...] Erlang's ability as a middleware to support "
            "application functions is not hindered by growth in the number of worker "
            "processes.",
            parameters="mean Jaccard at 1 and 16 workers, deque 5, random dispatch, ros1 and "
            "erlang (the paper: 1, 100 and 200 workers, broadcast; 100 and 200 workers need "
            "the full spec's memory, and this machine holds fewer ROS workers)",
            experiments=[latency],
            checks=[
                *[
                    Check(
                        label=f"{stack} mean Jaccard, 16 / 1 workers",
                        figure=ratio(
                            ft(latency, "mean_jaccard", stack=stack, workers=16),
                            ft(latency, "mean_jaccard", stack=stack, workers=1),
                        ),
                        rule=AtLeast(bound=0.9),
                        unit="x",
                        seed_value="not hindered",
                    )
                    for stack in ("erlang", "ros1")
                ],
                Check(
                    label="mean Jaccard at 16 workers, erlang / ros1",
                    figure=ratio(
                        ft(latency, "mean_jaccard", stack="erlang", workers=16),
                        ft(latency, "mean_jaccard", stack="ros1", workers=16),
                    ),
                    rule=Within(target=1.0, tolerance=0.1),
                    unit="x",
                    seed_value="no significant difference",
                ),
            ],
            reading="'not hindered by growth in the number of workers': at 16 workers at "
            "least 90 % of the quality at 1; 'no significant difference': within ±10 % (the "
            "paper's differences are at most 5.6 %)",
        ),
        Finding(
            id="P-latency-workers",
            seed="paper",
            section="Paper §4.2, Figure 5",
            quote="On a small scale of up to 9 nodes the total message latency is identical "
            "in both ROS and Erlang systems, and is ~ 37 milliseconds [...] starting at 9 "
            "workers the time increases sharply for the Erlang system, while the ROS system "
            "demonstrates constant time",
            parameters="capture-to-command latency at 4 and 16 workers, ros1 and erlang",
            experiments=[latency],
            checks=[
                Check(
                    label="latency p50 at 4 workers, erlang / ros1",
                    figure=ratio(
                        ft(latency, "latency_p50_ms", stack="erlang", workers=4),
                        ft(latency, "latency_p50_ms", stack="ros1", workers=4),
                    ),
                    rule=Within(target=1.0, tolerance=ABOUT_THE_SAME),
                    unit="x",
                    seed_value="identical",
                ),
                Check(
                    label="ros1 latency p50 at 4 workers",
                    figure=ft(latency, "latency_p50_ms", stack="ros1", workers=4),
                    rule=Within(target=37, tolerance=ABOUT_THE_SAME),
                    unit=" ms",
                    seed_value="~37 ms",
                ),
                Check(
                    label="ros1 latency p50, 16 / 4 workers",
                    figure=ratio(
                        ft(latency, "latency_p50_ms", stack="ros1", workers=16),
                        ft(latency, "latency_p50_ms", stack="ros1", workers=4),
                    ),
                    rule=Within(target=1.0, tolerance=ABOUT_THE_SAME),
                    unit="x",
                    seed_value="constant",
                ),
                Check(
                    label="erlang latency p50, 16 / 4 workers",
                    figure=ratio(
                        ft(latency, "latency_p50_ms", stack="erlang", workers=16),
                        ft(latency, "latency_p50_ms", stack="erlang", workers=4),
                    ),
                    rule=AtLeast(bound=1 + ABOUT_THE_SAME),
                    unit="x",
                    seed_value="increases sharply",
                ),
            ],
            reading="'identical' and 'constant': within ±25 %; '~37 ms': within ±25 %; "
            "'increases sharply': at least 25 % more",
        ),
        Finding(
            id="P-memory-50",
            seed="paper",
            section="Paper §4.1, Table 3",
            quote="Total: 2,564 MB Total: 1,300 MB [...] while consuming half of the memory",
            parameters="50 workers, PSS summed over each stack's processes",
            experiments=["paper-memory-50"],
            checks=[
                Check(
                    label="memory at 50 workers, erlang / ros1",
                    figure=ratio(
                        ft("paper-memory-50", "pss_total_mb", stack="erlang"),
                        ft("paper-memory-50", "pss_total_mb", stack="ros1"),
                    ),
                    rule=Within(target=0.507, tolerance=ABOUT_THE_SAME),
                    unit="x",
                    seed_value="1,300 / 2,564 = 0.507x",
                ),
            ],
            reading="'half of the memory': within ±25 % of the paper's 0.507x",
        ),
        Finding(
            id="P-workers-held",
            seed="paper",
            section="Paper §4.1, Figure 4",
            quote="Erlang communication provides at least 3.5 times larger scalability (200 "
            "ROS nodes against 700 Erlang processes)",
            parameters="workers doubled until a stack drops a frame or its capture-to-command "
            "median passes 500 ms, at 10 frames/s, ros1 and erlang",
            experiments=[held],
            checks=[
                Check(
                    label="workers held, erlang / ros1",
                    figure=ratio(
                        Limit(
                            experiment=held,
                            where={"stack": "erlang"},
                            axis="workers",
                            bounds=KEEPS_UP,
                        ),
                        Limit(
                            experiment=held,
                            where={"stack": "ros1"},
                            axis="workers",
                            bounds=KEEPS_UP,
                        ),
                    ),
                    rule=AtLeast(bound=3.5),
                    unit="x",
                    seed_value="700 / 200 = 3.5x",
                ),
                *[
                    Check(
                        label=f"workers held by {stack}",
                        figure=Limit(
                            experiment=held, where={"stack": stack}, axis="workers", bounds=KEEPS_UP
                        ),
                        rule=AtLeast(bound=seed),
                        seed_value=f"{seed:,}",
                    )
                    for stack, seed in (("ros1", 200), ("erlang", 700))
                ],
            ],
            reading="'at least 3.5 times': the limits' ratio at least 3.5x; each stack's limit "
            "judged against the paper's count too",
        ),
        Finding(
            id="P-chaos-10-25",
            seed="paper",
            section="Paper §4.5, Figures 6-7",
            quote="In the case of the 10-failure tests (Figure 6) and the 25-failure tests "
            "(Figure 7), the Erlang application indicates no face quality penalties [...] "
            "This, however, does not hold for the ROS program",
            parameters="10 % and 25 % of the workers killed at once, SIGTERM and SIGKILL, "
            "ros1 and erlang",
            experiments=[chaos],
            checks=[
                Check(
                    label=f"mean Jaccard after {share} killed / none killed, {stack}, "
                    f"{method.upper()}",
                    figure=ratio(
                        ft(chaos, "mean_jaccard", stack=stack, kills=kills, kill_method=method),
                        ft(chaos, "mean_jaccard", stack=stack, kills=0),
                    ),
                    rule=AtLeast(bound=0.95) if stack == "erlang" else AtMost(bound=0.95),
                    unit="x",
                    seed_value="no penalty" if stack == "erlang" else "loses quality",
                )
                for stack in ("erlang", "ros1")
                for share, kills in (("10 %", tenth), ("25 %", quarter))
                for method in ("sigterm", "sigkill")
            ],
            reading="'no face quality penalties': Erlang keeps at least 95 % of its quality "
            "without kills; ROS loses more than 5 %",
        ),
    ]
