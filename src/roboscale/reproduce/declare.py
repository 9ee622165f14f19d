"""What the findings' declarations share: tolerances, metric names, and short ways to
write a figure."""

from __future__ import annotations

from roboscale.reproduce.model import Figure, Match, Pick, Ratio, Scalar

ABOUT_THE_SAME = 0.25  # "about the same", "almost the same": within ±25 %
MANY: list[Scalar] = [4, 5]  # the fan-out's most listeners: 4 in the quick variant, 5 in the full


def pick(experiment: str, metric: str, **where: Match) -> Pick:
    return Pick(experiment=experiment, where=where, metric=metric)


def ratio(num: Figure, den: Figure) -> Ratio:
    return Ratio(num=num, den=den)


RTT = "rtt_us.p50"
RTT_MEAN = "rtt_us.mean"
ONE_WAY = "one_way_us.p50"
SUSTAINED = "sustained"
EMULATED = "two emulated hosts (network namespaces) joined by the `{link}` link profile"


def ft(experiment: str, metric: str, **where: Match) -> Pick:
    """A figure of the face tracker's summary (facetrack.summary.<metric>)."""
    return pick(experiment, f"facetrack.summary.{metric}", **where)
