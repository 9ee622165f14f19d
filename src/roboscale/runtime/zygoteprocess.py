"""The zygote process as its client (`Zygote`, runtime/zygote.py) runs it: its command
line and the standbys' announce socket, the requests written to its stdin, the events
read from its stdout, and its end. The zygote's own side is runtime/forkserver.py.

Protocol: one JSON object per line. On the zygote's stdin:
  {"op": "spawn", "id": 7, "target": "pkg.mod:main", "config": {...}, "log": path|null}
  {"op": "standby", "target": "pkg.mod:main"}  (fork one warm standby of that target)
  {"op": "signal", "pid": 1234, "sig": 15}     (to the child's process group)
  {"op": "quit"}                               (or EOF: kill every child, exit)
On its stdout:
  {"event": "hello", "pid": P, "preloaded": [...], "threads": 1}  or {"event": "fatal", ...}
  {"event": "spawned", "id": 7, "pid": 1234}  or {"event": "spawn_failed", "id": 7, ...}
  {"event": "standby_forked", "target": "...", "pid": 1235}  or "standby_failed"
  {"event": "ready", "pid": 1234}             the child called ready()
  {"event": "error", "pid": 1234, "detail": "..."}   e.g. its target could not be imported
  {"event": "exit", "pid": 1234, "code": 0|null, "signal": null|9}
"ready" and "exit" also carry "at_ns": the zygote's time.monotonic_ns() when it read
READY or reaped (one clock for the host: `ForkedChild.stamps` keeps them with the
client's own, to time a restart stage by stage).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from roboscale import lifeline
from roboscale.runtime.forkserver import ZygoteError
from roboscale.safewrite import open_stream


def launch_zygote(
    python: str, preload: Sequence[str], env: dict[str, str], log: Path | None
) -> tuple[subprocess.Popen[bytes], socket.socket]:
    """Start the zygote process; returns it and the client's end of the announce socket."""
    # The standbys' socket: each standby announces itself on it with a socket of its
    # own, so that hand-overs and READY go between client and standby directly.
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    argv = [python, "-m", "roboscale.runtime.forkserver", "serve"]
    argv += ["--parent-pid", str(os.getpid()), "--preload", ",".join(preload)]
    argv += ["--announce-fd", str(theirs.fileno())]
    err = os.fdopen(open_stream(log, append=True), "ab") if log is not None else None
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=err,
            env={**env, **lifeline.child_env()},
            pass_fds=(theirs.fileno(),),
            start_new_session=True,
        )
    except OSError:
        mine.close()
        raise
    finally:
        theirs.close()
        if err is not None:
            err.close()
    return proc, mine


def write_request(stdin: IO[bytes], req: dict[str, Any]) -> None:
    """One request line; ZygoteError when the zygote is gone."""
    try:
        stdin.write((json.dumps(req) + "\n").encode())
        stdin.flush()
    except (BrokenPipeError, OSError, ValueError) as exc:
        raise ZygoteError(f"zygote is gone: {exc}") from None


def read_some(fd: int) -> bytes:
    """What its stdout has now; b"" at its end (or when it cannot be read)."""
    try:
        return os.read(fd, 65536)
    except OSError:
        return b""


def end_zygote(proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    """EOF on its stdin, then wait for it; past `timeout_s` kill its process group."""
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    try:
        proc.wait(timeout_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
