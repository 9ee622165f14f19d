"""A real sshd on a loopback address other than 127.0.0.1 (127.0.0.2): a host that
roboscale reaches only through OpenSSH, with a host key and a client key made for the test,
and the ssh_config file (ROBOSCALE_SSH_CONFIG) that knows them."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.lab.sshd_hosts import start_sshd

SSHD = "/usr/sbin/sshd"
ADDRESS = "127.0.0.2"


@dataclass
class LoopbackHost:
    address: str
    port: int
    keys: Path
    config: Path  # ssh_config: the client key, known_hosts with the host's key
    stranger_config: Path  # the same, but known_hosts does not hold the host's key
    refused_config: Path  # the host's key known, but a client key it does not authorize


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        port: int = s.getsockname()[1]
        return port


def _client_config(path: Path, keys: Path, known_hosts: Path, key: str = "client") -> Path:
    path.write_text(
        f"Host {ADDRESS}\n  User root\n  IdentityFile {keys / key}\n  IdentitiesOnly yes\n"
        f"  UserKnownHostsFile {known_hosts}\n  GlobalKnownHostsFile /dev/null\n"
    )
    return path


def _start(config: Path) -> subprocess.Popen[bytes]:
    return start_sshd([SSHD], config, "sshd")


@contextlib.contextmanager
def loopback_sshd(tmp: Path) -> Iterator[LoopbackHost]:
    keys = tmp / "keys"
    keys.mkdir(mode=0o700, parents=True)
    for name in ("hostkey", "client", "stranger"):
        _keygen(keys / name)
    (keys / "authorized").write_text((keys / "client.pub").read_text())
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation
    port = _free_port(ADDRESS)
    kind, key = (keys / "hostkey.pub").read_text().split()[:2]
    (keys / "known_hosts").write_text(f"[{ADDRESS}]:{port} {kind} {key}\n")
    (keys / "empty_known_hosts").write_text("")
    config = keys / "sshd.conf"
    config.write_text(
        f"ListenAddress {ADDRESS}\nPort {port}\nHostKey {keys / 'hostkey'}\n"
        f"PidFile {keys / 'sshd.pid'}\nAuthorizedKeysFile {keys / 'authorized'}\n"
        "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
    )
    proc = _start(config)
    try:
        yield LoopbackHost(
            ADDRESS, port, keys,
            _client_config(keys / "ssh_config", keys, keys / "known_hosts"),
            _client_config(keys / "stranger_config", keys, keys / "empty_known_hosts"),
            _client_config(keys / "refused_config", keys, keys / "known_hosts", "stranger"),
        )  # fmt: skip
    finally:
        with contextlib.suppress(ProcessLookupError):  # the listener and any session left
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
