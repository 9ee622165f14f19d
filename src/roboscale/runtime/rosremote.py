"""ROS 1 nodes on other hosts: a launch file's `<machine>` reached by OpenSSH, as roslaunch
reaches it, with each remote node a child of the local supervisor.

A node on a machine elsewhere is a `CommandChild` whose process is a local keeper of one
`ssh` connection; on the host, a fixed guard of ours (Python, as rospy needs) runs the
node in a process group of its own. The supervisor sees that child exactly as a local
node: its restart type, restart delay (respawn_delay) and `required` escalation apply
unchanged, and it is ready once the node registered with the master and answers there.

    local:  supervisor -> keeper (python -I -S) -> ssh (own session, dies with the keeper)
    host:   sshd -> [env-loader] env ROS_MASTER_URI=.. python3 guard -> rosrun PKG TYPE ..

Ends, each way:
- the node dies on the host: the guard exits with its status (128 + signal), ssh and the
  keeper with it: an abnormal exit, which the supervisor acts on;
- the supervisor stops the child (SIGTERM to the keeper): the keeper closes ssh's stdin,
  the guard sees the end of its stdin and ends the node's group (SIGINT, as roslaunch,
  then SIGTERM, then SIGKILL), then ssh ends and the keeper with it: a graceful stop
  that waits for the node;
- the keeper or this process is killed, or the link drops: ssh dies (its parent-death
  signal) or times out (ServerAlive), the host's sshd closes the session and the guard
  ends the node the same way. Nothing stays behind on the host.

Secure by default: what runs on the host is only what the local launch file declares
(package, type, args, remaps, name, namespace, env, env-loader), every word quoted; the
guard is a fixed script of ours; nothing read from the host or the network becomes a
command. ssh runs in BatchMode with StrictHostKeyChecking=yes, whatever the user's ssh
configuration says: an unknown or changed host key is refused, never accepted (roslaunch
refuses unknown hosts too). ROBOSCALE_SSH_CONFIG names an ssh_config file (`ssh -F`),
else ssh's own configuration applies (~/.ssh/config, the agent, known_hosts).

Each machine is checked once when the tree is built, before anything starts (reachable,
host key known, env-loader executable, rosrun and python3 found after it): a problem is
an error naming the file, the `<machine>` line and its attribute.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import os
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from roboscale.errors import SpecError
from roboscale.runtime.childspec import Recipe
from roboscale.runtime.launchmodels import RosNodeChild
from roboscale.runtime.launchspec import XML_SUFFIXES, LaunchFile
from roboscale.runtime.process import CommandChild
from roboscale.runtime.rosnode import node_argv
from roboscale.runtime.tcpros import BAD_ANSWER, proxy

SSH_CONFIG_ENV = "ROBOSCALE_SSH_CONFIG"
SSH_FAILED = 255
CALLER = "/roboscale_launch"
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")
# A machine's fields (launchmodels.Machine) as roslaunch's <machine> attributes.
XML_ATTRS = {"env_loader": "env-loader", "port": "ssh-port", "timeout_s": "timeout"}

# The local keeper of one ssh connection (a fixed script, run by `python -I -S`): ssh in a
# session of its own, so that a stop (SIGTERM to the keeper's group) does not cut the
# link but closes its stdin, which the host's guard takes for "stop the node", and waits.
KEEPER = """\
import ctypes, os, signal, subprocess, sys
def dies_with_us():
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)
ssh = subprocess.Popen(sys.argv[1:], stdin=subprocess.PIPE, start_new_session=True,
                       preexec_fn=dies_with_us)
def stop(*_):
    try:
        ssh.stdin.close()
    except OSError:
        pass
for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
    signal.signal(s, stop)
