"""Emulated hosts: one network namespace per host, linked by an emulated switch.

Host i of run R is the namespace `rs-R-h<i>` with address <subnet>.(i+1). The
switch lives in its own namespace `rs-R-sw`, so nothing touches the root
namespace's interfaces:
- kernel fabric (profiles without delay/jitter, e.g. ethernet): star = a Linux
  bridge in the switch namespace with one veth per host; mesh = one veth pair
  per host pair. tbf shapes both directions; iptables drops for `loss`.
- emulator fabric (delay/jitter, e.g. wifi): a TUN device `tun0` per host,
  served by `linkemu.py` running in the switch namespace.
A marker `/run/roboscale/R.json` names the owner pid before anything is made,
so a later run can remove what a crashed one left (only if that pid is dead).
Teardown runs on success, error, Ctrl-C, SIGTERM and interpreter exit.
"""

from __future__ import annotations

import atexit
import contextlib
import ipaddress
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from roboscale import lifeline
from roboscale.env import netcmd
from roboscale.env.cleanup import (
    KILL_GRACE_S,
    MARKER_DIR,
    PREFIX,
    cleanup_stale,
    process_start,
    remove_run,
)
from roboscale.env.cpu import CpuGroup, CpuLimit
from roboscale.env.links import BUILTIN, LinkProfile, loss_rule, tbf_args
from roboscale.env.netcmd import require_root
from roboscale.errors import UserError
from roboscale.privdir import private_dir
from roboscale.safewrite import open_stream, write_text

DEFAULT_SUBNET = "10.231.0.0/24"
TOPOLOGIES = ("star", "mesh")
EMULATOR_READY_S = 15.0


def host_addresses(subnet: str, count: int) -> list[str]:
    """The first `count` usable addresses of subnet, or a clear error."""
    try:
        net = ipaddress.IPv4Network(subnet)
    except ValueError as e:
        raise UserError(
            f"subnet {subnet!r} is not an IPv4 network like 10.231.0.0/24: {e}"
        ) from None
    if not net.is_private:
        raise UserError(f"subnet {subnet} is not private; allowed: a private IPv4 network")
    usable = list(net.hosts())
    if count > len(usable):
        raise UserError(
            f"{count} hosts do not fit in {subnet}: it has {len(usable)} host addresses; "
            f"allowed: at most {len(usable)} hosts, or a larger subnet"
        )
    return [str(a) for a in usable[:count]]


