"""Real machines over SSH: check them, install roboscale on them, measure their clocks.

`check(ssh)` tells whether a host is reachable and what it has (interpreter,
roboscale and its fingerprint, backends, idle CPU, clock offset). `install(ssh,
wheels)` makes a venv in the host's working directory and installs roboscale from
a wheelhouse copied over the same connection, so the host needs no internet.
`require_same_code(...)` refuses a trial whose hosts run other code than this one.
"""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

from roboscale import __version__
from roboscale.env.clock import Exchange, OffsetEstimate, estimate_offset
from roboscale.env.ssh import Ssh, SshError
from roboscale.errors import UserError
from roboscale.lab.hostprobe import BOOTSTRAP, CLOCK_LOOP, fingerprint

MIN_PYTHON = (3, 11)
PACKAGE_LINK = (
    "mkdir -p pkg && ln -sfn \"$(venv/bin/python -c 'import os, roboscale; "
    "print(os.path.dirname(roboscale.__file__))')\" pkg/roboscale"
)
CLOCK_EXCHANGES = 16


@dataclass
class HostCheck:
    name: str
    address: str
    reachable: bool
    problem: str = ""
    python: str = ""
    machine: str = ""
    libc: str = ""
    roboscale: str = ""
    fingerprint: str = ""
    idle_cpu: float | None = None
    cores: int | None = None
    backends: dict[str, str] = field(default_factory=dict)
    host: dict[str, object] = field(default_factory=dict)  # its hostfacts, as the lab records
    clock: OffsetEstimate | None = None

    @property
    def same_code(self) -> bool:
        return self.fingerprint == fingerprint()

    def as_dict(self) -> dict[str, object]:
        out = {k: v for k, v in vars(self).items() if k != "clock"}
        out["clock"] = self.clock.as_dict() if self.clock else None
        return out


def check(ssh: Ssh) -> HostCheck:
    """Everything `roboscale hosts check` reports of one host; never raises for the host's
    own problems (they are the report), only for bad arguments."""
    h = ssh.host
    out = HostCheck(h.name, h.address, reachable=False)
    try:
        base = _report(ssh, [h.python, "-c", BOOTSTRAP], _Bootstrap)
    except SshError as e:
        out.problem = str(e)
        return out
    except _RemoteFailed as e:
        out.reachable = True
        out.problem = f"no usable Python ({h.python!r}): {e}"
        return out
    out.reachable = True
    out.python, out.machine, out.libc = base.python, base.machine, base.libc
    out.cores = base.cores
    if tuple(int(p) for p in out.python.split(".")[:2]) < MIN_PYTHON:
        out.problem = f"Python {out.python} is too old; roboscale needs 3.11 or newer"
        return out
    try:
        full = _report(ssh, ["venv/bin/python", "-m", "roboscale.lab.hostprobe"], _Probe)
    except _RemoteFailed:
        out.problem = "roboscale is not installed there (roboscale hosts install)"
    else:
        out.roboscale, out.fingerprint = full.roboscale, full.fingerprint
        out.idle_cpu, out.backends = full.idle_cpu, full.backends
        out.host = dict(full.host)
        if not out.same_code:
            out.problem = (
                f"runs roboscale {out.roboscale} ({out.fingerprint}), this machine "
                f"{__version__} ({fingerprint()}): run roboscale hosts install"
            )
    out.clock = clock_offset(ssh)
    return out


class _RemoteFailed(Exception):
    pass


class _Bootstrap(BaseModel):
    """What a host's own Python says of it (hostprobe.BOOTSTRAP)."""

    model_config = ConfigDict(frozen=True)
    python: str
    machine: str
    libc: str
    cores: int | None


class _Probe(BaseModel):
    """What roboscale installed there reports (hostprobe.report)."""

    model_config = ConfigDict(frozen=True)
    roboscale: str
    fingerprint: str
    idle_cpu: float | None
    backends: dict[str, str]
    host: dict[str, object] = {}


R = TypeVar("R", bound=BaseModel)


