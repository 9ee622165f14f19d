"""Run a planned sweep: every finished trial is on disk before the next one starts."""

from __future__ import annotations

import hashlib
import shutil
import time
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

import roboscale
from roboscale import safewrite
from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.verdict import Thresholds
from roboscale.backends.base import Backend, get_backend
from roboscale.env.clock import OffsetEstimate, TrialClock
from roboscale.env.hostfacts import host_facts
from roboscale.errors import UserError
from roboscale.lab.envs import Environments, Placement, check_placement
from roboscale.lab.nodes import NodeFailure
from roboscale.lab.outdir import claim
from roboscale.lab.trial import MachineCpu, collect, host_cpu, node_usage, run_nodes, wall_clock
from roboscale.records.folder import ResultsFolder
from roboscale.records.models import (
    FailedEntry,
    HostFacts,
    ReplayedData,
    RunInfo,
    SummaryEntry,
    TrialClocks,
    TrialMetadata,
)
from roboscale.records.raw import shift_times
from roboscale.records.schema import FORMAT_VERSION
from roboscale.spec.planner import TrialPlan
from roboscale.spec.schema import Spec
from roboscale.workloads.base import get_workload, workload_of

TRIAL_OVERHEAD_S = 1.5  # process start and connection, for the ETA only
# The Python packages whose version decides what a run measured, kept in run.json.
PACKAGES = ("roboscale", "eclipse-zenoh", "cyclonedds", "rosbags", "mcap", "numpy", "pyarrow",
            "pydantic", "opencv-python-headless", "uvloop")  # fmt: skip


@dataclass
class RunOutcome:
    run_dir: Path
    trials: int
    failed: int
    interrupted: bool


def estimate_s(t: TrialPlan) -> float:
    """How long a trial takes, for the ETA and --dry-run."""
    return t.intended_duration_s + t.drain_s * 0.2 + t.pause_s + TRIAL_OVERHEAD_S


