"""The capacity model file: a versioned JSON record of one fit.

It holds the host facts and backend the model is valid for, the fitted
parameters with standard errors and their bootstrap draws (so predictions carry
intervals without the trials), the fitted range, and the results it came from.
Infinite values (an unbounded link budget) are written as the string "inf".
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import roboscale
from roboscale.capacity.data import Observation, fingerprint, host_facts
from roboscale.capacity.fitting import FloatArray
from roboscale.capacity.models import MODEL_NAMES, PARAM_NAMES, FittedModel, fit_all
from roboscale.capacity.predict import FittedRange
from roboscale.errors import UserError
from roboscale.jsonfile import read_json
from roboscale.safewrite import write_json

MODEL_FORMAT = "roboscale-capacity-model"
# 2: the two-resource model prices bytes of numeric arrays apart (cpu_s_per_numeric_byte).
MODEL_FORMAT_VERSION = 2
SUPPORTED_MODEL_VERSIONS = frozenset({2})


@dataclass(frozen=True)
class CapacityModel:
    backend: str
    host: dict[str, object]  # the host facts, as the results folder gave them
    sources: tuple[str, ...]
    fitted_range: FittedRange
    models: dict[str, FittedModel]
    trials: int
    fit_options: dict[str, int]  # bootstrap draws and seed, as `capacity fit` took them
    tool_version: str = roboscale.__version__
    created_unix_s: float = 0.0

    @property
    def host_fingerprint(self) -> str:
        return fingerprint(self.host)


def build(
    obs: Sequence[Observation], folders: Sequence[Path], *, draws: int, seed: int
) -> CapacityModel:
    """Fit every model on observations already checked to share one host and backend."""
    return CapacityModel(
        backend=obs[0].backend,
        host=host_facts(obs[0]),  # checked to be the same for every trial
        sources=tuple(str(f) for f in folders),
        fitted_range=FittedRange.of(obs),
        models=fit_all(obs, draws=draws, seed=seed),
        trials=len(obs),
        fit_options={"bootstrap": draws, "seed": seed},
        created_unix_s=time.time(),
    )


def _num(value: float) -> float | str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return float(value)


def _unnum(value: object, where: str) -> float:
    if isinstance(value, str) and value in {"inf", "-inf", "nan"}:
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where}: must be a number or 'inf', got {value!r}")
    return float(value)


# Budgets a host has: above 0 (a link may be unbounded). Costs are fitted >= 0 (NNLS).
BUDGETS = frozenset({"cslv_bytes_s", "cpu_budget_cores", "link_budget_bytes_s"})


def _param(value: object, where: str, name: str) -> float:
    """A fitted parameter: a budget above 0 (inf allowed), a finite cost from 0."""
    number = _unnum(value, where)
    if name in BUDGETS:
        if not number > 0:
            raise UserError(f"{where}: {value!r} is not allowed; a budget above 0, or 'inf'")
    elif not (math.isfinite(number) and number >= 0):
        raise UserError(f"{where}: {value!r} is not allowed; a finite cost from 0")
    return number


def _mapping(raw: object, where: str) -> dict[str, object]:
    if raw is None:
        return {}
    if not isinstance(raw, dict) or not all(isinstance(k, str) for k in raw):
        raise UserError(f"{where}: must be a mapping, got {raw!r}"[:300])
    return dict(raw)


def _fit_options(raw: object, where: str) -> dict[str, int]:
    """bootstrap (10 or more) and seed (from 0): whole numbers, as `capacity fit` takes them."""
    options = _mapping(raw, where)
    checked: dict[str, int] = {}
    for key, low in (("bootstrap", 10), ("seed", 0)):
        value = options.get(key, low)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise UserError(f"{where}.{key}: {value!r} is not allowed; a whole number from {low}")
        checked[key] = value
    return checked


def _range(raw: object, where: str) -> FittedRange:
    """The fitted span of nodes, rates and sizes: finite [low, high] pairs from 0."""
    keys = ("nodes", "rate_hz", "size_bytes")
    allowed = f"a mapping of {', '.join(keys)}, each [low, high] with 0 <= low <= high"
    if not isinstance(raw, dict) or any(
        not isinstance(raw.get(k), list) or len(raw[k]) != 2 for k in keys
    ):
        raise UserError(f"{where}.fitted_range: {allowed}")
    for k in keys:
        low, high = (_unnum(v, f"{where}.fitted_range.{k}") for v in raw[k])
        if not (math.isfinite(low) and math.isfinite(high) and 0 <= low <= high):
            raise UserError(f"{where}.fitted_range.{k}: {raw[k]!r} is not allowed; {allowed}")
    return FittedRange.from_dict(raw)


def encode(value: object) -> object:
    """JSON-safe copy: non-finite floats become strings, arrays lists."""
    if isinstance(value, np.ndarray):
        return encode(value.tolist())
    if isinstance(value, float):
        return _num(value)
    if isinstance(value, dict):
        return {k: encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [encode(v) for v in value]
    return value


def to_dict(m: CapacityModel) -> dict[str, object]:
    return {
        "format": MODEL_FORMAT,
        "format_version": MODEL_FORMAT_VERSION,
        "tool_version": m.tool_version,
        "created_unix_s": m.created_unix_s,
        "backend": m.backend,
        "host": m.host,
        "host_fingerprint": m.host_fingerprint,
        "sources": list(m.sources),
        "trials": m.trials,
        "fit_options": m.fit_options,
        "fitted_range": m.fitted_range.to_dict(),
        "models": {
            name: encode(
                {
                    "params": fm.params,
                    "stderr": fm.stderr,
                    "details": fm.details,
                    "draws": fm.draws,
                }
            )
            for name, fm in m.models.items()
        },
    }


def save(m: CapacityModel, path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, to_dict(m))
    except OSError as e:
        raise UserError(f"{path}: cannot write the model file ({e.strerror or e})") from None


def _get(data: Mapping[str, object], key: str, where: str) -> object:
    if key not in data:
        raise UserError(f"{where}: field {key!r} is missing")
    return data[key]


def _check_version(path: Path, data: object) -> dict[str, object]:
    if not isinstance(data, dict) or data.get("format") != MODEL_FORMAT:
        raise UserError(
            f"{path}: not a roboscale capacity model (field 'format' is not {MODEL_FORMAT!r})",
            hint="write one with `roboscale capacity fit RESULTS... -o MODEL`",
        )
    version = data.get("format_version")
    if version not in SUPPORTED_MODEL_VERSIONS:
        allowed = ", ".join(str(v) for v in sorted(SUPPORTED_MODEL_VERSIONS))
        raise UserError(
            f"{path}: format_version: {version!r} is not supported by this roboscale "
            f"(supported: {allowed})",
            hint="refit the model with this roboscale: roboscale capacity fit RESULTS... -o MODEL",
        )
    return data


def _fitted_model(path: Path, name: str, raw: object) -> FittedModel:
    where = f"{path}: models.{name}"
    if not isinstance(raw, dict):
        raise UserError(f"{where}: must be a mapping")
    names = PARAM_NAMES[name]
    params_raw = _get(raw, "params", where)
    if not isinstance(params_raw, dict):
        raise UserError(f"{where}.params: must be a mapping of {', '.join(names)}")
    params = {
        k: _param(_get(params_raw, k, f"{where}.params"), f"{where}.params.{k}", k) for k in names
    }
    stderr_raw = _mapping(raw.get("stderr"), f"{where}.stderr")
    stderr = {
        k: None if stderr_raw.get(k) is None else _unnum(stderr_raw[k], f"{where}.stderr.{k}")
        for k in names
    }
    rows = _get(raw, "draws", where)
    if not isinstance(rows, list) or any(
        not isinstance(r, list) or len(r) != len(names) for r in rows
    ):
        raise UserError(f"{where}.draws: must be a list of [{', '.join(names)}] rows")
    draws: FloatArray = np.array(
        [[_unnum(v, f"{where}.draws") for v in r] for r in rows], dtype=np.float64
    ).reshape(-1, len(names))
    details = _mapping(raw.get("details"), f"{where}.details")
    return FittedModel(name, params, stderr, draws, details)


def load(path: Path) -> CapacityModel:
    """Read a model file, refusing unknown formats and versions with a clear message."""
    data = _check_version(path, read_json(path, "model file"))
    where = str(path)
    models_raw = _get(data, "models", where)
    if not isinstance(models_raw, dict):
        raise UserError(f"{path}: field 'models' must be a mapping")
    unknown = sorted(set(models_raw) - set(MODEL_NAMES))
    if unknown:
        raise UserError(f"{path}: models: unknown model(s) {unknown}; known: {list(MODEL_NAMES)}")
    span = _range(_get(data, "fitted_range", where), where)
    sources = _get(data, "sources", where)
    if not isinstance(sources, list) or not all(isinstance(x, str) for x in sources):
        raise UserError(f"{path}: sources: must be a list of results folders (strings)")
    host = _get(data, "host", where)
    if not isinstance(host, dict):
        raise UserError(f"{path}: host: must be a mapping of host facts")
    return CapacityModel(
        backend=str(_get(data, "backend", where)),
        host=dict(host),
        sources=tuple(sources),
        fitted_range=span,
        models={n: _fitted_model(path, n, raw) for n, raw in models_raw.items()},
        trials=int(_unnum(data.get("trials", 0), f"{where}: trials")),
        fit_options=_fit_options(data.get("fit_options"), f"{where}: fit_options"),
        tool_version=str(data.get("tool_version", "unknown")),
        created_unix_s=_unnum(data.get("created_unix_s", 0.0), f"{where}: created_unix_s"),
    )
