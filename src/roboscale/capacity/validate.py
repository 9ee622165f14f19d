"""How well each model predicts the maximum node count on trials it never saw.

Leave one configuration out: a configuration is (payload, rate); every run and
every N of it is held out together, the models are refitted on the rest, and
their predicted max N is compared with the measured one. The measured max N of a
configuration is the largest sustained N below its smallest unsustained N; a
configuration with no unsustained N (censored) or no sustained N is not scored.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from roboscale.capacity.data import Observation
from roboscale.capacity.models import FITTERS, INTERVAL, MODEL_NAMES, FittedModel, max_nodes
from roboscale.errors import UserError

Config = tuple[int, float, bool]  # payload bytes, rate, numeric array
Fitter = Callable[[str, Sequence[Observation]], FittedModel]


@dataclass(frozen=True)
class MeasuredMax:
    max_nodes: int | None  # largest sustained N below the first unsustained N
    first_unsustained: int | None
    note: str | None  # why it cannot be scored, if it cannot


def measured_max_nodes(obs: Sequence[Observation]) -> MeasuredMax:
    """A configuration's measured limit: an N with any unsustained run counts as unsustained."""
    bad = [o.nodes for o in obs if not o.sustained]
    first_bad = min(bad) if bad else None
    good = [o.nodes for o in obs if o.sustained and (first_bad is None or o.nodes < first_bad)]
    best = max(good) if good else None
    if first_bad is None:
        return MeasuredMax(best, None, "censored: every N was sustained")
    if best is None:
        return MeasuredMax(None, first_bad, f"no sustained N below {first_bad}")
    return MeasuredMax(best, first_bad, None)


@dataclass(frozen=True)
class Fold:
    config: Config
    train: tuple[Observation, ...]
    test: tuple[Observation, ...]


def folds(obs: Sequence[Observation]) -> list[Fold]:
    """One fold per configuration: its trials are the test set, all others the training set."""
    configs = sorted({o.config for o in obs})
    return [
        Fold(
            c,
            tuple(o for o in obs if o.config != c),
            tuple(o for o in obs if o.config == c),
        )
        for c in configs
    ]


@dataclass(frozen=True)
class Row:
    model: str
    payload_bytes: int
    rate_hz: float
    measured: int | None
    first_unsustained: int | None
    predicted: float | None
    low: float | None
    high: float | None
    rel_error: float | None
    in_bracket: bool | None  # measured <= predicted < first unsustained
    note: str | None = None
    numeric: bool = False  # the payload is an array of numbers (a laserscan)

    @property
    def size_label(self) -> str:
        return f"{self.payload_bytes} numeric" if self.numeric else str(self.payload_bytes)


@dataclass
class Validation:
    rows: list[Row] = field(default_factory=list)

    def median_error(self, model: str) -> float | None:
        errors = [r.rel_error for r in self.rows if r.model == model and r.rel_error is not None]
        return statistics.median(errors) if errors else None

    def scored(self, model: str) -> int:
        return sum(r.model == model and r.rel_error is not None for r in self.rows)

    def headline(self) -> list[tuple[str, str]]:
        """Per model, in row order: (model, "median |relative error| of max N = ... over ...")."""
        out = []
        for name in dict.fromkeys(r.model for r in self.rows):
            med = self.median_error(name)
            text = "-" if med is None else f"{med:.1%}"
            out.append((name, f"median |relative error| of max N = {text} "
                              f"over {self.scored(name)} configurations"))  # fmt: skip
        return out

    def to_dict(self) -> dict[str, object]:
        names = sorted({r.model for r in self.rows}, key=_model_order)
        return {
            "median_abs_rel_error": {m: self.median_error(m) for m in names},
            "scored_configurations": {m: self.scored(m) for m in names},
            "rows": [asdict(r) for r in self.rows],
        }


def _model_order(name: str) -> int:
    return MODEL_NAMES.index(name) if name in MODEL_NAMES else len(MODEL_NAMES)


def score(model: FittedModel, config: Config, measured: MeasuredMax) -> Row:
    """Compare one model's max N at a configuration with the measured max N."""
    size, rate, numeric = config
    point, draws = max_nodes(model, float(size), rate, numeric)
    finite = draws[~np.isnan(draws)]
    low, high = point, point
    if finite.size:
        low, high = (float(v) for v in np.percentile(finite, INTERVAL, method="inverted_cdf"))
    rel: float | None = None
    in_bracket: bool | None = None
    best = measured.max_nodes
    if measured.note is None and best is not None:
        rel = abs(point - best) / best if math.isfinite(point) else math.inf
        upper = measured.first_unsustained
        in_bracket = best <= point < (upper if upper is not None else math.inf)
    return Row(
        model=model.name,
        payload_bytes=size,
        rate_hz=rate,
        measured=best,
        first_unsustained=measured.first_unsustained,
        predicted=point,
        low=low,
        high=high,
        rel_error=rel,
        in_bracket=in_bracket,
        note=measured.note,
        numeric=numeric,
    )


def default_fitter(draws: int, seed: int) -> Fitter:
    def fit(name: str, train: Sequence[Observation]) -> FittedModel:
        return FITTERS[name](train, draws=draws, seed=seed)

    return fit


def cross_validate(
    obs: Sequence[Observation],
    *,
    models: Sequence[str] = MODEL_NAMES,
    fit: Fitter | None = None,
    draws: int = 50,
    seed: int = 0,
) -> Validation:
    """Leave one configuration out for every configuration that can be scored."""
    fit = fit or default_fitter(draws, seed)
    if len({o.config for o in obs}) < 2:
        raise UserError("cross-validation needs at least two configurations (payload, rate)")
    out = Validation()
    for fold in folds(obs):
        measured = measured_max_nodes(fold.test)
        for name in models:
            try:
                fitted = fit(name, fold.train)
            except UserError as e:
                size, rate, numeric = fold.config
                out.rows.append(
                    Row(
                        name,
                        size,
                        rate,
                        measured.max_nodes,
                        measured.first_unsustained,
                        None,
                        None,
                        None,
                        None,
                        None,
                        note=f"fit failed: {e.message}",
                        numeric=numeric,
                    )
                )
                continue
            out.rows.append(score(fitted, fold.config, measured))
    return out


def evaluate(fitted: dict[str, FittedModel], obs: Sequence[Observation]) -> Validation:
    """Score a fitted model, unchanged, on trials of configurations it may not have seen."""
    out = Validation()
    for config in sorted({o.config for o in obs}):
        measured = measured_max_nodes([o for o in obs if o.config == config])
        for model in fitted.values():
            out.rows.append(score(model, config, measured))
    return out
