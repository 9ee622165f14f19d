"""OpenSSH as the transport to real machines: the client users already configure.

Every command to a host goes through the system's `ssh`, so `~/.ssh/config`, the
agent, ProxyJump and known_hosts all apply. Connections are shared (one master per
host, ControlMaster) so that starting an agent costs a channel, not a handshake.
BatchMode is on: a host that would ask for a password or confirm an unknown host
key fails at once with ssh's own message, never prompts in the middle of a sweep.
The control sockets live in a private directory of this run, removed at the end.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from roboscale import lifeline
from roboscale.env.inventory import InventoryHost
from roboscale.errors import UserError

CONNECT_TIMEOUT_S = 10
# ssh's exit status when the connection itself failed (not the remote command).
SSH_FAILED = 255


def remote_dir_word(workdir: str) -> str:
    """The working directory as one word of the remote shell: quoted whole, but for a
    leading `~/` (the remote home, which quoting would make a literal `~`)."""
    if workdir == "~":
        return '"$HOME"'
    if workdir.startswith("~/"):
        return '"$HOME"/' + shlex.quote(workdir[2:])
    return shlex.quote(workdir)


class SshError(UserError):
    """A host could not be reached or a remote command failed; names the host."""


class Ssh:
    """One inventory host's shared connection."""

    def __init__(self, host: InventoryHost, control_dir: Path) -> None:
        if shutil.which("ssh") is None:
            raise UserError(
                "the OpenSSH client 'ssh' is not installed",
                hint="apt-get install openssh-client",
            )
        self.host = host
        self.control_dir = control_dir
        self._control = control_dir / f"{host.name}.sock"

    def base_argv(self) -> list[str]:
        """`ssh` with this host's options, up to and including the destination."""
        h = self.host
        argv = ["ssh"]
        if h.ssh_config is not None:
            argv += ["-F", str(h.ssh_config)]
        argv += [
            "-o", "BatchMode=yes",
            "-o", f"ConnectTimeout={CONNECT_TIMEOUT_S}",
            "-o", "ServerAliveInterval=5",
            "-o", "ServerAliveCountMax=3",
            "-o", "ControlMaster=auto",
            "-o", f"ControlPath={self._control}",
            "-o", "ControlPersist=300",
            "-o", "LogLevel=ERROR",
        ]  # fmt: skip
        if h.identity_file is not None:
            argv += ["-i", str(h.identity_file), "-o", "IdentitiesOnly=yes"]
        if h.known_hosts is not None:
            argv += ["-o", f"UserKnownHostsFile={h.known_hosts}", "-o", "StrictHostKeyChecking=yes"]
        if h.port is not None:
            argv += ["-p", str(h.port)]
        if h.user is not None:
            argv += ["-l", h.user]
        return [*argv, "--", h.address]

    def remote_argv(self, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
        """Run argv in the host's working directory, with env, as one remote command.
        `exec` makes the remote process the shell itself, so signals reach it."""
        assignments = [f"{k}={shlex.quote(v)}" for k, v in (env or {}).items()]
        words = [*(["env", *assignments] if assignments else []), *map(shlex.quote, argv)]
        return self.shell_argv("exec " + " ".join(words))

    def shell_argv(self, command: str) -> list[str]:
        """A shell command line run in the host's working directory (made if missing)."""
        workdir = remote_dir_word(self.host.workdir)
        return [*self.base_argv(), f"mkdir -p -- {workdir} && cd -- {workdir} && {command}"]

    def run(
        self, argv: list[str], timeout_s: float = 60, stdin: bytes | None = None
    ) -> subprocess.CompletedProcess[bytes]:
        """Run a remote command and wait for it; a failed connection is an SshError."""
        try:
            done = subprocess.run(
                self.remote_argv(argv),
                input=stdin,
                capture_output=True,
                timeout=timeout_s,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SshError(
                f"host {self.host.name} ({self.host.address}): '{shlex.join(argv)}' did not "
                f"finish within {timeout_s:.0f} s"
            ) from None
        if done.returncode == SSH_FAILED:
            raise SshError(f"host {self.host.name}: {self.describe_failure(done.stderr)}")
        return done

    def check_output(self, argv: list[str], timeout_s: float = 60) -> str:
        done = self.run(argv, timeout_s)
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-3:]
            raise SshError(
                f"host {self.host.name}: '{shlex.join(argv)}' failed with exit code "
                f"{done.returncode}: {' | '.join(tail)}"
            )
        return done.stdout.decode(errors="replace")

    def put_file(self, data: bytes, remote: str, timeout_s: float = 300) -> None:
        """Write bytes to a file under the working directory (atomically: a rename)."""
        tmp = f"{remote}.part"
        done = self.run(
            [
                "sh",
                "-c",
                f"cat > {shlex.quote(tmp)} && mv {shlex.quote(tmp)} {shlex.quote(remote)}",
            ],
            timeout_s,
            stdin=data,
        )
        if done.returncode != 0:
            raise SshError(f"host {self.host.name}: cannot write {remote}: exit {done.returncode}")

    def get_tree(self, remote_dir: str, local_dir: Path, timeout_s: float = 300) -> None:
        """Copy a remote directory's contents (under the working directory) here, by tar."""
        local_dir.mkdir(parents=True, exist_ok=True)
        done = self.run(["tar", "-C", remote_dir, "-cf", "-", "."], timeout_s)
        if done.returncode != 0:
            raise SshError(f"host {self.host.name}: cannot read {remote_dir}")
        subprocess.run(
            ["tar", "-C", str(local_dir), "--no-same-owner", "-xf", "-"],
            input=done.stdout,
            check=True,
            capture_output=True,
        )

    def describe_failure(self, stderr: bytes) -> str:
        text = stderr.decode(errors="replace").strip()
        last = text.splitlines()[-1] if text else "no message from ssh"
        hints = {
            "Permission denied": "the key was refused: check identity_file, the agent, "
            "and the remote authorized_keys",
            "Host key verification failed": "the host key is unknown or changed: connect "
            "once by hand (ssh HOST) or set known_hosts",
            "Connection refused": "nothing listens for ssh there: is sshd running, the port right?",
            "timed out": "the host did not answer: is it on, and the address right?",
            "Could not resolve": "the address does not resolve: check address or ssh_config",
            "No route": "no route to the host: check the network",
        }
        hint = next((h for k, h in hints.items() if k in text), None)
        return f"ssh {self.host.address} failed: {last}" + (f" ({hint})" if hint else "")

    def close(self) -> None:
        """Stop the shared master connection."""
        if self._control.exists():
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(
                    [*self.base_argv()[:-2], "-O", "exit", "--", self.host.address],
                    capture_output=True,
                    timeout=10,
                    check=False,
                )


@contextlib.contextmanager
def connections(hosts: list[InventoryHost]) -> Iterator[dict[str, Ssh]]:
    """Shared connections to the given hosts, closed (with their sockets) at the end."""
    # The masters (ControlPersist) outlive their first command: with our lifeline
    # token they still end with us, even if we are killed outright.
    lifeline.ensure()
    control_dir = Path(tempfile.mkdtemp(prefix="roboscale-ssh-"))
    links = {h.name: Ssh(h, control_dir) for h in hosts}
    try:
        yield links
    finally:
        for link in links.values():
            link.close()
        shutil.rmtree(control_dir, ignore_errors=True)
