"""Predictions with intervals, and the fitted range they can be trusted in.

Outside the range of nodes, rates and sizes the model was fitted on, a prediction
is still answered but with a warning, and its interval is widened by the square
root of how far out it lies (a query 4x past the largest fitted rate widens the
interval 2x each way): nothing inside the data says how the host behaves there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from roboscale.capacity.data import Observation
from roboscale.capacity.fitting import FloatArray
from roboscale.capacity.models import INTERVAL, FittedModel, binding_budget, max_nodes, max_rate
from roboscale.errors import UserError


@dataclass(frozen=True)
class FittedRange:
    nodes: tuple[float, float]
    rate_hz: tuple[float, float]
    size_bytes: tuple[float, float]

    @classmethod
    def of(cls, obs: Sequence[Observation]) -> FittedRange:
        def span(values: list[float]) -> tuple[float, float]:
            return (min(values), max(values))

        return cls(
            nodes=span([float(o.nodes) for o in obs]),
            rate_hz=span([o.rate_hz for o in obs]),
            size_bytes=span([float(o.payload_bytes) for o in obs]),
        )

    def to_dict(self) -> dict[str, list[float]]:
        return {k: list(v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> FittedRange:
        return cls(
            nodes=_pair(data["nodes"]),
            rate_hz=_pair(data["rate_hz"]),
            size_bytes=_pair(data["size_bytes"]),
        )


def _pair(value: object) -> tuple[float, float]:
    if not isinstance(value, list | tuple) or len(value) != 2:
        raise ValueError(f"a range is [low, high], got {value!r}")
    low, high = value
    return (float(low), float(high))


@dataclass(frozen=True)
class Prediction:
    model: str
    quantity: str  # "max_nodes" or "max_rate_hz"
    value: float
    low: float
    high: float
    binding: str
    warnings: tuple[str, ...]

    @property
    def extrapolated(self) -> bool:
        return bool(self.warnings)

    def to_dict(self) -> dict[str, object]:
        out = asdict(self)
        out["warnings"] = list(self.warnings)
        return out


UNITS = {"nodes": "", "rate_hz": " Hz", "size_bytes": " B"}


def _outside(name: str, value: float, span: tuple[float, float]) -> tuple[float, str | None]:
    """How far past the fitted span a value lies (1 inside), and a warning if it does."""
    low, high = span
    if not math.isfinite(value) or value <= 0:
        ratio = math.inf if value > high else (high / low if low > 0 else 1.0)
    else:
        ratio = max(value / high if high > 0 else 1.0, low / value, 1.0)
    if ratio <= 1.0 + 1e-9:
        return 1.0, None
    unit = UNITS[name]
    what = name.replace("_", " ").replace(" hz", "").replace(" bytes", "")
    return ratio, (
        f"{what} {value:,.4g}{unit} is outside the fitted range "
        f"{low:,.4g}-{high:,.4g}{unit}: extrapolating"
    )


def _interval(point: float, draws: FloatArray, widen: float) -> tuple[float, float]:
    finite = draws[~np.isnan(draws)]
    if finite.size == 0:
        low, high = point, point
    else:
        low, high = (float(v) for v in np.percentile(finite, INTERVAL, method="inverted_cdf"))
    low, high = min(low, point), max(high, point)
    return low / widen, high * widen


def _checked(name: str, value: float) -> float:
    if not math.isfinite(value) or value <= 0:
        raise UserError(f"--{name}: must be a positive number, got {value!r}")
    return value


def _predict(
    model: FittedModel,
    quantity: str,
    point: float,
    draws: FloatArray,
    checks: list[tuple[str, float, tuple[float, float]]],
    binding: str,
) -> Prediction:
    widen, warnings = 1.0, []
    for name, value, span in checks:
        ratio, warning = _outside(name, value, span)
        if warning is not None:
            # sqrt of an infinite ratio would make the interval meaningless; cap it.
            widen *= math.sqrt(min(ratio, 1e6))
            warnings.append(warning)
    low, high = _interval(point, draws, widen)
    if warnings:
        warnings.append(f"interval widened x{widen:.2g} each way")
    return Prediction(model.name, quantity, point, low, high, binding, tuple(warnings))


def _kind_warning(model: FittedModel, numeric: bool) -> list[str]:
    """A payload kind the model has no cost trial of is priced like the other kind."""
    fitted = model.details.get("kinds_fitted")
    kind = "numeric" if numeric else "bytes"
    if not isinstance(fitted, dict) or fitted.get(kind, True):
        return []
    what = "arrays of numbers (laserscan)" if numeric else "blocks of bytes"
    return [f"no trial with {what} was fitted: their bytes are priced like the other kind's"]


def predict_max_nodes(
    model: FittedModel, span: FittedRange, size: float, rate: float, numeric: bool = False
) -> Prediction:
    """Most nodes sustained with messages of `size` bytes at `rate` Hz each; `numeric` when
    the payload is an array of numbers (a LaserScan)."""
    size, rate = _checked("size", size), _checked("rate", rate)
    point, draws = max_nodes(model, size, rate, numeric)
    checks = [
        ("size_bytes", size, span.size_bytes),
        ("rate_hz", rate, span.rate_hz),
        ("nodes", point, span.nodes),
    ]
    binding = binding_budget(model, size, rate, numeric)
    pred = _predict(model, "max_nodes", point, draws, checks, binding)
    return _with(pred, _kind_warning(model, numeric))


def predict_max_rate(
    model: FittedModel, span: FittedRange, nodes: float, size: float, numeric: bool = False
) -> Prediction:
    """Highest rate per sender that `nodes` nodes sustain with `size`-byte messages."""
    nodes, size = _checked("nodes", nodes), _checked("size", size)
    point, draws = max_rate(model, nodes, size, numeric)
    checks = [
        ("nodes", nodes, span.nodes),
        ("size_bytes", size, span.size_bytes),
        ("rate_hz", point, span.rate_hz),
    ]
    rate_for_binding = point if point > 0 and math.isfinite(point) else span.rate_hz[0]
    binding = binding_budget(model, size, rate_for_binding, numeric)
    pred = _predict(model, "max_rate_hz", point, draws, checks, binding)
    return _with(pred, _kind_warning(model, numeric))


def _with(pred: Prediction, warnings: list[str]) -> Prediction:
    if not warnings:
        return pred
    return replace(pred, warnings=(*pred.warnings, *warnings))
