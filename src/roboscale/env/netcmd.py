"""Run the system tools that build emulated hosts (ip, tc, iptables) with clear errors."""

from __future__ import annotations

import os
import shutil
import subprocess

from roboscale.errors import UserError

# Every command is bounded: a wedged `ip` must not hang a run.
COMMAND_TIMEOUT_S = 20.0


class NetCommandError(UserError):
    """A system networking command failed; the message names the command and its output."""


def run(argv: list[str], *, check: bool = True, timeout: float = COMMAND_TIMEOUT_S) -> str:
    """Run argv, return its stdout; on failure raise NetCommandError with stderr."""
    if shutil.which(argv[0]) is None:
        raise NetCommandError(
            f"'{argv[0]}' is not installed; emulated hosts need it",
            hint="apt-get install -y iproute2 iptables",
        )
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise NetCommandError(f"'{' '.join(argv)}' did not finish in {timeout:.0f} s") from None
    if check and done.returncode != 0:
        detail = (done.stderr or done.stdout).strip()
        raise NetCommandError(f"'{' '.join(argv)}' failed: {detail}")
    return done.stdout


def ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    """`ip [-n NETNS] ARGS` (always name devices with `dev`: `ip link set a up` parses
    `a` as `address`)."""
    prefix = ["ip", "-n", netns] if netns else ["ip"]
    return run([*prefix, *args], check=check)


def in_netns(netns: str, *argv: str, check: bool = True) -> str:
    """Run a command inside a network namespace."""
    return run(["ip", "netns", "exec", netns, *argv], check=check)


def netns_names() -> list[str]:
    """Names of all named network namespaces (`ip netns list`)."""
    out = run(["ip", "netns", "list"], check=False)
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


def netns_exec_prefix(netns: str) -> list[str]:
    """argv prefix that runs the rest of the command inside netns."""
    return ["ip", "netns", "exec", netns]


def is_root(euid: int | None = None) -> bool:
    return (os.geteuid() if euid is None else euid) == 0


def require_root(euid: int | None = None) -> None:
    """Hosts need root; say so, and that single-host experiments work without it."""
    if not is_root(euid):
        raise UserError(
            "emulated hosts need root (network namespaces, veth, tc, iptables and cgroups)",
            hint="run as root (e.g. sudo); single-host experiments (no hosts/link/cpu) "
            "work without root",
        )
