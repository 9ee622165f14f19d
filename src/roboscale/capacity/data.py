"""Trials of results folders as typed observations for capacity fits.

Nodes follow the thesis: N nodes are N/2 sender/echoer pairs, so `nodes = 2 * pairs`.
A fit must see one host setup and one backend only; mixing them is refused with
the folders and the values that differ.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from roboscale.errors import UserError
from roboscale.records.folder import ResultsFolder
from roboscale.records.models import FailedEntry, HostFacts, SummaryEntry
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


def fingerprint(host: HostFacts | Mapping[str, object] | None) -> str:
    if host is None:
        return "unknown"
    facts = host.to_dict() if isinstance(host, HostFacts) else host
    return "|".join(f"{k}={facts.get(k)}" for k in FINGERPRINT_KEYS)


def host_facts(o: Observation) -> dict[str, object]:
    """The host facts of one trial (its link and CPU quota as run), else of its run."""
    folder = ResultsFolder(o.source)
    if o.trial in folder.trials_on_disk():
        return folder.metadata(o.trial).host.to_dict()
    return folder.run().host.to_dict()


def _trial_host(folder: ResultsFolder, on_disk: set[str], trial: str, default: str) -> str:
    """The trial's own host facts when its metadata is there; the run's otherwise."""
    if trial not in on_disk:
        return default
    return fingerprint(folder.metadata(trial).host)


def _observation(folder: ResultsFolder, entry: SummaryEntry, host: str) -> Observation:
    failed = isinstance(entry, FailedEntry)
    measured = None if isinstance(entry, FailedEntry) else entry
    rtt = measured.rtt_us if measured else None
    usage = measured.usage if measured else None
    return Observation(
        source=str(folder.path),
        trial=entry.trial,
        backend=entry.backend,
        host=host,
        payload=entry.payload,
        payload_bytes=entry.payload_bytes,
        rate_hz=entry.rate_hz,
        pairs=entry.pairs,
        run=entry.run,
        sustained=bool(entry.sustained),
        failed=failed,
        achieved_rate_hz=measured.achieved_rate_hz if measured else None,
        sent=measured.sent if measured else 0,
        received=measured.received if measured else 0,
        warmup=entry.warmup,
        drain_s=entry.drain_s,
        cpu_s=usage.cpu_s_total if usage else None,
        cpu_ready_s=usage.cpu_s_after_ready if usage else None,
        rtt_mean_us=rtt.mean if rtt else None,
        rtt_std_us=rtt.std if rtt else None,
        rtt_p50_us=rtt.p50 if rtt else None,
    )


def load_folder(run_dir: Path) -> list[Observation]:
    """Every trial of one results folder (failed trials included, as not sustained)."""
    folder = ResultsFolder(run_dir)
    host = fingerprint(folder.run().host)
    summary = folder.summary()
    on_disk = set(folder.trials_on_disk())
    return [
        _observation(folder, e, _trial_host(folder, on_disk, e.trial, host)) for e in summary.trials
    ]


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
