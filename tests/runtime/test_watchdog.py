"""Watchdogs beyond exit: a child alive but not touching its heartbeat file is restarted."""

from __future__ import annotations

import struct
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.launch import build_tree
from roboscale.runtime.launchspec import read_launch
from roboscale.runtime.watchdog import _Conn

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


def frames(payloads: list[bytes]) -> bytes:
    header = b"callerid=/talker"
    data = struct.pack("<I", len(header) + 4) + struct.pack("<I", len(header)) + header
    return data + b"".join(struct.pack("<I", len(p)) + p for p in payloads)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=50), max_size=20), st.lists(st.integers(1, 64), min_size=1))
def test_tcpros_frames_are_counted_however_they_are_cut(
    payloads: list[bytes], cuts: list[int]
) -> None:
    stream = frames(payloads)
    conn = _Conn(None)  # type: ignore[arg-type]
    counted, pos, i = 0, 0, 0
    while pos < len(stream):
        step = cuts[i % len(cuts)]
        counted += conn.feed(stream[pos : pos + step])
        pos, i = pos + step, i + 1
    assert counted == len(payloads)


def test_a_malformed_answer_from_the_ros_graph_never_kills_the_tap() -> None:
    """A master and a publisher on loopback (real XML-RPC servers) whose requestTopic
    answers a struct, not a protocol list: the tap skips that publisher and keeps going
    (a KeyError here ended the watchdog's thread, and the child was watched no more)."""
    import threading
    from xmlrpc.server import SimpleXMLRPCServer

    from roboscale.runtime.watchdog import TopicTap

    servers = [SimpleXMLRPCServer(("127.0.0.1", 0), logRequests=False) for _ in range(2)]
    master, node = servers
    node_uri = f"http://127.0.0.1:{node.server_address[1]}/"
    master.register_function(
        lambda caller: [1, "", [[["/chatter", ["/talker"]]], [], []]], "getSystemState"
    )
    master.register_function(lambda caller, name: [1, "", node_uri], "lookupNode")
    node.register_function(
        lambda caller, topic, protocols: [1, "", {"a": 1, "b": 2, "c": 3}], "requestTopic"
    )
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
    for thread in threads:
        thread.start()
    tap = TopicTap(f"http://127.0.0.1:{master.server_address[1]}/", "/chatter")
    try:
        tap.poll(0.01)
        assert tap.conns == {}
    finally:
        tap.close()
        for server, thread in zip(servers, threads, strict=True):
            server.shutdown()
            server.server_close()
            thread.join()
