"""Nothing outlives its controller: a guardian process ends what a dead controller started.

Agents, process nodes, roscore, Zenoh routers, the link emulator and load generators
run in sessions of their own, often behind `ip netns exec` or a cgroup-joining shell,
and some (roscore's rosmaster) fork further. PR_SET_PDEATHSIG reaches none of them
reliably: it follows the forking *thread*, is lost at a set-uid exec, and covers one
generation only. So the first time a process starts children (`ensure()`), it also
starts a guardian:

- it holds the read end of a pipe whose only write end stays in the controller, so
  the controller's death, even by SIGKILL, is an EOF the guardian sees at once;
- the controller marks its environment with a random token (`ROBOSCALE_LIFELINE`),
  which every child inherits through any prefix, session or fork;
- on EOF the guardian finds every process whose environment holds the token (from
  /proc), sends SIGTERM, then SIGKILL after a grace, until none is left; then it runs
  the cleanups the controller registered (`on_death`: e.g. removing emulated hosts).

The guardian is detached (double fork: not a child of the controller, so nobody reaps
it or counts it as a descendant), in a session of its own, ignores SIGINT and SIGHUP,
and carries no token itself. A child that is itself a controller gets its own token
and guardian; its children hold only the newer token. Standard library only.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

ENV_VAR = "ROBOSCALE_LIFELINE"
TERM_GRACE_S = 1.0  # SIGTERM first: a node may flush its files; SIGKILL after this
KILL_ROUNDS_S = 10.0  # bounds the sweep: processes forked while it runs are found again
SCAN_PERIOD_S = 0.02

_lock = threading.Lock()
_state: dict[str, object] = {}  # pid, token, write end of the pipe, registered calls


def ensure() -> str:
    """Start this process's guardian unless running; return the token children inherit."""
    with _lock:
        if _state.get("pid") == os.getpid():
            return str(_state["token"])
        token = f"{os.getpid()}-{secrets.token_hex(8)}"
        read_end, write_end = os.pipe()  # both non-inheritable; only the guardian gets one
        env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
        try:
            starter = subprocess.Popen(
                [sys.executable, "-m", "roboscale.lifeline", token, str(os.getpid())],
                stdin=read_end,
                stdout=subprocess.DEVNULL,
                env=env,
                start_new_session=True,
            )
        finally:
            os.close(read_end)
        starter.wait()  # it forks the guardian and exits at once
        _state.update(pid=os.getpid(), token=token, fd=write_end, calls=set())
        os.environ[ENV_VAR] = token
        return token


def child_env() -> dict[str, str]:
    """The variable to merge into an explicit child environment (starts the guardian)."""
    return {ENV_VAR: ensure()}


def on_death(target: str) -> None:
    """After a sweep, the guardian calls `target` ("roboscale.module:function", no args)."""
    if not target.startswith("roboscale."):
        raise ValueError(f"on_death target {target!r}: only roboscale functions are allowed")
    ensure()
    with _lock:
        calls = _state["calls"]
        assert isinstance(calls, set)
        if target in calls:
            return
        calls.add(target)
        with contextlib.suppress(OSError):  # a guardian killed from outside: nothing to tell
            os.write(int(str(_state["fd"])), (json.dumps({"call": target}) + "\n").encode())


def _forget_in_child() -> None:
    # A forked child must not keep its parent's lifeline open (the guardian would wait
    # for it too); it starts its own guardian when it starts children.
    fd = _state.get("fd")
    if isinstance(fd, int):
        with contextlib.suppress(OSError):
            os.close(fd)
    _state.clear()


os.register_at_fork(after_in_child=_forget_in_child)


# -- the guardian's side --------------------------------------------------------------


def holders(token: str, exclude: int) -> Iterator[int]:
    """Pids whose environment carries `token` (the ones we may read: ours, or all as root)."""
    needle = f"{ENV_VAR}={token}".encode()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == exclude:
            continue
        try:
            with open(f"/proc/{entry.name}/environ", "rb") as f:
                environ = f.read()
        except OSError:
            continue  # gone, or not ours to read
        if needle in environ.split(b"\0"):
            yield int(entry.name)


def sweep(token: str) -> int:
    """End every holder of `token`: SIGTERM, then SIGKILL after a grace; return how many."""
    me = os.getpid()
    ended: set[int] = set()
    termed: dict[int, float] = {}
    deadline = time.monotonic() + KILL_ROUNDS_S
    while time.monotonic() < deadline:
        alive = list(holders(token, me))  # a dead process's environ reads empty
        if not alive:
            break
        now = time.monotonic()
        for pid in alive:
            late = pid in termed and now - termed[pid] >= TERM_GRACE_S
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if late or pid not in termed:
                    os.kill(pid, signal.SIGKILL if late else signal.SIGTERM)
            termed.setdefault(pid, now)
            ended.add(pid)
        time.sleep(SCAN_PERIOD_S)
    return len(ended)


def _run_calls(calls: list[str]) -> None:
    for target in calls:
        module, _, name = target.partition(":")
        try:
            getattr(importlib.import_module(module), name)()
        except Exception as exc:  # one failed cleanup must not stop the others
            print(f"roboscale lifeline: {target} failed: {exc}", file=sys.stderr)


def guard(token: str, controller: int) -> None:
    """Wait for EOF on stdin (the controller is gone), then sweep and clean up."""
    calls: list[str] = []
    with os.fdopen(0, "rb") as pipe:
        for line in pipe:
            with contextlib.suppress(ValueError, AttributeError):
                target = json.loads(line).get("call", "")
                if isinstance(target, str) and target.startswith("roboscale."):
                    calls.append(target)
    count = sweep(token)
    if count:
        print(
            f"roboscale: controller {controller} ended; stopped {count} process(es) it left",
            file=sys.stderr,
        )
    _run_calls(calls)


def main(argv: list[str]) -> int:
    token, controller = argv[0], int(argv[1])
    if os.fork():
        os._exit(0)  # detach: the guardian is nobody's child to reap or count
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    guard(token, controller)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
