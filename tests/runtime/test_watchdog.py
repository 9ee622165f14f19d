"""Watchdogs beyond exit: a child alive but not touching its heartbeat file is restarted."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.launch import build_tree
from roboscale.runtime.launchspec import read_launch
from roboscale.runtime.watchdog import TopicTap

from .conftest import wait_until

LAUNCH = """\
name: robot
intensity: 10
children:
  - command: silent
    argv: [sleep, "60"]
    watchdog: {{heartbeat_file: {silent}, heartbeat_s: 0.3, grace_s: 0.2}}
  - command: beating
    argv: [sh, -c, "while true; do touch {beating}; sleep 0.05; done"]
    watchdog: {{heartbeat_file: {beating}, heartbeat_s: 2, grace_s: 0.2}}
"""


def test_a_child_that_stops_its_heartbeat_is_restarted_as_hung(
    rt: Runtime, events: list[SupervisionEvent], tmp_path: Path
) -> None:
    path = tmp_path / "robot.yaml"
    path.write_text(LAUNCH.format(silent=tmp_path / "silent", beating=tmp_path / "beating"))
    tree = build_tree(read_launch(path), rt)
    root = tree.root
    try:
        rt.wait(root.start_async())
        first = root.child("silent").pid  # type: ignore[attr-defined]
        wait_until(lambda: any(e.kind == "restarted" and e.child == "silent" for e in events))
        hung = next(e for e in events if e.kind == "exited" and e.child == "silent")
        assert hung.reason == "hung"
        assert hung.detail.startswith(f"watchdog: heartbeat file {tmp_path / 'silent'} not touched")
        assert root.child("silent").pid != first  # type: ignore[attr-defined]
        assert not any(e.child == "beating" and e.kind == "exited" for e in events)
    finally:
        rt.wait(root.stop_async())
        tree.close()


@contextmanager
def graph(requests: Callable[..., object], system_state: Callable[..., object]) -> Iterator[str]:
    """A master and a publisher on loopback (real XML-RPC servers); the master's URI."""
    from xmlrpc.server import SimpleXMLRPCServer

    servers = [SimpleXMLRPCServer(("127.0.0.1", 0), logRequests=False) for _ in range(2)]
    master, node = servers
    node_uri = f"http://127.0.0.1:{node.server_address[1]}/"
    master.register_function(system_state, "getSystemState")
    master.register_function(lambda caller, name: [1, "", node_uri], "lookupNode")
    node.register_function(requests, "requestTopic")
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    try:
        yield f"http://127.0.0.1:{master.server_address[1]}/"
    finally:
        for server, thread in zip(servers, threads, strict=True):
            server.shutdown()
            server.server_close()
            thread.join()


def chatter(caller: str) -> object:
    return [1, "", [[["/chatter", ["/talker"]]], [], []]]


def test_a_malformed_answer_from_the_ros_graph_never_kills_the_tap() -> None:
    """A publisher whose requestTopic answers a struct, not a protocol list: the tap skips
    that publisher and keeps going (a KeyError here ended the watchdog's thread, and the
    child was watched no more)."""

    def bad(caller: str, topic: str, protocols: object) -> object:
        return [1, "", {"a": 1, "b": 2, "c": 3}]

    with graph(bad, chatter) as uri:
        tap = TopicTap(uri, "/chatter")
        try:
            wait_until(lambda: tap.discoveries >= 2)  # asked twice: the first did not end it
            tap.poll(0.01)
            assert tap.conns == {}
        finally:
            tap.close()


def test_a_hung_master_never_holds_up_the_watchdogs_poll() -> None:
    """The master takes the call and never answers (until released): `poll`, which stamps
    the messages the rate is judged on, returns all the same (it used to ask the master
    itself and wait up to RPC_TIMEOUT_S per call)."""
    entered, release = threading.Event(), threading.Event()

    def stuck(caller: str) -> object:
        entered.set()
        release.wait(60)
        return chatter(caller)

    with graph(lambda *_: [0, "", []], stuck) as uri:
        tap = TopicTap(uri, "/chatter")
        try:
            assert entered.wait(30)
            tap.poll(0.01)
            assert tap.discoveries == 0  # still inside the master's call
        finally:
            release.set()
            tap.close()
