"""Zenoh routers, one per host, for the zenoh and native-proc backends (`env.zenoh_routers`).

Instead of peers connecting to each other directly, every node is a Zenoh client
of the router on its own host, and the routers of the other hosts connect to the
router of host 0, as a fleet of robots with one router per computer is deployed.
A router is a Zenoh session in router mode (eclipse-zenoh opens one; no zenohd is
needed), run as `python -m roboscale.backends.zenoh_router LISTEN [CONNECT...]`:
it prints READY once listening and ends on SIGTERM or when its stdin closes.
"""

from __future__ import annotations

import contextlib
import os
import selectors
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from roboscale import lifeline
from roboscale.backends.base import Where, current_python
from roboscale.errors import UserError
from roboscale.runtime.threads import ThreadScope
from roboscale.safewrite import open_stream

READY_TIMEOUT_S = 20.0


def router_endpoint(address: str, port: int) -> str:
    return f"tcp/{address}:{port}"


class ZenohRouters:
    """One router per host of `where`; stop() ends them all."""

    def __init__(self, workdir: Path, where: Where, port: int) -> None:
        self.env: dict[str, str] = {}
        self.port = port
        self._procs: list[subprocess.Popen[bytes]] = []
        first = router_endpoint(where.addresses[0], port)
        try:
            for i, (prefix, address) in enumerate(
                zip(where.prefixes, where.addresses, strict=True)
            ):
                connect = [first] if i else []
                log = workdir / f"router-{i}.log"
                self._procs.append(
                    self._start(prefix, router_endpoint(address, port), connect, log)
                )
        except BaseException:
            self.stop()
            raise

    @staticmethod
    def _start(
        prefix: list[str], listen: str, connect: list[str], log: Path
    ) -> subprocess.Popen[bytes]:
        argv = [
            *prefix,
            current_python(),
            "-m",
            "roboscale.backends.zenoh_router",
            listen,
            *connect,
        ]
        with os.fdopen(open_stream(log), "wb") as err:
            proc = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err,
                env={**os.environ, **lifeline.child_env()}, start_new_session=True,
            )  # fmt: skip
        ready = threading.Event()

        def wait_ready() -> None:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() == b"READY":
                ready.set()

        # The reader ends with the line or with the router (killed below if it is late).
        with ThreadScope("zenoh router start") as scope:
            scope.spawn(wait_ready, name=f"zenoh-router-ready {listen}")
            if not ready.wait(READY_TIMEOUT_S):
                _end(proc)
                raise UserError(f"the Zenoh router on {listen} did not start; see {log}")
        return proc

    def stop(self) -> None:
        for proc in reversed(self._procs):
            _end(proc)
        self._procs.clear()


def _end(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait_s in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def main(argv: list[str]) -> int:
    import zenoh

    from roboscale.runtime.zenoh_config import zenoh_config, zenoh_settings

    listen, *connect = argv
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    settings = zenoh_settings([listen], connect, mode="router", shared_memory=False)
    session: Any = zenoh.open(zenoh_config(settings))
    print("READY", flush=True)
    # Until SIGTERM or the parent's end (stdin closes), on this thread: no reader thread.
    with selectors.DefaultSelector() as stdin:
        stdin.register(sys.stdin.fileno(), selectors.EVENT_READ)
        while not done.is_set():
            if stdin.select(0.5) and not os.read(sys.stdin.fileno(), 4096):
                break
    session.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
