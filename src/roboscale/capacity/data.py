"""Trials of results folders as typed observations for capacity fits.

Nodes follow the thesis: N nodes are N/2 sender/echoer pairs, so `nodes = 2 * pairs`.
A fit must see one host setup and one backend only; mixing them is refused with
the folders and the values that differ.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roboscale.errors import UserError
from roboscale.records.schema import METADATA_FILE, SUMMARY_FILE, TRIALS_DIR
from roboscale.records.store import read_metadata, read_run, read_summary
from roboscale.spec.payloads import is_numeric

# Host facts that decide capacity. Kernel or Python patch updates are left out on
# purpose: refusing a fit over them would be noise, and they are kept in the model file.
FINGERPRINT_KEYS: tuple[str, ...] = (
    "hostname",
    "cpu_model",
    "cores",
    "cpu_affinity",
    "cpu_quota",
    "link_profile",
)


@dataclass(frozen=True)
class Observation:
    """One trial, reduced to what capacity models need."""

    source: str  # results folder it came from
    trial: str
    backend: str
    host: str  # fingerprint of FINGERPRINT_KEYS
    payload: str
    payload_bytes: int
    rate_hz: float  # target rate per sender
    pairs: int
    run: int
    sustained: bool
    failed: bool  # the trial ended with an error (counted as not sustained)
    achieved_rate_hz: float | None
    sent: int  # measured messages over all senders (warm-up excluded)
    received: int
    warmup: int  # per sender
    drain_s: float
    cpu_s: float | None  # CPU seconds of all node processes, start to exit
    cpu_ready_s: float | None  # the same from READY on: start-up excluded
    rtt_mean_us: float | None
    rtt_std_us: float | None
    rtt_p50_us: float | None

    @property
    def nodes(self) -> int:
        return 2 * self.pairs

    @property
    def on_loopback(self) -> bool:
        """Whether the trial's messages stayed on one machine (no emulated link crossed)."""
        return "link_profile=loopback" in self.host.split("|")

    @property
    def numeric(self) -> bool:
        """Whether the payload is an array of numbers (its bytes are priced apart)."""
        return is_numeric(self.payload)

    @property
    def config(self) -> tuple[int, float, bool]:
        """A configuration: (payload bytes, rate, numeric array or not). All its N and runs
        belong together; a laserscan and a 4250 B block are two configurations."""
        return (self.payload_bytes, self.rate_hz, self.numeric)

    @property
    def load_bytes_s(self) -> float:
        """The thesis's volume N * f * S, in bytes per second."""
        return self.nodes * self.rate_hz * self.payload_bytes

    @property
    def stream_s(self) -> float:
        """How long the senders streamed: measured messages per sender over the achieved rate."""
        per_sender = self.sent / max(self.pairs, 1) + self.warmup
        rate = self.achieved_rate_hz
        if rate is None or not math.isfinite(rate) or rate <= 0:
            rate = self.rate_hz
        return per_sender / rate

    @property
    def transmissions(self) -> float:
        """Messages put on the wire: each one out and, if echoed, back (warm-up included)."""
        return float(self.sent + self.received + 2 * self.warmup * self.pairs)


def fingerprint(host: Any) -> str:
    if not isinstance(host, dict):
        return "unknown"
    return "|".join(f"{k}={host.get(k)}" for k in FINGERPRINT_KEYS)


_KINDS: dict[str, tuple[type, ...]] = {
    "text": (str,),
    "whole number": (int,),
    "number": (int, float),
}


def _field(path: Path, index: int, entry: dict[str, Any], name: str, kind: str) -> Any:
    """A required field of a summary entry, of kind 'text', 'whole number', 'number' or 'bool'."""
    where = f"{path}: trials[{index}]"
    if name not in entry:
        raise UserError(f"{where}: field {name!r} is missing")
    value = entry[name]
    if kind == "bool":
        ok = isinstance(value, bool)
    else:
        ok = isinstance(value, _KINDS[kind]) and not isinstance(value, bool)
    if not ok:
        raise UserError(f"{where}: field {name!r} must be a {kind}, got {value!r}")
    return value