code = ssh.wait()
os._exit(code if code >= 0 else 128 - code)
"""

# The host's guard (a fixed script of ours, run by the host's python3 after the
# env-loader): argv is [default ROS_IP, program, args...]. The node runs in a new process
# group; the end of our stdin (the keeper stopped, ssh or the link died) ends that group.
GUARD = """\
import os, signal, subprocess, sys, threading
ip, argv = sys.argv[1], sys.argv[2:]
if ip and not (os.environ.get("ROS_IP") or os.environ.get("ROS_HOSTNAME")):
    os.environ["ROS_IP"] = ip
node = subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True)
def end(*_):
    for sig, wait_s in ((signal.SIGINT, 5), (signal.SIGTERM, 2), (signal.SIGKILL, 2)):
        try:
            os.killpg(node.pid, sig)
            node.wait(wait_s)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass
for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
    signal.signal(s, lambda *a: (end(), os._exit(143)))
def watch():
    while sys.stdin.buffer.read(4096):
        pass
    end()
threading.Thread(target=watch, daemon=True).start()
code = node.wait()
try:  # what the node left in its group would hold the session open
    os.killpg(node.pid, signal.SIGKILL)
except ProcessLookupError:
    pass
if code < 0:
    print(f"roboscale guard: node killed by signal {-code}", file=sys.stderr, flush=True)
os._exit(code if code >= 0 else 128 - code)
"""

# The check of a machine, once per launch: exit codes name what is missing.
NO_LOADER, NO_ROSRUN, NO_PYTHON = 90, 91, 92
CHECK = "command -v rosrun >/dev/null || exit 91; command -v python3 >/dev/null || exit 92; exit 0"


@dataclass(frozen=True)
class Where:
    """Where a machine is declared, for its errors: file, line, and how fields are named."""

    file: Path
    line: int | None
    prefix: str  # "machine." in a roslaunch file, "ros.machines.NAME." in YAML
    xml: bool

    def error(self, attr: str, problem: str) -> SpecError:
        name = XML_ATTRS.get(attr, attr) if self.xml else attr
        return SpecError(str(self.file), self.line, self.prefix + name, problem)


@dataclass(frozen=True)
class RemoteRosNode:
    """What the local launch file declares of a node: all that reaches the host."""

    name: str
    pkg: str
    type: str
    ns: str
    args: list[str]
    remap: dict[str, str]
    env: dict[str, str]


@dataclass(frozen=True)
class Host:
    """How to reach one machine (launchmodels.Machine, without its name and place)."""

    name: str
    address: str
    user: str | None = None
    port: int | None = None
    env_loader: str | None = None
    timeout_s: float = 10.0


def is_local(address: str) -> bool:
    """A machine at one of this host's names runs its nodes here, without ssh."""
    return address in LOCAL_HOSTS or address == socket.gethostname()


def ssh_argv(host: Host) -> list[str]:
    """`ssh` to the host, up to the destination: batch mode, host keys always checked."""
    argv = ["ssh"]
    config = os.environ.get(SSH_CONFIG_ENV)
    if config:
        argv += ["-F", config]
    argv += [
        "-o", "BatchMode=yes",
        "-o", "StrictHostKeyChecking=yes",
        "-o", f"ConnectTimeout={max(1, round(host.timeout_s))}",
        "-o", "ServerAliveInterval=5",
        "-o", "ServerAliveCountMax=3",
        "-o", "ControlMaster=no",
        "-o", "LogLevel=ERROR",
        "-T",
    ]  # fmt: skip
    if host.port is not None:
        argv += ["-p", str(host.port)]
    if host.user is not None:
        argv += ["-l", host.user]
    return [*argv, "--", host.address]


def _loader(host: Host) -> list[str]:
    return [host.env_loader] if host.env_loader else []


