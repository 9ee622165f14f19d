"""Children that are OS processes: Python process nodes and arbitrary commands.

`ProcessNode` runs a target `module:callable` (see `runtime/zygote.py`) in its
own process: forked from a `Zygote` when one is given and alive (milliseconds),
else in a fresh `python -m roboscale.runtime.forkserver run ...`. `CommandChild`
runs any argv (`rosrun pkg node`, a shell script): ready once started, once a
given line appears on its output, or once a probe says so.

Both are `ChildHandle`s. Every process gets its own session (process group);
stop() sends SIGTERM to the group, then SIGKILL after the timeout. Exits are
seen by one monitor thread that waits on pidfds of all direct children (the
zygote reports its own), kills what is left of the dead child's group while
its pid is still held, and reaps it: no zombies, no orphans. Children die with
this process: a fresh Python sets PR_SET_PDEATHSIG itself, a command is wrapped
in `setpriv --pdeathsig KILL` when available. PR_SET_PDEATHSIG follows the
thread that forked, so every fork happens on the long-lived monitor thread. It
reaches one generation only: every child also carries this process's lifeline
token, and the guardian (`roboscale/lifeline.py`) ends whatever still holds it
when this process dies, grandchildren in sessions of their own included.
on_exit callbacks run on their own thread, so a supervisor may restart a child
from inside the callback.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from roboscale import lifeline
from roboscale.runtime.child import ChildStartError, ExitCallback, ExitReason
from roboscale.runtime.procservice import Launch, Proc, monitor, notifier
from roboscale.runtime.zygote import ExitStatus, Zygote, ZygoteError

# Signals that mean "killed from outside"; any other fatal signal is a crash.
OUTSIDE_SIGNALS = frozenset({signal.SIGKILL, signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
PROBE_INTERVAL_S = 0.02
KILL_WAIT_S = 5.0


def exit_reason(status: ExitStatus) -> tuple[ExitReason, str]:
    if status.signal is not None:
        sig = signal.Signals(status.signal)
        reason = ExitReason.KILLED if sig in OUTSIDE_SIGNALS else ExitReason.CRASH
        return reason, status.describe()
    return (ExitReason.NORMAL if status.code == 0 else ExitReason.CRASH), status.describe()


class Running(Protocol):
    """A started process as the handles see it: a zygote's ForkedChild or a `Proc`."""

    pid: int
    error: str
    status: ExitStatus | None
    settled: threading.Event
    ready: threading.Event
    exited: threading.Event
    dead: threading.Event  # its early death notice (`runtime/deathnotice.py`); never for a Proc
    on_end: Callable[[], None] | None
    on_dead: Callable[[], None] | None
    stamps: dict[str, int]  # monotonic ns of its life's steps (`ForkedChild.stamps`)

    def send_signal(self, sig: int) -> None: ...

    def wait_settled(self, timeout_s: float) -> None: ...  # until settled, at most timeout_s

    def kill_at_once(self) -> None: ...  # SIGKILL, by the quickest way it has


class _ProcessChild:
    """start/stop/alive over a `Running` process; subclasses say how to launch it.

    `early_death`: report an unrequested exit at the instance's early death notice
    (`runtime/deathnotice.py`: its callback thread is dying, its memory not yet freed),
    before its exit status is known. Only for a child restarted whatever that status
    (a supervisor sets it for permanent children); others wait for the exit report.
    The exit report that follows a notice finds the exit reported: never twice."""

    early_death = False

    def __init__(self, name: str, ready_timeout_s: float) -> None:
        self.name = name
        self.ready_timeout_s = ready_timeout_s
        self._lock = threading.Lock()
        self._run: Running | None = None
        self._on_exit: ExitCallback | None = None
        self._armed = False  # an unrequested exit is still to be reported

    @property
    def pid(self) -> int | None:
        run = self._run
        return run.pid if run is not None and _running(run) else None

    @property
    def process(self) -> Running | None:
        """The last start's process (pid, events, stamps); None before the first start."""
        return self._run

    def alive(self) -> bool:
        run = self._run
        return run is not None and _running(run)

    def start(self, on_exit: ExitCallback) -> None:
        if self.alive():
            raise ChildStartError(self.name, "already running")
        run = self._launch()
        run.on_end = lambda: self._ended(run)
        if self.early_death:
            run.on_dead = lambda: self._noticed(run)
        self._await_ready(run)
        with self._lock:
            self._run, self._on_exit, self._armed = run, on_exit, True
        if run.exited.is_set():
            self._ended(run)  # it died between ready and arming: still reported once
        elif run.dead.is_set() and self.early_death:
            self._noticed(run)

    def stop(self, timeout_s: float) -> None:
        with self._lock:
            self._armed = False
            run = self._run
        if run is None or run.exited.is_set():
            return
        run.send_signal(signal.SIGTERM)
        if not run.exited.wait(timeout_s):
            run.send_signal(signal.SIGKILL)
            run.exited.wait(KILL_WAIT_S)

    def _launch(self) -> Running:
        raise NotImplementedError

    def _is_ready(self, run: Running) -> bool:
        return run.ready.is_set()

    def _await_ready(self, run: Running) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        while not self._is_ready(run):
            left = deadline - time.monotonic()
            if run.exited.is_set() or run.error or left <= 0:
                run.wait_settled(0)  # a READY written just before it died still counts
                if self._is_ready(run):
                    break
                detail = self._start_failure(run, left <= 0)
                self._kill(run)
                raise ChildStartError(self.name, detail)
            run.wait_settled(min(left, PROBE_INTERVAL_S))

    def _start_failure(self, run: Running, timed_out: bool) -> str:
        if run.error:
            detail = run.error
        elif run.exited.is_set() and run.status is not None:
            detail = f"{run.status.describe()} before it was ready"
        else:
            detail = f"not ready within {self.ready_timeout_s:g} s"
        return detail + self._tail(run)

    def _tail(self, run: Running) -> str:
        lines = list(getattr(run, "tail", []))[-3:]
        return f"; last output: {' | '.join(lines)}" if lines else ""

    def _kill(self, run: Running) -> None:
        run.send_signal(signal.SIGKILL)
        run.exited.wait(KILL_WAIT_S)

    def _ended(self, run: Running) -> None:
        with self._lock:
            report = self._armed and run is self._run
            self._armed = self._armed and not report
            on_exit = self._on_exit
        if report and on_exit is not None and run.status is not None:
            reason, detail = exit_reason(run.status)
            if run.error:
                detail += f" ({run.error})"
            name = self.name
            notifier().post(lambda: on_exit(name, reason, detail))

    def _noticed(self, run: Running) -> None:
        """Its death notice: the thread that ran its callbacks is in do_exit, so none of
        them runs again and the next instance may start. The status is not known yet.
        Called on the notice's own waiter thread, which has nothing else to do: on_exit
        runs there (no hop to the notifier; a restart from inside it is fine too).

        The notice follows the thread, not the process: a target whose ready() thread
        ended while the process lives would leave a second live instance. So the old
        instance is SIGKILLed first: through the pidfd the client holds for a warm
        standby (a syscall: writing to the zygote and waking it cost a restart about
        0.1 ms), else its group through the zygote (which signals only a pid it has
        not reaped). Once the kill returned, no thread of it runs user code again; the
        zygote kills its group when it reaps it."""
        with self._lock:
            report = self._armed and run is self._run
            self._armed = self._armed and not report
            on_exit = self._on_exit
        if report and on_exit is not None:
            run.kill_at_once()
            on_exit(self.name, ExitReason.CRASH, NOTICED)


