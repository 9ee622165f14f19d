"""ROS 1 children of a launch: a private rosmaster and nodes run as roslaunch runs them.

Stdlib only: the master is spoken to over XML-RPC; each node's executable is found once,
as rosrun finds it, and started directly (the child's pid is the node's), with
roslaunch's command line:
`args`, each remap as `from:=to`, `__name:=NAME`, and `ROS_NAMESPACE` for its namespace.
The master child sets the launch file's parameters each time it (re)starts, before any
node can ask for them, as roslaunch does before it starts its nodes.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import xmlrpc.client
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from roboscale.errors import UserError
from roboscale.runtime.child import ChildStartError, ExitCallback
from roboscale.runtime.process import CommandChild

# Variables of our interpreter that must not leak into the system Python of ROS nodes.
VENV_ENV = ("PYTHONHOME", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONSTARTUP")
CALLER = "/roboscale_launch"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def ros_env(master_uri: str, home: Path, extra: Mapping[str, str] = {}) -> dict[str, str]:
    """What a ROS process runs with: no venv variables, the master, a ROS_HOME of its own."""
    env = {k: v for k, v in os.environ.items() if k not in VENV_ENV}
    env.update(ROS_MASTER_URI=master_uri, ROS_HOME=str(home), ROS_LOG_DIR=str(home / "log"))
    if "ROS_IP" not in env and "ROS_HOSTNAME" not in env:
        env["ROS_IP"] = "127.0.0.1"
    return {**env, **extra}


def master(uri: str) -> Any:
    return xmlrpc.client.ServerProxy(uri)


def master_answers(uri: str) -> bool:
    try:
        code, _, _ = master(uri).getSystemState(CALLER)
        return bool(code == 1)
    except OSError:
        return False


def set_params(uri: str, params: Mapping[str, object]) -> None:
    proxy = master(uri)
    for name, value in params.items():
        code, message, _ = proxy.setParam(CALLER, name, value)
        if code != 1:
            raise ChildStartError("ros_master", f"cannot set parameter {name}: {message}")


def node_argv(program: str, name: str, args: list[str], remap: Mapping[str, str]) -> list[str]:
    """roslaunch's command line of one node (`program` found by `find_node`)."""
    return [program, *args, *(f"{k}:={v}" for k, v in remap.items()), f"__name:={name}"]


def find_node(pkg: str, program: str, env: Mapping[str, str]) -> str:
    """The executable of node type `program` of package `pkg`, as rosrun finds it: in the
    package's libexec folder (/usr/lib/PKG on Debian) or below the package's folder.
    Found once when the tree is built, so that a restart starts the node directly."""
    if "/" in program or program in ("", ".", ".."):
        raise UserError(f"node type {program!r}: a file name, not a path")
    try:
        done = subprocess.run(
            ["rospack", "find", pkg], capture_output=True, text=True, timeout=30, check=False,
            env=dict(env),
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as e:
        raise UserError(f"cannot run rospack to find package {pkg}: {e}") from None
    if done.returncode != 0:
        raise UserError(f"no ROS package {pkg!r} on ROS_PACKAGE_PATH")
    for folder in (Path("/usr/lib") / pkg, Path(done.stdout.strip())):
        for found in sorted(_below(folder, program)):
            if os.access(found, os.X_OK):
                return str(found)
    raise UserError(f"no executable {program!r} in ROS package {pkg}")


def _below(folder: Path, name: str, depth: int = 4) -> list[Path]:
    """Regular files named `name` at most `depth` folders below `folder` (no links)."""
    if not folder.is_dir() or depth < 0:
        return []
    found = []
    for entry in os.scandir(folder):
        if entry.is_file(follow_symlinks=False) and entry.name == name:
            found.append(Path(entry.path))
        elif entry.is_dir(follow_symlinks=False) and entry.name not in ("build", ".git"):
            found += _below(Path(entry.path), name, depth - 1)
    return found


class RosMaster:
    """A private rosmaster (a `CommandChild`), or a given one; ready once it answers and
    the launch's parameters are set on it."""

    def __init__(
        self,
        name: str,
        uri: str,
        params: Mapping[str, object],
        env: dict[str, str],
        *,
        port: int | None,
        log: Path | None = None,
        ready_timeout_s: float = 30.0,
    ) -> None:
        self.name = name
        self.uri = uri
        self.params = dict(params)
        self.ready_timeout_s = ready_timeout_s
        self.process: CommandChild | None = None
        if port is not None:  # private: run it
            argv = ["rosmaster", "--core", "-p", str(port)]
            self.process = CommandChild(
                name, argv, env=env, probe=lambda: master_answers(uri), log=log,
                ready_timeout_s=ready_timeout_s,
            )  # fmt: skip

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def start(self, on_exit: ExitCallback) -> None:
        if self.process is not None:
            self.process.start(on_exit)
        else:
            deadline = time.monotonic() + self.ready_timeout_s
            while not master_answers(self.uri):
                if time.monotonic() > deadline:
                    raise ChildStartError(self.name, f"no ROS master answers at {self.uri}")
                time.sleep(0.1)
        try:
            set_params(self.uri, self.params)
        except (OSError, xmlrpc.client.Error) as e:
            self.stop(0)
            raise ChildStartError(self.name, f"cannot set parameters: {e}") from None

    def stop(self, timeout_s: float) -> None:
        if self.process is not None:
            self.process.stop(timeout_s)

    def alive(self) -> bool:
        return self.process.alive() if self.process is not None else True
