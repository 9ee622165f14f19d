"""Run one command on an inventory host as if it ran here: `python -m roboscale.lab.sshexec
HOSTFILE -- ARGV...`, the argv prefix of a real host in a Placement.

The lab starts agents and infrastructure with a prefix and an environment, talks to
them over stdin/stdout and reads the files they write under the run folder. This
wrapper keeps all of that true across SSH:
- the lab's interpreter becomes the host's venv (`roboscale hosts install`);
- every path under the run folder, in argv, in the environment and in an agent's
  JSON configuration, becomes the same path under the host's mirror of the run
  (`<workdir>/runs/<run>/...`); files the command reads are copied there first,
  files it wrote are copied back when it ends; the lab's own inputs outside the run
  folder (stream files it made of bags) are copied to the mirror's `inputs/`;
- the environment the lab set for it (ROS_*, ROBOSCALE_*, ...) is passed along;
- stdin and stdout go straight through ssh, so the READY/GO/DONE protocol is the same;
- on the host, a guard runs the command in its own process group and ends the group
  when its stdin closes: when this wrapper or ssh dies (even by SIGKILL), or the
  connection drops. The wrapper holds that stdin open while it lives, even after its
  own stdin ends (roscore reads nothing). Nothing stays behind on the host.
"""

from __future__ import annotations

import base64
import json
import os
import selectors
import shlex
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from roboscale.env.inventory import InventoryHost
from roboscale.env.ssh import Ssh, SshError
from roboscale.runtime.threads import ThreadScope
from roboscale.safewrite import write_bytes, write_text

FORWARDED = ("ROS_", "ROBOSCALE_", "ZENOH", "CYCLONEDDS", "RUST_LOG", "PYTHONUNBUFFERED")
REMOTE_VENV_PYTHON = "venv/bin/python"
REMOTE_PACKAGE = "pkg"  # a folder with a link to the venv's roboscale (hosts install)

# The host-side guard (a fixed script of ours, run by the host's Python): start the
# command in a new process group, feed it our stdin, and end the group on EOF.
GUARD = """\
import os, signal, subprocess, sys, threading
child = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, start_new_session=True)
def end(*_):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
            child.wait(2)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT):
    signal.signal(s, lambda *a: (end(), os._exit(143)))
def feed():
    for line in iter(sys.stdin.buffer.readline, b""):
        try:
            child.stdin.write(line); child.stdin.flush()
        except OSError:
            break
    try:
        child.wait(5)
    except subprocess.TimeoutExpired:
        pass
    end()
threading.Thread(target=feed, daemon=True).start()
code = child.wait()
os._exit(code if code >= 0 else 128 - code)  # not sys.exit: the feeder may hold stdin
"""


@dataclass(frozen=True)
class HostFile:
    """What the wrapper needs to know, written by the lab into the run's private folder."""

    host: HostRecord
    control_dir: str
    run_dir: str  # the local run folder
    remote_run: str  # its mirror on the host, relative to the host's workdir
    lab_pythons: list[str]  # local interpreters that mean "the host's venv"
    # Local folders of the lab's own inputs outside the run folder (the stream files it
    # made of bags): a file there named in a config is uploaded to the host's `inputs/`.
    input_dirs: list[str] = field(default_factory=list)

    def write(self, path: Path) -> Path:
        write_text(path, json.dumps(asdict(self)))
        return path

    @classmethod
    def read(cls, path: Path) -> HostFile:
        return cls(**json.loads(path.read_text()))

    def inventory_host(self) -> InventoryHost:
        h = self.host
        return InventoryHost(
            name=h["name"],
            address=h["address"],
            user=h["user"],
            port=h["port"],
            identity_file=_path(h["identity_file"]),
            ssh_config=_path(h["ssh_config"]),
            known_hosts=_path(h["known_hosts"]),
            workdir=h["workdir"],
            python=h["python"],
            roles=tuple(h["roles"]),
            peer_address=h["peer_address"],
        )


class HostRecord(TypedDict):
    """An InventoryHost as the host file holds it (JSON: paths as text, roles a list)."""

    name: str
    address: str
    user: str | None
    port: int | None
    identity_file: str | None
    ssh_config: str | None
    known_hosts: str | None
    workdir: str
    python: str
    roles: list[str]
    peer_address: str | None


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _text(value: Path | None) -> str | None:
    return str(value) if value is not None else None


def host_record(host: InventoryHost) -> HostRecord:
    return HostRecord(
        name=host.name,
        address=host.address,
        user=host.user,
        port=host.port,
        identity_file=_text(host.identity_file),
        ssh_config=_text(host.ssh_config),
        known_hosts=_text(host.known_hosts),
        workdir=host.workdir,
        python=host.python,
        roles=list(host.roles),
        peer_address=host.peer_address,
    )


