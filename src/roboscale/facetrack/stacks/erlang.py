"""The Erlang/OTP stack: the paper's supervision tree, built with erlc at run time.

    top_supervisor (one_for_one, 1000 restarts in 1 s)
    ├── camera_link              the link to the harness (loopback TCP, {packet, 4})
    ├── aggregator_supervisor
    │   └── aggregator_server    a Python port program: the deque and the pan/tilt decision
    └── face_supervisor
        └── face_server x N      each owns a Python port program: the Haar detector

The `.erl` sources ship inside the package (`stacks/otp/`) and are compiled with Debian's
erlc into a private temporary directory on every start. Detection runs in Python port
programs (`port_program.py`), one per face_server, opened as ErlPort does. The harness
kills face_servers through camera_link with `exit(Pid, shutdown)` (sigterm: terminate/2
runs and closes the port) or `exit(Pid, kill)` (sigkill), and the restart is timed inside
Erlang, from just before exit/2 to the new face_server's init/1 (`initialized_ns`) and to
its port program's ready answer (`restarted_ns`).
"""

from __future__ import annotations

import contextlib
import importlib.resources
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from roboscale import lifeline
from roboscale.errors import UserError
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.records import ProcessUsage
from roboscale.facetrack.stack import StackUnavailable
from roboscale.facetrack.stacks.external import ExternalTracker
from roboscale.facetrack.stacks.link import (
    KILL,
    MEMORY_HEAD,
    MEMORY_ROW,
    Link,
    LinkClosed,
    Listener,
    Role,
)
from roboscale.facetrack.usage import process_usage
from roboscale.safewrite import open_stream, write_bytes, write_text

INSTALL_HINT = "as root: apt-get install erlang-nox (Debian 12), or `sudo make system`"
METHODS = {"sigterm": 0, "sigkill": 1}  # exit(Pid, shutdown), exit(Pid, kill)
CONNECT_WAIT_S = 30.0
STOP_WAIT_S = 10.0


def _ready_wait_s(workers: int) -> float:
    # Each port program imports OpenCV (about 0.3 s of CPU): on 2 cores, 100 take ~20 s.
    return 60.0 + 0.5 * workers


