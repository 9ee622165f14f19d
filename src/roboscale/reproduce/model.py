"""What a reproduced finding is, as data: the experiments that measure it, the figures
computed from their results, and the rules that judge them against the seed's words.

Every model here is typed, frozen and versioned where it crosses a file (`RunRecord`,
written beside each run's summaries under docs/reproduction/).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

FORMAT_VERSION = 1
Scalar = str | int | float | bool | None
Match = Scalar | list[Scalar]  # a list: any of these (a quick variant's value, the full one's)
SEEDS = ("thesis", "labreport", "paper")
Seed = Literal["thesis", "labreport", "paper"]
ID = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


class Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Experiment(Frozen):
    """A spec run by the lab, as `roboscale bench SPEC [--quick] --backend ...` would."""

    id: str = Field(pattern=ID)
    spec: str  # relative to the repository: experiments/<name>.yaml
    backends: list[str] | None = None  # --backend, else the spec's
    stacks: list[str] | None = None  # --stack, else the spec's
    needs: list[str] = []  # what must be present: "root", a backend or a stack name
    runs: int | None = None  # the seed's own number of runs, else --runs
    quick_differs: str = ""  # how --quick departs from the seed's parameters
    full_differs: str = ""  # how the full spec departs from them


# Figures. Each is computed once per run of its experiments, from summary.json entries.
class Pick(Frozen):
    """One number of the one trial of `experiment` whose parameters match `where`.

    `metric` is a dotted path into the summary entry ("one_way_us.p50",
    "facetrack.restart_p50_ms") or a derived figure (METRICS in figures.py)."""

    kind: Literal["pick"] = "pick"
    experiment: str
    where: dict[str, Match]
    metric: str


class Knee(Frozen):
    """The highest `axis` value at which this and every lower value's trial was
    sustained (the lab's verdict), among the trials matching `where`; 0 when the lowest
    was not."""

    kind: Literal["knee"] = "knee"
    experiment: str
    where: dict[str, Match]
    axis: str = "rate_hz"


class Limit(Frozen):
    """The highest `axis` value at which this and every lower value's trial ran and kept
    each metric of `bounds` at or below its bound (a failure limit: "add workers until it
    stops keeping up"); 0 when the lowest did not; no figure when every count held (the
    limit lies above the sweep)."""

    kind: Literal["limit"] = "limit"
    experiment: str
    where: dict[str, Match]
    axis: str
    bounds: dict[str, float]


class Unsustained(Frozen):
    """How many of the trials matching `where` were not sustained."""

    kind: Literal["unsustained"] = "unsustained"
    experiment: str
    where: dict[str, Match]


class Ratio(Frozen):
    kind: Literal["ratio"] = "ratio"
    num: Figure
    den: Figure


class Difference(Frozen):
    kind: Literal["difference"] = "difference"
    a: Figure
    b: Figure


Figure = Annotated[
    Pick | Knee | Limit | Unsustained | Ratio | Difference, Field(discriminator="kind")
]


# Rules: the test a run's figure passes to agree with the seed.
class Within(Frozen):
    """|figure / target - 1| <= tolerance: "about the same as"."""

    kind: Literal["within"] = "within"
    target: float
    tolerance: float = Field(gt=0, lt=1)


class Between(Frozen):
    kind: Literal["between"] = "between"
    low: float
    high: float


class AtLeast(Frozen):
    kind: Literal["at_least"] = "at_least"
    bound: float


class AtMost(Frozen):
    kind: Literal["at_most"] = "at_most"
    bound: float


Rule = Annotated[Within | Between | AtLeast | AtMost, Field(discriminator="kind")]


class Check(Frozen):
    """One figure of a finding and the rule it must meet."""

    label: str  # what the figure is, in words: "p50 RTT at 50 % / 100 % CPU, 200 Hz"
    figure: Figure
    rule: Rule
    unit: str = ""  # "x", "ms", "Hz", ...
    seed_value: str = ""  # the seed's own figure, as it gave it


class Finding(Frozen):
    id: str = Field(pattern=ID)
    seed: Seed
    section: str  # "Thesis §3.1.3 (E3)"
    quote: str  # the seed's own words
    parameters: str  # the seed's parameters, and ours
    experiments: list[str] = []  # Experiment ids; none: the lab cannot measure it yet
    checks: list[Check] = []
    reading: str  # why the rules say what the quote says
    by_construction: str = ""  # when agreement follows from a calibration, how
    cannot_run: str = ""  # why no experiment can measure it here (a knob we cannot turn)
    no_result: str = ""  # why the seed gives nothing to judge (a proposal never run)


class LoadStats(Frozen):
    """The 1-minute load average before, at most during and after one run."""

    cores: int
    before: float
    max: float
    after: float
    samples: int


class OtherWork(Frozen):
    """CPU time other processes took during one run (busy.py says how it is measured)."""

    wall_s: float
    machine_cpu_s: float  # every process on the machine, all cores
    own_cpu_s: float  # the run's own process tree
    other_cpu_s: float  # the difference, never below zero
    other_cores: float  # other_cpu_s / wall_s: cores' worth of other work on average
    threshold_cores: float  # above this the run is marked busy


class RunRecord(Frozen):
    """reproduce.json: how one run of an experiment was taken. Version 2 adds `other`
    (version 1 marked busy from the load average alone)."""

    format_version: Literal[1, 2] = 2
    experiment: str
    run: int
    quick: bool
    command: str
    spec: str
    start_unix_s: float
    end_unix_s: float
    load: LoadStats
    other: OtherWork | None = None  # None in version 1
    busy: bool
    trials: int
    failed: int


Ratio.model_rebuild()
Difference.model_rebuild()
