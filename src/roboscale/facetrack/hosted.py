"""A tracker run by a host process, driven over a line protocol: the driver half of a stack.

The host (e.g. `stacks/runtime_host.py`) is started with `argv`; it prints `ready` when
every worker is up. Then, on its stdin:

    go                  run cfg.frames at cfg.fps (firing cfg.kills), then write
                        WORKDIR/tracker-result.json (a `TrackerRun`) and print `done`
    kill W METHOD       kill worker W; it prints `killed W KILL_NS` (0: W was not running)
    stop                stop everything and exit (EOF on stdin does the same)

and on its stdout, besides: `frame N` (progress) and `error TEXT` (the run failed).
Lines that are none of these are logged to the host's log file, never parsed.
The host dies with its driver (PR_SET_PDEATHSIG), so even a SIGKILLed driver leaves
nothing running; `stop()` ends its process group if it does not exit in time.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from roboscale import lifeline
from roboscale.errors import UserError
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.records import TRACKER_RUN_FILE, ProcessUsage, TrackerRun
from roboscale.facetrack.stack import Progress
from roboscale.facetrack.usage import usage_of
from roboscale.runtime.threads import ThreadScope
from roboscale.safewrite import open_stream

STOP_TIMEOUT_S = 30.0
KILL_TIMEOUT_S = 10.0


class HostError(UserError):
    """The host process failed: names the stack and the tail of its log."""


class HostedTracker:
    def __init__(
        self,
        stack: str,
        argv: Sequence[str],
        cfg: TrackerConfig,
        workdir: Path,
        *,
        start_timeout_s: float,
        env: dict[str, str] | None = None,
    ) -> None:
        self.stack, self.cfg, self.workdir = stack, cfg, workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / f"{stack}-host.log"
        self._log = os.fdopen(open_stream(self.log_path, append=True), "ab")
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**os.environ, **(env or {}), **lifeline.child_env()},
            start_new_session=True,
            text=True,
        )
        self.lines: queue.Queue[str | None] = queue.Queue()
        # The reader's owner: stop() joins it, and an error it ends on is logged and kept.
        self._readers = ThreadScope(f"{stack}-host", on_error=self._reader_failed)
        self._readers.spawn(self._read, name=f"{stack}-host")
        try:
            self._expect("ready", start_timeout_s)
        except BaseException:
            self.stop()
            raise

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                self.lines.put(line.rstrip("\n"))
        finally:
            self.lines.put(None)  # a waiter learns at once that no more lines come

    def _reader_failed(self, name: str, error: BaseException) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._log.write(f"{name}: reading the host's output failed: {error!r}\n".encode())

    def _send(self, line: str) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            raise self._failure("the host process is gone") from None

    def _next(self, deadline: float, waiting_for: str) -> str:
        left = deadline - time.monotonic()
        try:
            line = self.lines.get(timeout=max(left, 0.0))
        except queue.Empty:
            raise self._failure(f"no {waiting_for!r} within the time allowed") from None
        if line is None:
            raise self._failure(f"the host exited while waiting for {waiting_for!r}")
        if line.startswith("error "):
            raise self._failure(line[6:])
        return line

    def _expect(self, word: str, timeout_s: float, progress: Progress | None = None) -> str:
        deadline = time.monotonic() + timeout_s
        while True:
            line = self._next(deadline, word)
            if line.split(" ", 1)[0] == word:
                return line
            if line.startswith("frame ") and progress is not None:
                progress(int(line.split()[1]), self.cfg.frames)

    def _failure(self, what: str) -> HostError:
        self._log.flush()
        tail = self.log_path.read_text(errors="replace").strip().splitlines()[-5:]
        detail = "\n    ".join(tail) if tail else "(empty log)"
        return HostError(f"{self.stack}: {what}; host log {self.log_path}:\n    {detail}")

    def run(self, progress: Progress | None = None) -> TrackerRun:
        self._send("go")
        budget = self.cfg.duration_s * 3 + 60.0
        self._expect("done", budget, progress)
        raw = json.loads((self.workdir / TRACKER_RUN_FILE).read_text())
        return TrackerRun.from_dict(raw)

    def processes(self) -> list[ProcessUsage]:
        return usage_of([(self.proc.pid, "host", 0)])

    def kill(self, worker: int, method: str) -> int:
        self._send(f"kill {worker} {method}")
        line = self._expect("killed", KILL_TIMEOUT_S)
        return int(line.split()[2])

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(HostError):
                self._send("stop")
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(KILL_TIMEOUT_S)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._readers.close(timeout_s=KILL_TIMEOUT_S)
        self._log.close()