def _optional_number(path: Path, index: int, value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{path}: trials[{index}]: field {name!r} must be a number, got {value!r}")
    return float(value)


def host_facts(o: Observation) -> dict[str, Any]:
    """The host facts of one trial (its link and CPU quota as run), else of its run."""
    meta_path = Path(o.source) / TRIALS_DIR / o.trial / METADATA_FILE
    if meta_path.exists():
        return dict(read_metadata(Path(o.source), o.trial)["host"])
    return dict(read_run(Path(o.source)).get("host") or {})


def _trial_host(run_dir: Path, trial: str, default: str) -> str:
    """The trial's own host facts when its metadata is there; the run's otherwise."""
    meta_path = run_dir / TRIALS_DIR / trial / METADATA_FILE
    if not meta_path.exists():
        return default
    return fingerprint(read_metadata(run_dir, trial)["host"])


def _observation(run_dir: Path, path: Path, index: int, entry: Any, host: str) -> Observation:
    if not isinstance(entry, dict):
        raise UserError(f"{path}: trials[{index}]: must be a mapping, got {entry!r}")
    trial = _field(path, index, entry, "trial", "text")
    failed = bool(entry.get("error"))
    rtt: dict[str, Any] = entry["rtt_us"] if isinstance(entry.get("rtt_us"), dict) else {}
    usage: dict[str, Any] = entry["usage"] if isinstance(entry.get("usage"), dict) else {}
    num = _optional_number
    return Observation(
        source=str(run_dir),
        trial=trial,
        backend=_field(path, index, entry, "backend", "text"),
        host=_trial_host(run_dir, trial, host),
        payload=_field(path, index, entry, "payload", "text"),
        payload_bytes=_field(path, index, entry, "payload_bytes", "whole number"),
        rate_hz=float(_field(path, index, entry, "rate_hz", "number")),
        pairs=_field(path, index, entry, "pairs", "whole number"),
        run=int(entry.get("run", 0)),
        sustained=False if failed else _field(path, index, entry, "sustained", "bool"),
        failed=failed,
        achieved_rate_hz=None
        if failed
        else num(path, index, entry.get("achieved_rate_hz"), "achieved_rate_hz"),
        sent=0 if failed else _field(path, index, entry, "sent", "whole number"),
        received=0 if failed else _field(path, index, entry, "received", "whole number"),
        warmup=int(entry.get("warmup", 0) or 0),
        drain_s=float(entry.get("drain_s", 0.0) or 0.0),
        cpu_s=num(path, index, usage.get("cpu_s_total"), "usage.cpu_s_total"),
        cpu_ready_s=num(path, index, usage.get("cpu_s_after_ready"), "usage.cpu_s_after_ready"),
        rtt_mean_us=num(path, index, rtt.get("mean"), "rtt_us.mean"),
        rtt_std_us=num(path, index, rtt.get("std"), "rtt_us.std"),
        rtt_p50_us=num(path, index, rtt.get("p50"), "rtt_us.p50"),
    )


def load_folder(run_dir: Path) -> list[Observation]:
    """Every trial of one results folder (failed trials included, as not sustained)."""
    run = read_run(run_dir)
    summary = read_summary(run_dir)
    path = run_dir / SUMMARY_FILE
    trials = summary.get("trials")
    if not isinstance(trials, list):
        raise UserError(f"{path}: field 'trials' must be a list")
    host = fingerprint(run.get("host"))
    return [_observation(run_dir, path, i, e, host) for i, e in enumerate(trials)]


def _differ(obs: Sequence[Observation], key: str) -> dict[str, list[str]]:
    """Which folders hold which value of `key` (backend or host)."""
    found: dict[str, list[str]] = {}
    for o in obs:
        folders = found.setdefault(getattr(o, key), [])
        if o.source not in folders:
            folders.append(o.source)
    return found


def check_one_setup(obs: Sequence[Observation]) -> None:
    """Refuse to fit trials of several backends or host setups, naming them."""
    for key, what in (("backend", "backends"), ("host", "host setups")):
        found = _differ(obs, key)
        if len(found) > 1:
            lines = [f"  {value}: {', '.join(folders)}" for value, folders in found.items()]
            raise UserError(
                f"cannot fit one capacity model over several {what}:\n" + "\n".join(lines),
                hint="fit each backend and host separately (--backend selects one backend)",
            )


def load(folders: Iterable[Path], *, backend: str | None = None) -> list[Observation]:
    """Observations of all folders, optionally of one backend; one host and backend only."""
    obs = [o for folder in folders for o in load_folder(folder)]
    if backend is not None:
        known = sorted({o.backend for o in obs})
        obs = [o for o in obs if o.backend == backend]
        if not obs:
            raise UserError(f"--backend: no trials of {backend!r}; these results hold: {known}")
    if not obs:
        raise UserError("no trials in these results folders; run `roboscale bench` first")
    check_one_setup(obs)
    return obs
