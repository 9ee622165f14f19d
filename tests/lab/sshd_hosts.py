"""Emulated hosts that are reached only through real OpenSSH: Debian's sshd runs in
each host's namespace with a host key and a client key made for the test."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from roboscale.env.hosts import Host, HostSet
from roboscale.env.links import BUILTIN

SSHD = "/usr/sbin/sshd"
LISTEN_TIMEOUT_S = 30.0


@dataclass
class SshLab:
    """Host 0 plays the controller's machine; hosts 1.. run sshd."""

    hostset: HostSet
    keys: Path
    sshd: dict[int, subprocess.Popen[bytes]]

    @property
    def controller(self) -> Host:
        return self.hostset.hosts[0]

    def remote(self, i: int) -> Host:
        return self.hostset.hosts[i]

    def run(self, argv: list[str], timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
        """Run a command on the controller's host (its namespace)."""
        return subprocess.run(
            [*self.controller.argv_prefix(), *argv],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )

    def drop(self, i: int) -> None:
        """The host falls off the network: every process in it dies, sshd and its sessions
        too, as when the robot's power or radio goes."""
        pids = subprocess.run(
            ["ip", "netns", "pids", self.remote(i).netns], capture_output=True, text=True
        ).stdout.split()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)
        self.sshd.pop(i).wait()

    def restart_sshd(self, i: int) -> None:
        self.sshd[i] = _start_sshd(self.remote(i), self.keys)


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _start_sshd(host: Host, keys: Path) -> subprocess.Popen[bytes]:
    config = keys / f"sshd-{host.index}.conf"
    config.write_text(
        f"ListenAddress {host.address}\nPort 22\nHostKey {keys / 'hostkey'}\n"
        f"PidFile {keys / f'sshd-{host.index}.pid'}\nAuthorizedKeysFile {keys / 'authorized'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
    )
    return start_sshd([*host.argv_prefix(), SSHD], config, f"sshd on {host.name}")


def start_sshd(argv: list[str], config: Path, what: str) -> subprocess.Popen[bytes]:
    """Start `argv -D -e -f config` and wait for sshd's own "Server listening" line."""
    proc = subprocess.Popen(
        [*argv, "-D", "-e", "-f", str(config)], stderr=subprocess.PIPE, start_new_session=True
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + LISTEN_TIMEOUT_S
    seen = b""
    while time.monotonic() < deadline:  # sshd -e says when it listens: wait for that line
        line = proc.stderr.readline()
        seen += line
        if b"Server listening" in line:
            return proc
        if not line:
            break
    proc.kill()
    proc.wait()
    raise RuntimeError(f"{what} did not start: {seen.decode(errors='replace')}")


@contextlib.contextmanager
def ssh_lab(tmp: Path, remotes: int = 2) -> Iterator[SshLab]:
    keys = tmp / "keys"
    keys.mkdir(mode=0o700)
    _keygen(keys / "hostkey")
    _keygen(keys / "client")
    _keygen(keys / "stranger")
    (keys / "authorized").write_text((keys / "client.pub").read_text())
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation
    hostset = HostSet(remotes + 1, BUILTIN["ethernet"], verify_link=False).up()
    sshd: dict[int, subprocess.Popen[bytes]] = {}
    try:
        host_key = (keys / "hostkey.pub").read_text().split()
        (keys / "known_hosts").write_text(
            "".join(f"{h.address} {host_key[0]} {host_key[1]}\n" for h in hostset.hosts)
        )
        for host in hostset.hosts[1:]:
            sshd[host.index] = _start_sshd(host, keys)
        yield SshLab(hostset, keys, sshd)
    finally:
        for proc in sshd.values():
            proc.kill()
            proc.wait()
        hostset.down()
