"""Remote node death through Zenoh liveliness: a real process, SIGKILLed."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.backends.base import free_port
from roboscale.runtime.bridge import BridgeConfig, session_config
from roboscale.runtime.child import ChildStartError
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.intensity import Intensity
from roboscale.runtime.liveliness import LivelinessWatcher, RemoteNodeChild
from roboscale.runtime.supervisor import ChildSpec, Recipe, Supervisor

from .conftest import wait_until
from .test_durable_remote import spawn, stop, wait_ready


@pytest.mark.zenoh
def test_killed_remote_node_is_an_exit_its_supervisor_restarts(
    rt: Runtime, events: list[SupervisionEvent], zenoh: None
) -> None:
    import zenoh as z

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    session = z.open(session_config(BridgeConfig(listen=(endpoint,))))
    watcher = LivelinessWatcher(rt, session)
    args = (watcher, "camera", "/robot/camera")
    remote = Recipe("camera", RemoteNodeChild, args, {"ready_timeout_s": 15.0})
    sup = Supervisor(rt, "top", [ChildSpec(remote)], intensity=Intensity(5, 60.0))
    first = spawn("alive_node.py", endpoint, "/robot/camera")
    second = None
    try:
        wait_ready(first)
        rt.wait(sup.start_async(), timeout_s=20.0)
        assert sup.child("camera").alive()
        first.kill()  # SIGKILL: the token goes with the process's session
        wait_until(lambda: any(e.kind == "exited" for e in events))
        exited = next(e for e in events if e.kind == "exited")
        assert exited.child == "camera" and exited.reason == "crash"
        assert "liveliness token rs/@alive/robot/camera dropped" in exited.detail
        assert not sup.child("camera").alive()
        second = spawn("alive_node.py", endpoint, "/robot/camera")  # whoever brings it back
        wait_until(lambda: sup.restarts("camera") == 1, timeout_s=15.0)
        assert sup.child("camera").alive()
        rt.wait(sup.stop_async())
    finally:
        for proc in (first, second):
            if proc is not None:
                stop(proc)
        watcher.close()
        session.close()


@pytest.mark.zenoh
def test_remote_node_that_never_appears_fails_to_start(
    rt: Runtime, tmp_path: Path, zenoh: None
) -> None:
    import zenoh as z

    session = z.open(session_config(BridgeConfig(listen=(f"tcp/127.0.0.1:{free_port()}",))))
    watcher = LivelinessWatcher(rt, session)
    try:
        args = (watcher, "ghost", "/robot/ghost")
        remote = Recipe("ghost", RemoteNodeChild, args, {"ready_timeout_s": 0.2})
        sup = Supervisor(rt, "top", [ChildSpec(remote)])
        with pytest.raises(ChildStartError, match="no liveliness token rs/@alive/robot/ghost"):
            rt.wait(sup.start_async())
    finally:
        watcher.close()
        session.close()