@dataclass
class Host:
    """One emulated host: spawn processes in it with `argv_prefix() + argv`."""

    index: int
    netns: str
    address: str
    cpu: CpuGroup | None = None

    @property
    def name(self) -> str:
        return f"h{self.index}"

    def argv_prefix(self) -> list[str]:
        """Runs the rest of argv inside this host's namespace and CPU group (if any)."""
        prefix = netcmd.netns_exec_prefix(self.netns)
        if self.cpu is None:
            return prefix
        # Join the cgroup first: `ip netns exec` remounts /sys without the cgroup trees.
        return ["sh", "-c", f'{self.cpu.shell_attach()} && exec "$@"', "rs-host", *prefix]

    def env(self) -> dict[str, str]:
        """Variables a process on this host should see (merge into os.environ)."""
        return {"ROBOSCALE_HOST": self.name, "ROBOSCALE_HOST_ADDRESS": self.address}

    def popen(self, argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[Any]:
        env = {**os.environ, **self.env(), **kwargs.pop("env", {}), **lifeline.child_env()}
        return subprocess.Popen([*self.argv_prefix(), *argv], env=env, **kwargs)

    def run(self, argv: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, **self.env(), **lifeline.child_env()}
        return subprocess.run(
            [*self.argv_prefix(), *argv],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


@dataclass
class HostSet:
    """`count` hosts joined by `profile` in a star (switch) or a full mesh."""

    count: int
    profile: LinkProfile = BUILTIN["ethernet"]
    topology: str = "star"
    subnet: str = DEFAULT_SUBNET
    cpu: CpuLimit | Sequence[CpuLimit | None] | None = None
    seed: int = 0
    verify_link: bool = True
    run_id: str = field(default_factory=lambda: secrets.token_hex(3))
    hosts: list[Host] = field(init=False, default_factory=list)
    emulator_stats: dict[str, int] = field(init=False, default_factory=dict)
    link_report: dict[str, object] = field(init=False, default_factory=dict)
    _emulator: subprocess.Popen[str] | None = field(init=False, default=None)
    _workdir: Path | None = field(init=False, default=None)
    _is_up: bool = field(init=False, default=False)
    _old_sigterm: Any = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.count < 1:
            raise UserError(f"hosts: {self.count} is not allowed; allowed: 1 or more")
        if self.topology not in TOPOLOGIES:
            raise UserError(f"topology {self.topology!r}; allowed: {', '.join(TOPOLOGIES)}")
        self.addresses = host_addresses(self.subnet, self.count)
        self.prefixlen = ipaddress.IPv4Network(self.subnet).prefixlen
        limits = self.cpu if isinstance(self.cpu, Sequence) else [self.cpu] * self.count
        if len(limits) != self.count:
            raise UserError(f"cpu: {len(limits)} limits for {self.count} hosts; give one per host")
        self._limits: list[CpuLimit | None] = list(limits)

    @property
    def switch_netns(self) -> str:
        return f"{PREFIX}{self.run_id}-sw"

    def netns_of(self, index: int) -> str:
        return f"{PREFIX}{self.run_id}-h{index}"

    @property
    def fabric(self) -> str:
        return "emulator" if self.profile.needs_emulator else "kernel"

    # -- lifetime -------------------------------------------------------------

    def __enter__(self) -> HostSet:
        self.up()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.down()

    def up(self) -> HostSet:
        """Create everything and (verify_link) measure that the profile holds; idempotent.
        On any failure, tear down and re-raise."""
        if self._is_up:
            return self
        require_root()
        if (
            self.profile.loss > 0
            and not self.profile.needs_emulator
            and not netcmd.have("iptables")
        ):
            raise UserError(
                f"link profile {self.profile.name!r} has loss but iptables is not installed",
                hint="apt-get install -y iptables",
            )
        cleanup_stale()
        self._install_guards()
        try:
            self._write_marker()
            self._build()
            self._is_up = True
            if self.verify_link:
                # Imported here: verify builds on Host and HostSet.
                from roboscale.env.verify import verify

                self.link_report = verify(self)
        except BaseException:
            self.down()
            raise
        return self

    def _install_guards(self) -> None:
        # Killed outright (SIGKILL), this process runs no teardown: its guardian ends
        # the processes in the hosts (they carry its token) and removes the hosts.
        lifeline.on_death("roboscale.env.cleanup:cleanup_stale")
        atexit.register(self.down)
        if threading.current_thread() is threading.main_thread():
            self._old_sigterm = signal.signal(signal.SIGTERM, _raise_interrupt)

    def _write_marker(self) -> None:
        # Root-only state: a marker directory someone else prepared is refused.
        marker_dir = private_dir(MARKER_DIR)
        self._workdir = Path(tempfile.mkdtemp(prefix=f"{self.run_id}-", dir=marker_dir))
        marker = {
            "pid": os.getpid(),
            "start": process_start(os.getpid()),
            "netns": [self.switch_netns, *[self.netns_of(i) for i in range(self.count)]],
            "cgroups": [],
            "workdir": str(self._workdir),
        }
        write_text(self._marker_path, json.dumps(marker))

    @property
    def _marker_path(self) -> Path:
        return MARKER_DIR / f"{self.run_id}.json"

    def _build(self) -> None:
        _ensure_netns(self.switch_netns)
        self.hosts.clear()  # up() after down() builds them again
        for i in range(self.count):
            _ensure_netns(self.netns_of(i))
            cpu = self._make_cpu_group(i)
            self.hosts.append(Host(i, self.netns_of(i), self.addresses[i], cpu))
        if self.fabric == "emulator":
            self._build_emulator()
        elif self.topology == "star":
            self._build_bridge()
        else:
            self._build_kernel_mesh()

    def _make_cpu_group(self, index: int) -> CpuGroup | None:
        limit = self._limits[index]
        if limit is None:
            return None
        group = CpuGroup(self.netns_of(index), limit)
        marker = json.loads(self._marker_path.read_text())
        marker["cgroups"].extend(str(p) for p in group.dirs.values())
        write_text(self._marker_path, json.dumps(marker))
        group.create()
        return group

    def _build_bridge(self) -> None:
        sw = self.switch_netns
        netcmd.ip("link", "add", "name", "br0", "type", "bridge", netns=sw)
        netcmd.ip("link", "set", "dev", "br0", "up", netns=sw)
        for host in self.hosts:
            port = f"p{host.index}"
            netcmd.ip(
                "link", "add", "name", port, "type", "veth",
                "peer", "name", "eth0", "netns", host.netns, netns=sw,
            )  # fmt: skip
            netcmd.ip("link", "set", "dev", port, "master", "br0", "up", netns=sw)
            netcmd.ip(
                "addr", "add", f"{host.address}/{self.prefixlen}", "dev", "eth0", netns=host.netns
            )
            netcmd.ip("link", "set", "dev", "eth0", "up", netns=host.netns)
            self._shape(host.netns, "eth0")
            self._shape(sw, port)
            self._drop(host.netns)

    def _build_kernel_mesh(self) -> None:
        for host in self.hosts:
            netcmd.ip("addr", "add", f"{host.address}/32", "dev", "lo", netns=host.netns)
        for a in self.hosts:
            for b in self.hosts[a.index + 1 :]:
                ab, ba = f"m{b.index}", f"m{a.index}"
                netcmd.ip(
                    "link", "add", "name", ab, "type", "veth",
                    "peer", "name", ba, "netns", b.netns, netns=a.netns,
                )  # fmt: skip
                for host, dev, peer in ((a, ab, b), (b, ba, a)):
                    netcmd.ip("link", "set", "dev", dev, "up", netns=host.netns)
                    netcmd.ip(
                        "route", "add", f"{peer.address}/32", "dev", dev,
                        "src", host.address, netns=host.netns,
                    )  # fmt: skip
                    self._shape(host.netns, dev)
        for host in self.hosts:
            self._drop(host.netns)

    def _shape(self, netns: str, dev: str) -> None:
        netcmd.in_netns(
            netns, "tc", "qdisc", "replace", "dev", dev, "root", *tbf_args(self.profile)
        )

    def _drop(self, netns: str) -> None:
        if self.profile.loss > 0:
            netcmd.in_netns(netns, *loss_rule(self.subnet, self.profile.loss))

    def _build_emulator(self) -> None:
        assert self._workdir is not None
        config = {
            "hosts": [{"netns": h.netns, "address": h.address} for h in self.hosts],
            "tun": "tun0",
            "topology": self.topology,
            "profile": self.profile.as_dict(),
            "seed": self.seed,
            "stats": str(self._workdir / "linkemu-stats.json"),
        }
        path = self._workdir / "linkemu.json"
        write_text(path, json.dumps(config))
        with os.fdopen(open_stream(self._workdir / "linkemu.log"), "w") as log:
            self._emulator = subprocess.Popen(
                [*netcmd.netns_exec_prefix(self.switch_netns), sys.executable, "-m",
                 "roboscale.env.linkemu", str(path)],
                stdout=subprocess.PIPE, stderr=log, text=True,
                env={**os.environ, **lifeline.child_env()},
            )  # fmt: skip
        _await_ready(self._emulator, self._workdir / "linkemu.log")
        for host in self.hosts:
            net = host.netns
            netcmd.ip("addr", "add", f"{host.address}/{self.prefixlen}", "dev", "tun0", netns=net)
            netcmd.ip("link", "set", "dev", "tun0", "mtu", "1500", "up", netns=net)

    def down(self) -> None:
        """Remove every process, namespace, cgroup and file of this set; safe to repeat."""
        if self._old_sigterm is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, self._old_sigterm)
            self._old_sigterm = None
        with contextlib.suppress(Exception):
            atexit.unregister(self.down)
        if not self._marker_path.exists():
            return
        self._stop_emulator()
        marker = json.loads(self._marker_path.read_text())
        remove_run(marker)
        self._marker_path.unlink(missing_ok=True)
        self._is_up = False

    def _stop_emulator(self) -> None:
        proc, self._emulator = self._emulator, None
        if proc is None:
            return
        proc.terminate()
        try:
            proc.wait(KILL_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()
        assert self._workdir is not None
        stats = self._workdir / "linkemu-stats.json"
        with contextlib.suppress(OSError, ValueError):
            self.emulator_stats = json.loads(stats.read_text())

    def facts(self) -> dict[str, object]:
        """What the trial metadata should record about the hosts."""
        return {
            "run_id": self.run_id,
            "count": self.count,
            "topology": self.topology,
            "subnet": self.subnet,
            "fabric": self.fabric,
            "link_profile": self.profile.as_dict(),
            "link_measured": self.link_report,
            "hosts": [
                {"name": h.name, "netns": h.netns, "address": h.address}
                | ({"cpu": h.cpu.facts()} if h.cpu else {})
                for h in self.hosts
            ],
        }


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _ensure_netns(name: str) -> None:
    if name not in netcmd.netns_names():
        netcmd.run(["ip", "netns", "add", name])
    netcmd.ip("link", "set", "dev", "lo", "up", netns=name)
    # IPv6 autoconfiguration would add stray packets to every measurement.
    netcmd.in_netns(name, "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1")  # fmt: skip


def _await_ready(proc: subprocess.Popen[str], log: Path) -> None:
    assert proc.stdout is not None
    deadline = time.monotonic() + EMULATOR_READY_S
    import selectors

    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if sel.select(max(0.0, deadline - time.monotonic())):
                line = proc.stdout.readline()
                if line.strip() == "READY":
                    return
                if not line:
                    break
    tail = log.read_text()[-800:] if log.exists() else ""
    raise UserError(f"link emulator did not start: {tail.strip() or 'no output'}")
