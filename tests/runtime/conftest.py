"""Fixtures of the runtime tests: a real runtime (event loop thread) per test."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.conftest import EVENT_TIMEOUT_S, require

from roboscale.backends.base import free_port
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.zlink import PATH_ENV, native_module

NOT_BUILT = (
    "the runtime bridge's native path (_zbridge) was not built: "
    "run 'make native' (it needs Rust's cargo >= 1.88)"
)


@pytest.fixture(params=["native", "python"])
def bridge_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each bridge test on both per-message paths ($ROBOSCALE_BRIDGE_PATH, which the
    processes a test starts inherit)."""
    path: str = request.param
    if path == "native":
        require(native_module() is not None, NOT_BUILT)
    monkeypatch.setenv(PATH_ENV, path)
    return path


@pytest.fixture
def pair(zenoh: None, bridge_path: str) -> Iterator[tuple[Runtime, Runtime, str]]:
    """Two runtimes in this process and a loopback endpoint for their bridges."""
    a, b = Runtime().start(), Runtime().start()
    yield a, b, f"tcp/127.0.0.1:{free_port()}"
    a.close()
    b.close()


@pytest.fixture
def rt() -> Iterator[Runtime]:
    runtime = Runtime(watchdog_period_s=0.01).start()
    yield runtime
    runtime.close()


@pytest.fixture
def events(rt: Runtime) -> list[SupervisionEvent]:
    seen: list[SupervisionEvent] = []
    rt.subscribers.append(seen.append)
    return seen


def wait_until(predicate: Callable[[], object], timeout_s: float = EVENT_TIMEOUT_S) -> None:
    """Poll until `predicate()` is true; fail (not hang) after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.002)


def private(path: Path, text: str) -> Path:
    """A file only its owner may read and write (what the bridge asks of its secrets)."""
    path.write_text(text)
    path.chmod(0o600)
    return path
