"""Node agent processes and the line protocol the lab speaks with them."""

from __future__ import annotations

import contextlib
import hashlib
import os
import selectors
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import roboscale
from roboscale import lifeline
from roboscale.privdir import private_subdir
from roboscale.safewrite import open_stream, write_text
from roboscale.workloads.base import AgentConfig

# Variables of the lab's own interpreter that must not leak into system-Python agents.
_PYTHON_ENV = ("PYTHONHOME", "PYTHONPATH", "VIRTUAL_ENV", "PYTHONSTARTUP")


READY_GRACE_S = 15.0  # interpreter start-up and imports, beyond the match timeout


class NodeFailure(Exception):
    """A node did not follow the protocol in time; the message says which and why."""


def package_path() -> Path:
    """A folder holding only a link to this roboscale package, for agents' PYTHONPATH.

    Agents of ros1 run in the system Python; pointing them at the venv's
    site-packages would pull the lab's compiled dependencies into it. The folder sits
    in this user's private runtime directory (`privdir`: owned by us, 0700, checked),
    never at a path another user could create first: agents run as root on emulated
    hosts. One per package location, reused by every run, so none is left behind.
    """
    package = Path(roboscale.__file__).resolve().parent
    tag = hashlib.sha256(str(package).encode()).hexdigest()[:12]
    root = private_subdir(f"pkg-{tag}")
    link = root / "roboscale"
    if not link.is_symlink() or link.resolve() != package:
        tmp = root / f".link-{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(package, target_is_directory=True)
        os.replace(tmp, link)  # atomic: two runs starting at once both succeed
    return root


@dataclass
class NodeProcess:
    name: str
    role: str
    output: Path
    proc: subprocess.Popen[bytes]
    log: Path
    buffer: bytes = b""
    lines: list[str] = field(default_factory=list)

    def send(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((line + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # it exited; its exit is reported where we wait for its DONE

    def tail(self) -> str:
        try:
            text = self.log.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-3:])

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):  # the agent is gone; so is the pipe
                    stream.close()


def spawn(
    python: str,
    config: AgentConfig,
    workdir: Path,
    env: dict[str, str],
    prefix: list[str] | None = None,
) -> NodeProcess:
    """Start an agent; `prefix` runs it on an emulated host (namespace, CPU group)."""
    name = config.name
    cfg_path = workdir / f"{name}.json"
    write_text(cfg_path, config.to_json())
    log = workdir / f"{name}.log"
    base = {k: v for k, v in os.environ.items() if k not in _PYTHON_ENV}
    proc_env = {**base, **env, "PYTHONPATH": str(package_path()), "PYTHONUNBUFFERED": "1"}
    proc_env.update(lifeline.child_env())  # ends with the lab, even on SIGKILL
    with os.fdopen(open_stream(log), "wb") as err:
        proc = subprocess.Popen(
            [*(prefix or []), python, "-m", "roboscale.workloads.agent", str(cfg_path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            # Unbuffered: a line to an agent that died fails in send() and is gone. A
            # buffered pipe kept it and raised BrokenPipeError again when kill() closed it.
            bufsize=0,
            env=proc_env,
            start_new_session=True,
        )
    return NodeProcess(name, config.role, Path(config.nodes[0].output), proc, log)


def await_line(nodes: list[NodeProcess], expected: str, timeout_s: float) -> None:
    """Wait until every node printed `expected`; fail naming the first node that did not."""
    pending = {
        n.proc.stdout.fileno(): n
        for n in nodes
        if n.proc.stdout is not None and not _consume(n, expected)  # already read
    }
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        for fd in pending:
            sel.register(fd, selectors.EVENT_READ)
        while pending:
            left = deadline - time.monotonic()
            if left <= 0:
                node = next(iter(pending.values()))
                raise NodeFailure(
                    f"{node.name}: no {expected} within {timeout_s:.0f} s. {node.tail()}"
                )
            for key, _ in sel.select(min(left, 1.0)):
                node = pending[int(key.fd)]
                if _read_until(node, expected):
                    sel.unregister(key.fd)
                    del pending[int(key.fd)]


def _read_until(node: NodeProcess, expected: str) -> bool:
    chunk = os.read(node.proc.stdout.fileno(), 65536) if node.proc.stdout else b""
    if not chunk:
        code = node.proc.wait()
        last = node.lines[-1] if node.lines else ""
        raise NodeFailure(
            f"{node.name} exited (code {code}) before {expected}. {last} {node.tail()}"
        )
    node.buffer += chunk
    return _consume(node, expected)


def _consume(node: NodeProcess, expected: str) -> bool:
    """Take complete lines up to `expected`; lines after it stay for the next wait."""
    while b"\n" in node.buffer:
        raw, node.buffer = node.buffer.split(b"\n", 1)
        line = raw.decode(errors="replace").strip()
        node.lines.append(line)
        if line == expected:
            return True
        if line.startswith("NOMATCH"):
            raise NodeFailure(f"{node.name}: {line}")
    return False