def prepare_run_dir(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        probe = out / ".write-test"
        safewrite.write_bytes(probe, b"")  # never through a link planted there
        probe.unlink()
    except OSError as e:
        raise UserError(
            f"{out}: cannot write results there ({e.strerror or e})",
            hint="choose another folder with --out",
        ) from None


def check_backends(names: list[str]) -> dict[str, Backend]:
    backends = {name: get_backend(name) for name in names}
    for backend in backends.values():
        backend.check()
    return backends


def check_trials(trials: list[TrialPlan], backends: dict[str, Backend]) -> None:
    """What would fail mid-sweep is refused before anything runs."""
    for t in trials:
        check_placement(backends[t.backend], t)
    if any(t.emulated for t in trials):
        from roboscale.env.netcmd import require_root

        require_root()


def refusals(trials: list[TrialPlan]) -> dict[str, str]:
    """Why each trial that would be refused before anything runs would be (--dry-run):
    its backend or face-tracker stack missing (an extra, a service), root for emulated
    hosts, a placement the backend or workload cannot do. Trial id -> the reason."""
    from roboscale.env.netcmd import require_root

    def reason(check: Any, *args: Any) -> str:
        try:
            check(*args)
        except UserError as e:
            return " ".join(str(e).split())
        return ""

    backends = {name: get_backend(name) for name in sorted({t.backend for t in trials})}
    missing = {name: reason(b.check) for name, b in backends.items()}
    stacks = {t.stack for t in trials if t.stack}
    if stacks:
        from roboscale.facetrack.stack import get_stack

        missing |= {f"stack {s}": reason(lambda s=s: get_stack(s).check()) for s in stacks}
    root = reason(require_root) if any(t.emulated for t in trials) else ""
    found = {}
    for t in trials:
        why = (
            missing[t.backend]
            or (missing[f"stack {t.stack}"] if t.stack else "")
            or (root if t.emulated else "")
            or reason(check_placement, backends[t.backend], t)
        )
        if why:
            found[t.trial] = why
    return found


def run_one(
    backend: Backend, envs: Environments, t: TrialPlan, folder: ResultsFolder, th: Thresholds
) -> SummaryEntry:
    """Run one trial and write its files; a failure is recorded as a failed trial."""
    raw = folder.new_trial(t.trial)
    start = wall_clock()
    host = HostFacts.model_validate(host_facts())
    env: dict[str, object] = {}  # where it ran, as lab/envs.py describes it
    clocks: TrialClocks | None = None
    replayed = replayed_data(t.replay) if t.replay else None

    def metadata(**more: Any) -> TrialMetadata:
        return TrialMetadata.model_validate(
            dict(format_version=FORMAT_VERSION, tool_version=roboscale.__version__,
                 backend=backend.name, backend_version=backend.version(), params=t.params(),
                 host=host, warmup_discarded=t.warmup, start=start, end=wall_clock(), env=env,
                 clocks=clocks, replayed=replayed, **more)
        )  # fmt: skip

    try:
        where = envs.placement(t)
        env = where.facts
        if where.machine is not None:  # real machines: theirs, not the controller's facts
            host = HostFacts.model_validate(where.machine)
        quota = t.cpu if t.cpu is not None else host.cpu_quota
        host = host.model_copy(update={"link_profile": t.link_crossed, "cpu_quota": quota})
        infra = envs.infrastructure(t)
        clocks_before = envs.clocks()
        # This machine's CPU beside the nodes: meaningful only when they run on it.
        local = where.machine is None
        cpu_before = MachineCpu.now() if local else None
        with envs.background_load(t):
            run_nodes(backend, infra, t, raw, where)
        cpu_after = MachineCpu.now() if local else None
        if clocks_before:
            clocks = to_local_clock(backend, t, raw, where, clocks_before, envs.clocks())
        tables, nodes = collect(t, raw, where)
    except (NodeFailure, UserError, OSError, ValueError) as e:
        # A node, the hosts, the infrastructure or a raw file failed this trial: it is
        # recorded as failed and the sweep goes on; finished trials stay on disk.
        folder.write_trial(t.trial, [], metadata(error=str(e)))
        return FailedEntry.model_validate({**t.params(), "error": str(e)})
    meta = metadata(nodes=nodes, usage=host_cpu(node_usage(nodes), cpu_before, cpu_after))
    folder.write_trial(t.trial, tables, meta)
    shutil.rmtree(raw)
    entry = summarize_trial(folder.records(t.trial), meta.params, th, meta.nodes)
    clock = clocks.one_way if clocks else None
    return entry.model_copy(update={"usage": meta.usage, "clock": clock})


def replayed_data(source: str) -> ReplayedData:
    """What a trial replays, by content: `stata` is generated (no file to hash)."""
    path = Path(source)
    if not path.exists():
        return ReplayedData(source=source, sha256="generated", bytes=0)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    stats = tuple((str(f), f.stat().st_size, f.stat().st_mtime_ns) for f in files)
    digest, size = _hash_files(stats)
    return ReplayedData(source=source, sha256=digest, bytes=size)


@lru_cache(maxsize=16)
def _hash_files(files: tuple[tuple[str, int, int], ...]) -> tuple[str, int]:
    """SHA-256 over the files' contents in order (keyed by size and mtime: hashed once
    however many trials replay them)."""
    h = hashlib.sha256()
    size = 0
    for name, _, _ in files:
        with open(name, "rb") as f:
            while chunk := f.read(1 << 20):
                h.update(chunk)
                size += len(chunk)
    return h.hexdigest(), size


def to_local_clock(
    backend: Backend,
    t: TrialPlan,
    raw: Path,
    where: Placement,
    before: dict[str, OffsetEstimate],
    after: dict[str, OffsetEstimate],
) -> TrialClocks:
    """Put every node's timestamps on this machine's clock, with the offset of its host
    measured before and after the trial, and say how far one-way figures can be off:
    the bounds of the two hosts a message crosses, added."""
    clocks = {host: TrialClock(before[host], after[host]) for host in before}
    processes = get_workload(t.workload).processes(t, together=backend.placement == "pair")
    for stage in processes:
        for process in stage:
            for node in process.nodes:
                shift_times(raw / f"{node.name}.raw", clocks[where.names[node.host]].offset_ns)
    bounds = sorted((c.bound_ns for c in clocks.values()), reverse=True)
    bound_us = (sum(bounds[:2]) if len(bounds) > 1 else 0) / 1e3
    one_way = {
        "bound_us": round(bound_us, 1),
        "valid": bound_us <= t.clock_max_bound_us,
        "max_bound_us": t.clock_max_bound_us,
    }
    hosts = {host: c.as_dict() for host, c in clocks.items()}
    return TrialClocks.model_validate({"hosts": hosts, "one_way": one_way})


def package_versions() -> dict[str, str]:
    """The installed versions of the packages in PACKAGES (those installed)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def write_run_file(
    folder: ResultsFolder, spec: Spec, spec_text: str, command: str, backends: dict[str, Backend]
) -> None:
    folder.write_run(
        RunInfo(
            format_version=FORMAT_VERSION,
            tool_version=roboscale.__version__,
            spec_name=spec.name,
            spec_description=spec.description,
            spec=spec_text,
            command=command,
            created_unix_s=time.time(),
            host=HostFacts.model_validate(host_facts()),
            backends={name: b.version() for name, b in backends.items()},
            packages=package_versions(),
        )
    )


def run_sweep(
    spec: Spec,
    trials: list[TrialPlan],
    run_dir: Path,
    spec_text: str,
    command: str,
    console: Console,
    resume: bool = False,
    replace: bool = False,
) -> RunOutcome:
    """Run the trials; with `resume`, those `run_dir` holds finished already are kept, with
    `replace`, its earlier results of this spec are removed."""
    backends = check_backends(sorted({t.backend for t in trials}))
    check_trials(trials, backends)
    finished = claim(run_dir, spec.name, spec_text, trials, resume, replace)
    prepare_run_dir(run_dir)
    folder = ResultsFolder(run_dir)
    if not folder.is_results():
        write_run_file(folder, spec, spec_text, command, backends)
    if finished:
        console.print(f"resuming: {len(finished)} finished trials kept, {len(trials)} planned")
        trials = [t for t in trials if t.trial not in finished]
    th = Thresholds(**spec.verdict.model_dump())
    failed = 0
    done = 0
    estimate = [estimate_s(t) for t in trials]
    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.fields[done]}/{task.fields[n]} trials"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    try:
        with (
            Environments(run_dir, backends) as envs,
            Progress(*columns, console=console) as bar,
        ):
            task = bar.add_task("starting", total=sum(estimate), n=len(trials), done=0)
            for t in trials:
                if done and t.pause_s:
                    time.sleep(t.pause_s)
                bar.update(
                    task,
                    description=f"{t.backend} {t.workload} "
                    + ("burst " if t.burst else f"{t.rate_hz:g} Hz ")
                    + f"{t.subject or t.payload} x{t.measured_nodes} run {t.run}",
                )
                entry = run_one(backends[t.backend], envs, t, folder, th)
                folder.add_entry(entry, th.to_dict())
                failed += isinstance(entry, FailedEntry)
                done += 1
                bar.update(task, completed=sum(estimate[:done]), done=done)
                _log_trial(console, entry)
    except KeyboardInterrupt:
        return RunOutcome(run_dir, done, failed, interrupted=True)
    return RunOutcome(run_dir, done, failed, interrupted=False)


def _log_trial(console: Console, e: SummaryEntry) -> None:
    if isinstance(e, FailedEntry):
        console.print(f"  [red]✗ {escape(e.trial)}: {escape(e.error)}[/red]")
        return
    key, arrived, what = workload_of(e).log_words
    latency = getattr(e, key)
    mark = "[green]✓[/green]" if e.sustained else "[yellow]✗[/yellow]"
    p50, p99, rate = (_figure(v) for v in (latency.p50, latency.p99, e.achieved_rate_hz))
    pace = "a burst, sent back to back" if e.burst else f"{rate} Hz achieved"
    console.print(
        f"  {mark} {escape(e.trial)}: {e.received}/{e.sent} {arrived}, "
        f"{pace}, {what} p50 {p50} µs p99 {p99} µs"
    )


def _figure(value: float | None) -> str:
    """A figure of a trial line; `-` where the trial has none (nothing arrived, or a
    replay too short to time), never None or a traceback."""
    return "-" if value is None else f"{value:.0f}"