NOTICED = "died (its death notice; the exit status follows from the zygote)"


def _running(run: Running) -> bool:
    return not run.exited.is_set() and not run.dead.is_set()


class ProcessNode(_ProcessChild):
    """A Python target in its own OS process, forked from a zygote when one is alive."""

    def __init__(
        self,
        name: str,
        target: str,
        config: dict[str, Any] | None = None,
        *,
        zygote: Zygote | None = None,
        python: str = sys.executable,
        env: dict[str, str] | None = None,
        log: Path | None = None,
        ready_timeout_s: float = 10.0,
        standby: bool = False,
        early_death: bool = False,
    ) -> None:
        super().__init__(name, ready_timeout_s)
        self.standby = standby  # restart on the zygote's warm standby of this target
        self.early_death = early_death
        self.target = target
        self.config = config or {}
        self.zygote = zygote
        self.python = python
        self.env = env or {}
        self.log = log
        self.started_via = ""  # "zygote", "zygote standby" or "python": the last start's way

    def _launch(self) -> Running:
        if self.zygote is not None and self.zygote.alive():
            try:
                child = self.zygote.spawn(
                    self.name, self.target, self.config, log=self.log, standby=self.standby
                )
                self.started_via = "zygote standby" if child.standby else "zygote"
                return child
            except ZygoteError:
                pass  # it died meanwhile: a fresh interpreter still works
        self.started_via = "python"
        argv = [self.python, "-m", "roboscale.runtime.forkserver", "run", self.target]
        argv += [json.dumps(self.config), "--parent-pid", str(os.getpid())]
        env = {**os.environ, **self.env}
        return _launch_direct(self.name, Launch(argv, env, None, None, self.log, True))


class CommandChild(_ProcessChild):
    """Any command as a child: ready when started, on an output line, or when probed."""

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        ready_line: str | None = None,
        probe: Callable[[], bool] | None = None,
        log: Path | None = None,
        ready_timeout_s: float = 10.0,
    ) -> None:
        super().__init__(name, ready_timeout_s)
        if not argv:
            raise ValueError(f"command child {name!r}: argv is empty")
        self.argv = list(argv)
        self.env = env or {}
        self.cwd = cwd
        self.ready_line = re.compile(ready_line) if ready_line is not None else None
        self.probe = probe
        self.log = log

    def _launch(self) -> Running:
        argv = self.argv
        setpriv = shutil.which("setpriv")
        if setpriv is not None:  # dies with us; survives exec, unlike a Python hook
            argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
        env = {**os.environ, **self.env}
        request = Launch(argv, env, self.cwd, self.ready_line, self.log, False)
        return _launch_direct(self.name, request)

    def _is_ready(self, run: Running) -> bool:
        if self.ready_line is not None:
            return run.ready.is_set()
        if self.probe is not None:
            return not run.exited.is_set() and self._probe()
        return not run.exited.is_set()

    def _probe(self) -> bool:
        assert self.probe is not None
        try:
            return bool(self.probe())
        except Exception:  # a probe that fails means "not yet"; the timeout still bounds it
            return False


def _launch_direct(name: str, request: Launch) -> Proc:
    lifeline.ensure()  # here, not on the monitor thread, which must not wait on it
    try:
        return monitor().launch(request)
    except OSError as exc:
        raise ChildStartError(name, f"cannot run {request.argv[0]}: {exc}") from None