def check_host(host: Host, where: Where) -> None:
    """Reach the host once, before anything starts: every problem names the machine's line."""
    test = ""
    if host.env_loader:
        test = f"test -x {shlex.quote(host.env_loader)} || exit {NO_LOADER}; "
    command = test + "exec " + shlex.join([*_loader(host), "sh", "-c", CHECK])
    try:
        done = subprocess.run(
            [*ssh_argv(host), command], capture_output=True, text=True, check=False,
            stdin=subprocess.DEVNULL, timeout=host.timeout_s + 30,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise where.error("address", f"{host.address} did not answer ssh in time") from None
    except OSError as e:
        raise where.error("address", f"cannot run ssh: {e}") from None
    if done.returncode == SSH_FAILED:
        raise _ssh_failure(host, where, done.stderr)
    after = f" after env-loader {host.env_loader}" if host.env_loader else ""
    loader = "env_loader"
    if done.returncode == NO_LOADER:
        raise where.error(loader, f"no executable {host.env_loader} on {host.address}")
    if done.returncode == NO_ROSRUN:
        problem = f"rosrun is not found on {host.address}{after}: the env-loader must set up ROS"
        raise where.error(loader, problem + ' (e.g. source setup.sh, then exec "$@")')
    if done.returncode == NO_PYTHON:
        raise where.error(loader, f"python3 is not found on {host.address}{after}")
    if done.returncode != 0:
        tail = " | ".join(done.stderr.strip().splitlines()[-2:]) or f"exit {done.returncode}"
        raise where.error(loader, f"the env-loader failed on {host.address}: {tail}")


def _ssh_failure(host: Host, where: Where, stderr: str) -> SpecError:
    text = stderr.strip()
    last = text.splitlines()[-1] if text else "no message from ssh"
    if "Host key verification failed" in text or "host key" in text.lower():
        return where.error(
            "address",
            f"the host key of {host.address} is unknown or changed ({last}): roboscale "
            "accepts only known host keys; add it to known_hosts (ssh-keyscan, then check "
            "its fingerprint)",
        )
    if "Permission denied" in text:
        who = host.user or "ssh's default user"
        return where.error("user", f"{host.address} refused the key of {who} ({last})")
    return where.error("address", f"cannot reach {host.address} over ssh ({last})")


def remote_command(host: Host, argv: list[str], env: Mapping[str, str], ros_ip: str) -> str:
    """The shell line the host runs: the env-loader, the launch's variables, the guard.
    Every word is quoted; the guard, decoded on the host, is the one word not a literal."""
    bad = [name for name in env if not ENV_NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"environment variable name {bad[0]!r} is not allowed: {ENV_NAME.pattern}")
    guard = base64.b64encode(GUARD.encode()).decode()
    head = shlex.join([*_loader(host), "env", *(f"{k}={v}" for k, v in env.items()), "python3"])
    tail = shlex.join([ros_ip, *argv])
    return f'guard=$(echo {guard} | base64 -d) && exec {head} -c "$guard" {tail}'


def remote_node(
    host: Host,
    node: RemoteRosNode,
    master_uri: str,
    *,
    log: Path | None,
    ready_timeout_s: float,
) -> CommandChild:
    """A ROS node on `host` as a command child, ready once registered with the master.
    A malformed environment variable name is a ValueError (the node's `env`)."""
    argv = ["rosrun", node.pkg, *node_argv(node.type, node.name, node.args, node.remap)]
    env = {"ROS_MASTER_URI": master_uri, **node.env}
    if node.ns not in ("", "/"):
        env["ROS_NAMESPACE"] = node.ns
    command = remote_command(host, argv, env, _host_ip(host.address))
    keeper = [sys.executable, "-I", "-S", "-c", KEEPER, *ssh_argv(host), command]
    ros_name = f"{node.ns.rstrip('/')}/{node.name}"
    return CommandChild(
        node.name, keeper, log=log, ready_timeout_s=ready_timeout_s,
        probe=lambda: answers(master_uri, ros_name),
    )  # fmt: skip


def _host_ip(address: str) -> str:
    """The host's address as its node should advertise it (ROS_IP), when it is an IP:
    an ssh alias says nothing, and the env-loader's ROS_IP or ROS_HOSTNAME wins anyway."""
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return ""


def answers(master_uri: str, ros_name: str) -> bool:
    """The node is registered and its registered address answers: a new instance, since a
    dead one's registration stays with the master until the new one replaces it. Each call
    is bounded (tcpros.proxy): a hung node answers no probe, it does not hang the start."""
    try:
        code, _, uri = proxy(master_uri).lookupNode(CALLER, ros_name)
        if code != 1:
            return False
        code, _, _ = proxy(str(uri)).getPid(CALLER)
        return bool(code == 1)
    except BAD_ANSWER:
        return False


def reach_address(addresses: list[str]) -> str | None:
    """The address of this host that the given remote hosts reach it at (the master's URI
    and local nodes' ROS_IP), or None when all are local. ROS_IP or ROS_HOSTNAME, when
    set, say it; else the source address of the route to the first remote host."""
    remote = [a for a in addresses if not is_local(a)]
    if not remote:
        return None
    given = os.environ.get("ROS_IP") or os.environ.get("ROS_HOSTNAME")
    if given:
        return given
    with contextlib.suppress(OSError, UnicodeError):
        family, _, _, _, sockaddr = socket.getaddrinfo(remote[0], 9, type=socket.SOCK_DGRAM)[0]
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect(sockaddr)  # no packet is sent: the kernel only picks the route
            return str(probe.getsockname()[0])
    return None


class Remotes:
    """A launch's machines, as `build_tree` needs them: which are elsewhere, this host's
    address as they reach it, and each remote node's child (its machine checked once)."""

    def __init__(self, launch: LaunchFile) -> None:
        self.launch = launch
        ros = launch.spec.ros
        self.machines = dict(ros.machines) if ros is not None else {}
        self.checked: set[str] = set()
        self._reach: tuple[str | None] | None = None

    def elsewhere(self, machine: str) -> bool:
        found = self.machines.get(machine)
        return found is not None and not is_local(found.address)

    def reach(self) -> str | None:
        """This host's address as its machines elsewhere reach it (None: none is)."""
        if self._reach is None:
            self._reach = (reach_address(sorted({m.address for m in self.machines.values()})),)
        return self._reach[0]

    def master_host(self) -> str:
        return self.reach() or "127.0.0.1"

    def local_env(self) -> dict[str, str]:
        """ROS_IP of local ROS processes (master, nodes) that remote nodes must reach."""
        reach = self.reach()
        given = os.environ.get("ROS_IP") or os.environ.get("ROS_HOSTNAME")
        return {"ROS_IP": reach} if reach is not None and not given else {}

    def where(self, machine: str) -> Where:
        xml = self.launch.path.suffix in XML_SUFFIXES
        lines = self.launch.lines
        line = lines.get(("ros", "machines", machine), lines.get(("ros", "machines")))
        prefix = "machine." if xml else f"ros.machines.{machine}."
        return Where(self.launch.path, line, prefix, xml)

    def node(self, child: RosNodeChild, master_uri: str, log: Path) -> Recipe:
        """The start recipe of a node on its machine (`remote_node` and plain data, made
        anew at every start); the machine is reached first, once, when the tree is built.
        A malformed environment variable name is a ValueError, raised here."""
        assert child.machine is not None
        machine = self.machines[child.machine]
        host = Host(child.machine, **machine.model_dump())
        where = self.where(child.machine)
        if self.reach() is None:
            problem = f"which address of this host does {host.address} reach? set ROS_IP to it"
            raise where.error("address", problem)
        if child.machine not in self.checked:
            check_host(host, where)
            self.checked.add(child.machine)
        node = RemoteRosNode(
            child.ros_node, child.pkg, child.type, child.ns, list(child.args), dict(child.remap),
            dict(child.env),
        )  # fmt: skip
        remote_command(host, [], node.env, "")  # its words checked now, not at each start
        kwargs = {"log": log, "ready_timeout_s": child.ready_timeout_s}
        return Recipe(child.ros_node, remote_node, (host, node, master_uri), kwargs)