def _report(ssh: Ssh, argv: list[str], model: type[R]) -> R:
    """The JSON report a command prints last on the host, as `model`: a report of
    another shape is as good as none."""
    done = ssh.run(argv, timeout_s=60)
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise _RemoteFailed(tail[0] if tail else f"exit code {done.returncode}")
    try:
        return model.model_validate_json(done.stdout.decode().strip().splitlines()[-1])
    except (ValueError, IndexError) as e:  # pydantic's ValidationError is a ValueError
        raise _RemoteFailed(f"it printed no report ({str(e).splitlines()[0]})") from None


def clock_offset(ssh: Ssh, count: int = CLOCK_EXCHANGES) -> OffsetEstimate:
    """NTP-style exchanges with the host's CLOCK_MONOTONIC over one SSH channel."""
    proc = subprocess.Popen(
        ssh.remote_argv([ssh.host.python, "-u", "-c", CLOCK_LOOP]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    exchanges: list[Exchange] = []
    try:
        for _ in range(count + 1):  # the first one pays for the interpreter's start
            t0 = time.monotonic_ns()
            proc.stdin.write(b"t\n")
            proc.stdin.flush()
            line = proc.stdout.readline()
            t3 = time.monotonic_ns()
            if not line:
                raise SshError(f"host {ssh.host.name}: the clock exchange ended early")
            t1, t2 = (int(v) for v in line.split())
            exchanges.append((t0, t1, t2, t3))
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait()
    return estimate_offset(exchanges[1:])


def build_wheels(out: Path, checks: list[HostCheck], extras: str = "") -> Path:
    """A wheelhouse for the hosts' platforms: roboscale built from this tree and every
    dependency as a binary wheel for the hosts' machine, Python and C library."""
    source = Path(__file__).resolve().parents[3]
    if not (source / "pyproject.toml").is_file():
        raise UserError(f"roboscale is not installed from a source tree ({source})")
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="roboscale-src-") as tmp:
        # From a clean copy: setuptools reuses build/ and would ship files since deleted.
        clean = Path(tmp)
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(source / name, clean / name)
        shutil.copytree(
            source / "src",
            clean / "src",
            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
        )
        _pip(["wheel", "--no-deps", "--wheel-dir", str(out), str(clean)])
    wheel = max(out.glob("roboscale-*.whl"), key=lambda p: p.stat().st_mtime)
    target = f"{wheel}[{extras}]" if extras else str(wheel)
    for key in sorted({(c.machine, c.python, c.libc) for c in checks}):
        machine, python, libc = key
        platforms: list[str] = []
        major, minor = (int(p) for p in (libc or "2.17").split(".")[:2])
        for glibc_minor in range(17, minor + 1 if major == 2 else 18):
            platforms += ["--platform", f"manylinux_2_{glibc_minor}_{machine}"]
        platforms += ["--platform", f"manylinux2014_{machine}", "--platform", f"linux_{machine}"]
        _pip(
            [
                "download", "--dest", str(out), "--only-binary=:all:",
                *platforms, "--python-version", ".".join(python.split(".")[:2]),
                target,
            ]
        )  # fmt: skip
    return out


def _pip(args: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
        raise UserError(f"pip {args[0]} failed: {' | '.join(tail)}")


def install(ssh: Ssh, wheels: Path, extras: str = "") -> None:
    """Copy the wheelhouse to the host and install roboscale into its venv, offline."""
    h = ssh.host
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for wheel in sorted(wheels.glob("*.whl")):
            tar.add(wheel, arcname=wheel.name)
    if not any(wheels.glob("roboscale-*.whl")):
        raise UserError(f"{wheels}: no roboscale wheel in this wheelhouse")
    ssh.check_output(["rm", "-rf", "wheels"], timeout_s=60)
    done = ssh.run(["sh", "-c", "mkdir -p wheels && tar -C wheels -xf -"], 600, archive.getvalue())
    if done.returncode != 0:
        raise SshError(f"host {h.name}: cannot unpack the wheels in {h.workdir}")
    venv = ssh.run([h.python, "-m", "venv", "--clear", "venv"], timeout_s=300)
    if venv.returncode != 0:
        raise SshError(
            f"host {h.name}: '{h.python} -m venv' failed; on Debian and Ubuntu install "
            f"python3-venv there ({venv.stderr.decode(errors='replace').strip()[-200:]})"
        )
    target = f"roboscale[{extras}]" if extras else "roboscale"
    ssh.check_output(
        ["venv/bin/pip", "install", "--quiet", "--no-index", "--find-links", "wheels", target],
        timeout_s=900,
    )
    # Agents in the host's system Python (ros1) import roboscale through this link only,
    # as they do here, so the venv's compiled packages stay out of that interpreter.
    ssh.check_output(["sh", "-c", PACKAGE_LINK], timeout_s=60)


def require_same_code(checks: list[HostCheck]) -> None:
    """Refuse, before a trial starts, hosts that cannot run it or run other code."""
    problems = [f"{c.name}: {c.problem}" for c in checks if c.problem]
    if problems:
        raise UserError(
            "these hosts cannot run trials:\n  " + "\n  ".join(problems),
            hint="roboscale hosts check INVENTORY shows each host; roboscale hosts install "
            "INVENTORY puts this roboscale on them",
        )


@dataclass
class RemoteHosts:
    """The inventory hosts of a trial, connected and checked, with what a Placement needs:
    each host's argv prefix (roboscale.lab.sshexec through its shared connection), its
    environment and the address its peers reach it at. Close it to drop the connections."""

    names: list[str]
    prefixes: list[list[str]]
    envs: list[dict[str, str]]
    addresses: list[str]
    checks: list[HostCheck]
    links: list[Ssh]
    _closing: Any = None

    @property
    def infrastructure_host(self) -> int:
        """The first host whose inventory roles name roscore, else host 0."""
        roles = [link.host.roles for link in self.links]
        return next((i for i, r in enumerate(roles) if "roscore" in r), 0)

    def facts(self) -> dict[str, object]:
        return {
            "link_profile": "real",
            "hosts": {c.name: c.as_dict() for c in self.checks},
        }

    def machine_facts(self) -> dict[str, object]:
        """What a trial's metadata records as the machine it ran on: the host's own facts,
        so a capacity model fitted on them is that computer's, not the controller's. Trials
        across several machines record them joined ('laptop+robot'): one setup."""
        facts = [{**c.host, "inventory_host": c.name} for c in self.checks]
        if len(facts) == 1:
            return facts[0]
        keys = dict.fromkeys(k for f in facts for k in f)
        return {k: "+".join(str(f.get(k)) for f in facts) for k in keys}

    def clocks(self) -> dict[str, OffsetEstimate]:
        """Each host's clock against this machine's, measured now."""
        return {link.host.name: clock_offset(link) for link in self.links}

    def close(self) -> None:
        if self._closing is not None:
            self._closing.close()


def connect(inventory_path: Path, machines: list[str], run_dir: Path) -> RemoteHosts:
    """Connect to the named inventory hosts, refuse any that cannot run this roboscale,
    and write the wrapper's host files into a private folder of the run."""
    import contextlib

    from roboscale.bags import stream_dir
    from roboscale.env.inventory import load_inventory
    from roboscale.env.ssh import connections
    from roboscale.lab.sshexec import HostFile, host_record
    from roboscale.privdir import private_dir

    inventory = load_inventory(inventory_path)
    hosts = [inventory.host(name) for name in machines]
    stack = contextlib.ExitStack()
    links = stack.enter_context(connections(hosts))
    try:
        checks = [check(links[h.name]) for h in hosts]
        require_same_code(checks)
        files = private_dir(run_dir / "hosts")
        prefixes = []
        for h in hosts:
            hf = HostFile(
                host=host_record(h),
                control_dir=str(links[h.name].control_dir),
                run_dir=str(run_dir),
                remote_run=f"runs/{run_dir.name}",
                lab_pythons=[sys.executable],
                input_dirs=[str(stream_dir())],
            ).write(files / f"{h.name}.json")
            prefixes.append([sys.executable, "-m", "roboscale.lab.sshexec", str(hf), "--"])
    except BaseException:
        stack.close()
        raise
    return RemoteHosts(
        names=[h.name for h in hosts],
        prefixes=prefixes,
        envs=[{"ROBOSCALE_HOST": h.name, "ROBOSCALE_HOST_ADDRESS": h.data_address} for h in hosts],
        addresses=[h.data_address for h in hosts],
        checks=checks,
        links=[links[h.name] for h in hosts],
        _closing=stack,
    )
