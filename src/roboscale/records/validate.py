"""The shapes of a results folder's JSON files, checked on reading.

A results folder may be hand-edited, truncated or come from elsewhere. Each file is
validated here once, when it is read, so that every reader (report, capacity fit,
--resume) works on data of the documented shape, and a broken file is one error
naming the file, the field and what is allowed, never a KeyError three modules later.
Fields the readers need are required; more fields are allowed (a newer workload's
figures), and the data is returned as it was read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from roboscale.errors import UserError

Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0)]


class _Open(BaseModel):
    """Strict types (a string is no number), unknown fields kept."""

    model_config = ConfigDict(extra="allow", strict=True)


class RunFile(_Open):
    """run.json; the report shows what is there (an interrupted run may lack some)."""

    format_version: int
    spec_name: str = "?"
    spec: str = ""
    command: str = ""
    created_unix_s: float = 0.0
    host: dict[str, Any] = {}
    backends: dict[str, str] = {}


class TrialParams(_Open):
    """The parameters every trial records (TrialPlan's fields the readers use)."""

    trial: str = Field(min_length=1)
    backend: str
    workload: str
    rate_hz: float = Field(gt=0)
    payload: str
    payload_bytes: Count
    pairs: int = Field(ge=1)
    run: Count
    messages: Count
    warmup: Count
    ack: bool
    hosts: int = Field(1, ge=1)
    link: str = "loopback"
    cpu: float | None = None
    listeners: Count = 0
    chain_length: Count = 0
    drain_s: Seconds = 0.0


class Distribution(_Open):
    """Percentiles and moments of a latency in µs; null when nothing arrived."""

    p50: float | None
    p90: float | None
    p99: float | None
    p999: float | None
    max: float | None
    mean: float | None
    std: float | None
    ci80_low: float | None
    ci80_high: float | None


class NodeFigures(_Open):
    node: str
    received: Count
    one_way_us: Distribution
    rtt_us: Distribution
    hop_us: Distribution | None = None


class FailedEntry(TrialParams):
    error: str
    sustained: bool = False


class MeasuredEntry(TrialParams):
    sent: Count
    received: Count
    lost: int
    loss: float = Field(ge=0, le=1)
    achieved_rate_hz: float | None = Field(ge=0)
    achieved_rate_min_hz: float | None = Field(ge=0)
    rtt_us: Distribution
    one_way_us: Distribution
    send_lag_us: Distribution
    per_node: list[NodeFigures] = []
    sustained: bool
    verdict: dict[str, Any]
    thresholds: dict[str, Any] | None = None
    usage: dict[str, Any] = {}


class SummaryFile(_Open):
    format_version: int
    thresholds: dict[str, Any] | None = None
    trials: list[dict[str, Any]]


class TrialMetadata(_Open):
    format_version: int
    params: TrialParams
    host: dict[str, Any]
    error: str | None = None


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _error(path: Path, e: ValidationError, prefix: str = "") -> UserError:
    first = e.errors()[0]
    field = _where((*((prefix,) if prefix else ()), *first["loc"]))
    missing = first["type"] == "missing"
    problem = "required field is missing" if missing else str(first["msg"])
    given = "" if missing else f", got {first.get('input')!r}"[:120]
    more = len(e.errors()) - 1
    also = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
    return UserError(
        f"{path}: {field}: {problem}{given}{also}",
        hint="this file is not as roboscale wrote it; rerun the experiment, or restore the file",
    )


def check(path: Path, model: type[BaseModel], data: Any) -> dict[str, Any]:
    """`data` as read, after checking it has the shape of `model`."""
    if not isinstance(data, dict):
        raise UserError(f"{path}: must be a JSON object, got {type(data).__name__}")
    try:
        model.model_validate(data)
    except ValidationError as e:
        raise _error(path, e) from None
    return data


def check_summary(path: Path, data: Any) -> dict[str, Any]:
    """A summary and each of its entries: failed ones by their error, others by figures."""
    summary = check(path, SummaryFile, data)
    for i, entry in enumerate(summary["trials"]):
        model = FailedEntry if entry.get("error") is not None else MeasuredEntry
        try:
            model.model_validate(entry)
        except ValidationError as e:
            raise _error(path, e, f"trials[{i}]") from None
    return summary