class ErlangTracker(ExternalTracker):
    name = "erlang"

    def __init__(
        self, cfg: TrackerConfig, link: Link, log: Path, vm: subprocess.Popen[bytes], build: Path
    ) -> None:
        super().__init__(cfg, link, log)
        self.vm = vm
        self.build = build
        self.release = ""
        self._memory: bytes | None = None

    def on_other(self, message: bytes) -> None:
        if message[:1] == b"H" and len(message) >= 5:
            self.release = message[5:].decode(errors="replace")
        elif message[:1] == b"M":
            self._memory = message[1:]
        else:
            super().on_other(message)

    def _kill(self, worker: int, method: str) -> int:
        if method not in METHODS:
            allowed = ", ".join(METHODS)
            raise UserError(f"kills.method: the erlang stack cannot kill by {method!r}: {allowed}")
        self.link.send(b"K" + KILL.pack(METHODS[method], Role.WORKER, worker))
        event = self.instances.get((Role.WORKER, worker))
        return event.os_pid if event else 0

    def _memory_rows(self) -> tuple[int, int, list[tuple[Role, int, int]]]:
        """The VM's total memory, its malformed count and (role, index, bytes) per server."""
        self._memory = None
        self.link.send(b"S")
        deadline = time.monotonic() + 10.0
        while self._memory is None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise UserError("the Erlang VM did not answer a memory request within 10 s")
            message = self.link.receive(left)
            if message is not None:
                self.on_message(message)
        total, malformed = MEMORY_HEAD.unpack_from(self._memory)
        body = self._memory[MEMORY_HEAD.size :]
        rows = [
            (Role(role), index, size)
            for role, index, size in MEMORY_ROW.iter_unpack(
                body[: len(body) // MEMORY_ROW.size * MEMORY_ROW.size]
            )
        ]
        return total, malformed, rows

    def processes(self) -> list[ProcessUsage]:
        total, malformed, rows = self._memory_rows()
        self.counters["erlang_vm_bytes"] = total
        self.counters["malformed_in_erlang"] = malformed
        self.counters["erlang_face_server_bytes"] = sum(
            size for role, _, size in rows if role == Role.WORKER
        )
        found = [process_usage(self.vm.pid, "erlang-vm", 0)]
        for role, index, _ in rows:
            event = self.instances.get((role, index))
            if event is not None:
                is_worker = role == Role.WORKER
                name = "face_server" if is_worker else "aggregator_server"
                found.append(process_usage(event.os_pid, name, int(is_worker)))
        return [u for u in found if u is not None]

    def alive_workers(self) -> int:
        return sum(1 for role, _, _ in self._memory_rows()[2] if role == Role.WORKER)

    def stop(self) -> None:
        with contextlib.suppress(LinkClosed, OSError):
            self.link.send(b"Q")
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.vm.wait(STOP_WAIT_S)
        stop_vm(self.vm)
        self.link.close()
        # Port programs end at end of input; any still there after the VM is gone is killed.
        for event in self.instances.values():
            kill_if_ours(event.os_pid)
        shutil.rmtree(self.build, ignore_errors=True)


def stop_vm(vm: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(vm.pid, signal.SIGKILL)
    vm.wait()


def kill_if_ours(pid: int) -> None:
    """SIGKILL a port program still alive (checked by its command line: pids get reused)."""
    if pid <= 0:
        return
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return
    if b"roboscale.facetrack.stacks.port_program" in cmdline:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def compile_tree(build: Path) -> None:
    """erlc every shipped .erl into `build` (a private temporary directory)."""
    sources = importlib.resources.files("roboscale.facetrack.stacks") / "otp"
    files = []
    for entry in sources.iterdir():
        if entry.name.endswith(".erl"):
            target = build / entry.name
            write_bytes(target, entry.read_bytes())
            files.append(str(target))
    out = subprocess.run(
        ["erlc", "-o", str(build), *sorted(files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if out.returncode != 0:
        raise UserError(f"erlc failed on the face tracker's sources: {out.stderr.strip()[-500:]}")


class ErlangStack:
    name = "erlang"
    summary = "Erlang/OTP: the paper's supervision tree, a Python port program per face_server"
    kill_methods = tuple(METHODS)

    def check(self) -> None:
        for tool in ("erl", "erlc"):
            if shutil.which(tool) is None:
                raise StackUnavailable(f"stack 'erlang': {tool} not found", hint=INSTALL_HINT)

    def version(self) -> str:
        out = subprocess.run(
            ["erl", "-noinput", "-eval",
             "io:put_chars(erlang:system_info(otp_release)), halt()."],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        return f"Erlang/OTP {out.stdout.strip() or 'unknown'}"

    def start(self, cfg: TrackerConfig, workdir: Path) -> ErlangTracker:
        self.check()
        workdir.mkdir(parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(prefix="roboscale-otp-"))
        listener: Listener | None = None
        vm: subprocess.Popen[bytes] | None = None
        try:
            compile_tree(build)
            config = build / "config.json"
            write_text(config, cfg.to_json())
            listener = Listener()
            with os.fdopen(open_stream(workdir / "erlang.log"), "wb") as log:
                vm = subprocess.Popen(
                    ["erl", "-noinput", "+Bd", "-pa", str(build), "-run", "facetrack", "start",
                     str(listener.port), str(cfg.workers), sys.executable, str(config)],
                    cwd=build, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True, env={**os.environ, **lifeline.child_env()},
                )  # fmt: skip
            running = vm
            link = listener.accept("the Erlang VM", CONNECT_WAIT_S, lambda: running.poll() is None)
            tracker = ErlangTracker(cfg, link, workdir / "erlang.log", vm, build)
        except BaseException:
            if vm is not None:
                stop_vm(vm)
            shutil.rmtree(build, ignore_errors=True)
            raise
        finally:
            if listener is not None:
                listener.close()
        try:
            expected = {(Role.WORKER, i) for i in range(cfg.workers)} | {(Role.AGGREGATOR, 0)}
            tracker.wait_ready(expected, _ready_wait_s(cfg.workers), "the Erlang tree")
        except BaseException as e:
            tracker.stop()
            if isinstance(e, UserError | LinkClosed):
                raise UserError(f"{e}; see {workdir / 'erlang.log'}") from None
            raise
        return tracker


STACK = ErlangStack()
