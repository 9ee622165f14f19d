"""A chaos run's spec (`ChaosSpec`): how fast and how long to kill, by which methods,
which children, with which seed; read from the `--chaos` option, the `roboscale chaos`
options or a launch file's `chaos:` section, each value checked with a clear error.
The monkey that runs it is in runtime/chaos.py.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roboscale.errors import SpecError, UserError
from roboscale.yamlfile import load_yaml

MAX_RATE = 10_000.0  # kills per second
MAX_DURATION_S = 3600.0


class Method(enum.Enum):
    SIGTERM = "sigterm"
    SIGKILL = "sigkill"
    EXCEPTION = "exception"
    HANG = "hang"


KEYS = ("rate", "duration", "method", "target", "seed", "settle", "log")


@dataclass(frozen=True, slots=True)
class ChaosSpec:
    rate: float = 200.0  # kills per second
    duration: float = 10.0  # seconds
    methods: tuple[tuple[Method, float], ...] = ((Method.EXCEPTION, 1.0),)  # method, weight
    target: str = "*"  # fnmatch pattern on child paths, absolute or below the root
    seed: int = 0
    settle: float = 5.0  # seconds allowed after the last kill for every restart to finish
    log: Path | None = None  # JSON lines of kills and restarts

    @property
    def kills(self) -> int:
        return max(1, round(self.rate * self.duration))


def parse_methods(value: Any) -> tuple[tuple[Method, float], ...]:
    """`exception`, `exception+hang`, `exception:8+hang:1`, or a mapping {method: weight}."""
    if isinstance(value, dict):
        items = [(str(k), v) for k, v in value.items()]
    elif isinstance(value, str) and value:
        items = [(p.partition(":")[0], p.partition(":")[2] or 1) for p in value.split("+")]
    else:
        raise ValueError(f"{value!r}: name methods, e.g. exception or exception:8+hang:1")
    methods = []
    allowed = " | ".join(m.value for m in Method)
    for name, weight in items:
        try:
            method = Method(name.strip())
        except ValueError:
            raise ValueError(f"unknown method {name!r}; allowed: {allowed}") from None
        w = _number(weight)
        if w is None or w <= 0:
            raise ValueError(f"weight of {name} must be a number > 0, got {weight!r}")
        methods.append((method, w))
    return tuple(methods)


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        n = float(value)
    except (TypeError, ValueError):
        return None
    return n if math.isfinite(n) else None


def _seed(value: Any) -> int:
    """A whole number: YAML's 7, or the command line's '7' (never true, 2.5 or '2.5')."""
    text = value if isinstance(value, str) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if text is not None and text.strip().lstrip("-").isdigit():
        return int(text)
    raise ValueError(f"seed: {value!r} is not allowed; a whole number")


def build_spec(values: dict[str, Any]) -> ChaosSpec:
    """Validate raw values (strings or YAML scalars); ValueError("key: problem") on the first."""
    for key in values:
        if key not in KEYS:
            raise ValueError(f"{key}: unknown key; allowed: {', '.join(KEYS)}")
    spec: dict[str, Any] = {}
    for key, lo, hi in (("rate", 0.0, MAX_RATE), ("duration", 0.0, MAX_DURATION_S)):
        if key in values:
            n = _number(values[key])
            if n is None or not lo < n <= hi:
                raise ValueError(
                    f"{key}: {values[key]!r} is not allowed; a number > 0 and <= {hi:g}"
                )
            spec[key] = n
    if "settle" in values:
        n = _number(values["settle"])
        if n is None or not 0 <= n <= 600:
            raise ValueError(f"settle: {values['settle']!r} is not allowed; seconds, 0 to 600")
        spec["settle"] = n
    if "method" in values:
        try:
            spec["methods"] = parse_methods(values["method"])
        except ValueError as e:
            raise ValueError(f"method: {e}") from None
    if "target" in values:
        if not isinstance(values["target"], str) or not values["target"]:
            raise ValueError(f"target: {values['target']!r}; a path pattern such as /workers/*")
        spec["target"] = values["target"]
    if "seed" in values:
        spec["seed"] = _seed(values["seed"])
    if "log" in values:
        log = values["log"]
        if not isinstance(log, str | Path) or not str(log).strip():
            raise ValueError(f"log: {log!r} is not allowed; a file name for the JSON-lines log")
        spec["log"] = Path(log)
    return ChaosSpec(**spec)


def parse_chaos_option(text: str) -> ChaosSpec:
    """`rate=200,duration=10,method=exception,target=/workers/*` (the --chaos option)."""
    values: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or not key.strip():
            raise UserError(
                f"--chaos: {part!r} is not key=value; e.g. rate=200,duration=10,method=exception"
            )
        values[key.strip()] = value.strip()
    try:
        return build_spec(values)
    except ValueError as e:
        raise UserError(f"--chaos: {e}") from None


def chaos_from_launch(path: Path) -> ChaosSpec | None:
    """The `chaos:` section of a launch file, validated with file:line; None when absent."""
    data, lines = load_yaml(path, "launch file")
    if not isinstance(data, dict) or "chaos" not in data:
        return None
    section = data["chaos"]
    if not isinstance(section, dict):
        raise SpecError(
            str(path), lines.get(("chaos",)), "chaos", "a mapping of " + ", ".join(KEYS)
        )
    try:
        return build_spec(section)
    except ValueError as e:
        key = str(e).partition(":")[0]
        line = lines.get(("chaos", key), lines.get(("chaos",)))
        raise SpecError(str(path), line, "chaos." + key, str(e).partition(": ")[2]) from None
