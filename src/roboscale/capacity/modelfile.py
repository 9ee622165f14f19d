"""The capacity model file: a versioned JSON record of one fit.

It holds the host facts and backend the model is valid for, the fitted
parameters with standard errors and their bootstrap draws (so predictions carry
intervals without the trials), the fitted range, and the results it came from.
Infinite values (an unbounded link budget) are written as the string "inf".
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import roboscale
from roboscale.capacity.data import Observation, fingerprint, host_facts
from roboscale.capacity.fitting import FloatArray
from roboscale.capacity.models import MODEL_NAMES, PARAM_NAMES, FittedModel, fit_all
from roboscale.capacity.predict import FittedRange
from roboscale.errors import UserError
from roboscale.records.store import read_json, write_json

MODEL_FORMAT = "roboscale-capacity-model"
# 2: the two-resource model prices bytes of numeric arrays apart (cpu_s_per_numeric_byte).
MODEL_FORMAT_VERSION = 2
SUPPORTED_MODEL_VERSIONS = frozenset({2})


@dataclass(frozen=True)
class CapacityModel:
    backend: str
    host: dict[str, Any]
    sources: tuple[str, ...]
    fitted_range: FittedRange
    models: dict[str, FittedModel]
    trials: int
    fit_options: dict[str, Any]
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


def _unnum(value: Any, where: str) -> float:
    if isinstance(value, str) and value in {"inf", "-inf", "nan"}:
        return float(value)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where}: must be a number or 'inf', got {value!r}")
    return float(value)


def encode(value: Any) -> Any:
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


def to_dict(m: CapacityModel) -> dict[str, Any]:
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


def _get(data: dict[str, Any], key: str, where: str) -> Any:
    if key not in data:
        raise UserError(f"{where}: field {key!r} is missing")
    return data[key]


def _check_version(path: Path, data: Any) -> dict[str, Any]:
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


def _fitted_model(path: Path, name: str, raw: Any) -> FittedModel:
    where = f"{path}: models.{name}"
    if not isinstance(raw, dict):
        raise UserError(f"{where}: must be a mapping")
    names = PARAM_NAMES[name]
    params_raw = _get(raw, "params", where)
    params = {
        k: _unnum(_get(params_raw, k, f"{where}.params"), f"{where}.params.{k}") for k in names
    }
    stderr_raw = raw.get("stderr") or {}
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
    return FittedModel(name, params, stderr, draws, dict(raw.get("details") or {}))


def load(path: Path) -> CapacityModel:
    """Read a model file, refusing unknown formats and versions with a clear message."""
    data = _check_version(path, read_json(path))
    where = str(path)
    models_raw = _get(data, "models", where)
    if not isinstance(models_raw, dict):
        raise UserError(f"{path}: field 'models' must be a mapping")
    unknown = sorted(set(models_raw) - set(MODEL_NAMES))
    if unknown:
        raise UserError(f"{path}: models: unknown model(s) {unknown}; known: {list(MODEL_NAMES)}")
    try:
        span = FittedRange.from_dict(_get(data, "fitted_range", where))
    except (KeyError, TypeError, ValueError):
        raise UserError(
            f"{path}: fitted_range: must hold nodes, rate_hz and size_bytes as [low, high]"
        ) from None
    return CapacityModel(
        backend=str(_get(data, "backend", where)),
        host=dict(_get(data, "host", where) or {}),
        sources=tuple(str(s) for s in _get(data, "sources", where)),
        fitted_range=span,
        models={n: _fitted_model(path, n, raw) for n, raw in models_raw.items()},
        trials=int(data.get("trials", 0)),
        fit_options=dict(data.get("fit_options") or {}),
        tool_version=str(data.get("tool_version", "unknown")),
        created_unix_s=float(data.get("created_unix_s", 0.0)),
    )