class Mirror:
    """Local paths under the run folder and their places on the host."""

    def __init__(self, hf: HostFile) -> None:
        self.local = Path(hf.run_dir)
        self.remote = hf.remote_run.rstrip("/")
        self.inputs = [Path(d) for d in hf.input_dirs]
        self.uploads: dict[str, bytes] = {}
        self.downloads: dict[str, Path] = {}

    def remote_path(self, value: str) -> str:
        path = Path(value)
        if not path.is_absolute():
            return value
        if path.is_relative_to(self.local):
            return f"{self.remote}/{path.relative_to(self.local)}"
        for index, folder in enumerate(self.inputs):
            if path.is_relative_to(folder) and path.is_file():
                return f"{self.remote}/inputs/{index}/{path.relative_to(folder)}"
        return value

    def arg(self, value: str) -> str:
        """An argument: a file under the run folder is uploaded (an agent's JSON config
        with its own paths mapped) and named by its remote path."""
        mapped = self.remote_path(value)
        if mapped == value or not Path(value).is_file():
            return mapped
        data = Path(value).read_bytes()
        if value.endswith(".json"):
            data = json.dumps(self._json(json.loads(data))).encode()
        self.uploads[mapped] = data
        return mapped

    def _json(self, node: Any) -> Any:
        if isinstance(node, dict):
            return {k: self._json(v) for k, v in node.items()}
        if isinstance(node, list):
            return [self._json(v) for v in node]
        if isinstance(node, str):
            mapped = self.remote_path(node)
            if mapped != node and Path(node).is_file():
                self.uploads[mapped] = Path(node).read_bytes()  # an input: a stream file
            elif mapped != node:
                self.downloads[mapped] = Path(node)  # an output, written there
            return mapped
        return node


def remote_command(hf: HostFile, argv: list[str], environ: dict[str, str]) -> tuple[str, Mirror]:
    mirror = Mirror(hf)
    program = REMOTE_VENV_PYTHON if argv[0] in hf.lab_pythons else argv[0]
    args = [program, *(mirror.arg(a) for a in argv[1:])]
    env = {k: mirror.remote_path(v) for k, v in environ.items() if k.startswith(FORWARDED)}
    if environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = REMOTE_PACKAGE
    dirs = {str(Path(p).parent) for p in [*mirror.uploads, *mirror.downloads]}
    dirs |= {v for k, v in env.items() if v.startswith(mirror.remote + "/")}
    guard = base64.b64encode(GUARD.encode()).decode()
    command = " && ".join(
        [
            *([f"mkdir -p {' '.join(shlex.quote(d) for d in sorted(dirs))}"] if dirs else []),
            f"guard=$(echo {guard} | base64 -d)",
            "exec env "
            + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
            + f' {shlex.quote(hf.host["python"] or "python3")} -c "$guard" '
            + " ".join(shlex.quote(a) for a in args),
        ]
    )
    return command, mirror


def upload(ssh: Ssh, mirror: Mirror) -> None:
    """Copy the files the command reads to the host's mirror, each over the shared
    connection's stdin: a command line could not carry them (an argument holds 128 KiB)."""
    for remote, data in mirror.uploads.items():
        write = f"mkdir -p {shlex.quote(str(Path(remote).parent))} && cat > {shlex.quote(remote)}"
        done = ssh.run(["sh", "-c", write], timeout_s=600, stdin=data)
        if done.returncode != 0:
            raise SshError(f"host {ssh.host.name}: cannot write {remote} in {ssh.host.workdir}")


def fetch(ssh: Ssh, mirror: Mirror) -> None:
    """Copy back the files the command wrote under the run folder's mirror."""
    for remote, local in mirror.downloads.items():
        done = ssh.run(["sh", "-c", f"cat {shlex.quote(remote)} 2>/dev/null"], timeout_s=600)
        if done.returncode == 0 and done.stdout:
            local.parent.mkdir(parents=True, exist_ok=True)
            write_bytes(local, done.stdout)


def relay(proc: subprocess.Popen[bytes], stop_fd: int) -> None:
    """Pass our stdin on to ssh, but keep ssh's stdin open after our own ends: commands
    that read nothing (roscore, with stdin from /dev/null) must live until this wrapper
    ends, and the host's guard takes the end of its stdin for the end of the wrapper.
    Ends when `stop_fd` becomes readable, so that its owner can join it."""
    assert proc.stdin is not None
    stdin = sys.stdin.buffer.fileno()
    with selectors.DefaultSelector() as sel:
        sel.register(stdin, selectors.EVENT_READ)
        sel.register(stop_fd, selectors.EVENT_READ)
        while True:
            ready = {key.fd for key, _ in sel.select()}
            if stop_fd in ready:
                return
            chunk = os.read(stdin, 65536)
            if not chunk:
                return
            try:
                proc.stdin.write(chunk)
                proc.stdin.flush()
            except OSError:
                return


def _relay_failed(name: str, error: BaseException) -> None:
    print(f"sshexec: {name} failed: {error!r}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3 or args[1] != "--":
        print("usage: python -m roboscale.lab.sshexec HOSTFILE -- ARGV...", file=sys.stderr)
        return 2
    hf = HostFile.read(Path(args[0]))
    ssh = Ssh(hf.inventory_host(), Path(hf.control_dir))
    command, mirror = remote_command(hf, args[2:], dict(os.environ))
    upload(ssh, mirror)
    proc = subprocess.Popen(ssh.shell_argv(command), stdin=subprocess.PIPE)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        # Ending ssh closes the host's stdin: its guard ends the command's group.
        signal.signal(sig, lambda *_: proc.kill())
    stop_r, stop_w = os.pipe()
    with ThreadScope("sshexec", on_error=_relay_failed) as scope:
        scope.spawn(relay, proc, stop_r, name="sshexec-stdin")
        code = proc.wait()
        os.write(stop_w, b"x")
    for fd in (stop_r, stop_w):
        os.close(fd)
    fetch(ssh, mirror)
    return code


if __name__ == "__main__":
    exit_code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(exit_code)
