"""The bridge's per-message links: which one runs, the native header check held against
wire.py's, and a drain thread's failure surfacing as an event."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roboscale.backends.base import free_port
from roboscale.errors import UserError
from roboscale.runtime import zlink
from roboscale.runtime.bridge import BridgeConfig, bridge_config
from roboscale.runtime.bridgeconfig import bridge_settings
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.security import Security, Tls
from roboscale.runtime.wire import HEADER, Malformed, unpack_header

from .conftest import NOT_BUILT, wait_until
from .test_bridge import raw_peer_into


def native() -> Any:
    module = zlink.native_module()
    if module is None:
        from tests.conftest import require

        require(False, NOT_BUILT)
    return module


def python_check(raw: bytes) -> tuple[int, int, int, int] | str:
    try:
        return unpack_header(raw)
    except Malformed as e:
        return str(e)


def native_check(raw: bytes) -> tuple[int, int, int, int] | str:
    try:
        result: tuple[int, int, int, int] = native().unpack_header(raw)
        return result
    except ValueError as e:
        return str(e)


headers = st.one_of(
    st.binary(max_size=40),
    st.builds(
        HEADER.pack,
        st.sampled_from([0, 1, 2, 3, 255]),
        st.integers(0, 255),
        st.integers(0, 2**32 - 1),
        st.integers(0, 2**64 - 1),
        st.sampled_from([0, 1, 2, 2**63 - 1, 2**63, 2**64 - 1]) | st.integers(0, 2**64 - 1),
    ),
)


@settings(max_examples=400, deadline=None)
@given(headers)
def test_the_native_header_check_is_wire_pys_message_for_message(raw: bytes) -> None:
    assert native_check(raw) == python_check(raw)


def test_the_path_is_native_where_built_unless_forced_or_secured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    native()
    monkeypatch.delenv(zlink.PATH_ENV, raising=False)
    assert zlink.link_path(bridge_config({}))[0] == "native"
    secured = BridgeConfig(security=Security(tls=Tls(ca=Path("ca.pem"))))
    assert zlink.link_path(secured) == (
        "python",
        "secured bridges run on zenoh-python (TLS, authentication)",
    )
    login = BridgeConfig(security=Security(user="robot", password_file=Path("robot.pw")))
    assert zlink.link_path(login)[0] == "python"
    # The lab's trial networks say only `insecure: true`: no session setting, native.
    assert zlink.link_path(bridge_config({"security": {"insecure": True}}))[0] == "native"
    monkeypatch.setenv(zlink.PATH_ENV, "python")
    assert zlink.link_path(bridge_config({}))[0] == "python"
    monkeypatch.setenv(zlink.PATH_ENV, "rust")
    with pytest.raises(UserError, match=r"ROBOSCALE_BRIDGE_PATH is 'rust'; allowed: auto, native"):
        zlink.link_path(bridge_config({}))


def test_forcing_the_native_path_where_it_was_not_built_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(zlink, "native_module", lambda: None)
    monkeypatch.setenv(zlink.PATH_ENV, "native")
    with pytest.raises(UserError, match="was not built"):
        zlink.link_path(bridge_config({}))
    monkeypatch.setenv(zlink.PATH_ENV, "auto")
    assert zlink.link_path(bridge_config({}))[0] == "python"


@pytest.mark.zenoh
def test_a_drain_thread_that_fails_surfaces_as_an_event(
    zenoh: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug in the python link's drain thread is a `thread_failed` event, not a silent end."""
    monkeypatch.setenv(zlink.PATH_ENV, "python")
    a, b = Runtime().start(), Runtime().start()
    seen: list[SupervisionEvent] = []
    b.subscribers.append(seen.append)
    try:
        with raw_peer_into((a, b, f"tcp/127.0.0.1:{free_port()}")) as (bridge, session, _):
            assert isinstance(bridge.link, zlink.PythonLink) and bridge.link.drain is not None

            def broken(sample: Any) -> tuple[str, bytes, bytes]:
                raise KeyError("a bug")

            monkeypatch.setattr(bridge.link.drain, "row", broken)
            session.put("rs/any", b"x")
            wait_until(lambda: any(e.kind == "thread_failed" for e in seen))
            thread = bridge.link.drain.thread
            assert thread is not None
            thread.join(5.0)
            assert not thread.is_alive()
        error = next(e for e in seen if e.kind == "thread_failed")
        assert "drain thread failed: KeyError" in error.detail and error.supervisor == "bridge"
    finally:
        a.close()
        b.close()


@pytest.mark.zenoh
def test_a_full_native_queue_holds_zenoh_back_and_loses_nothing() -> None:
    """A queue of 2 rows and 40 messages sent before the loop takes any: Zenoh's thread
    waits for room (back-pressure), each `take` lets it go on, and every message arrives
    once and in order."""
    module = native()
    port = free_port()
    settings = bridge_settings(bridge_config({"listen": [f"tcp/127.0.0.1:{port}"]}))
    receiver = module.Session(settings)
    sender = module.Session(bridge_settings(bridge_config({"connect": [f"tcp/127.0.0.1:{port}"]})))
    try:
        inbox = receiver.inbox("rs", 2)
        inbox.import_topic("/t", 0)
        pub = sender.publisher("rs/t", 7, True)
        rows: list[Any] = []

        def probed() -> bool:  # until the subscriber is matched: one probe arrives
            pub.send(b"probe", 0, 0)
            time.sleep(0.05)
            rows.extend(inbox.take(64))
            return bool(rows)

        wait_until(probed, timeout_s=30.0)
        last_probe = pub.send(b"probe", 0, 0)  # a marker: what follows it is counted
        payloads = [bytes([n]) * 11 for n in range(40)]
        seqs = [pub.send(p, 0, 0) for p in payloads]
        got: list[tuple[int, bytes]] = []

        def all_taken() -> bool:
            got.extend((r[4], r[5]) for r in inbox.take(64) if r[4] > last_probe)
            return len(got) >= len(payloads)

        wait_until(all_taken, timeout_s=30.0)
        assert got == list(zip(seqs, payloads, strict=True))
        assert inbox.counters()[:2] == (0, 0)
        inbox.close()
        pub.undeclare()
    finally:
        sender.close()
        receiver.close()


@pytest.mark.zenoh
def test_a_native_session_closes_while_a_query_of_it_is_in_flight() -> None:
    """A bridge closes while a worker thread's backlog query still waits for replies (a
    durable import asks again while messages are held): the close must go through, not
    fail on the query's hold of the session ("Already borrowed"), and the query ends."""
    module = native()
    port = free_port()
    answering = module.Session(
        bridge_settings(bridge_config({"listen": [f"tcp/127.0.0.1:{port}"]}))
    )
    asking = module.Session(bridge_settings(bridge_config({"connect": [f"tcp/127.0.0.1:{port}"]})))
    asked, release = threading.Event(), threading.Event()

    def answer(_key: str, _after: str | None, _payload: bytes) -> list[tuple[bytes, bytes]]:
        asked.set()
        release.wait(30.0)  # hold the query open until the asker has closed
        return []

    queryable = answering.queryable("q/held", answer)
    outcome: list[object] = []

    def query() -> None:
        try:
            outcome.append(asking.get("q/held", b"", 20.0))
        except Exception as e:  # a closed session may end the query with an error
            outcome.append(e)

    try:
        wait_until(lambda: asking.get("q/none", b"", 0.2) is not None)  # the link is up
        thread = threading.Thread(target=query, name="held-query")
        thread.start()
        assert asked.wait(30.0), "the query never reached the queryable"
        asking.close()  # must not raise while the query holds the session
        release.set()
        thread.join(30.0)
        assert not thread.is_alive() and len(outcome) == 1
    finally:
        release.set()
        queryable.undeclare()
        asking.close()
        answering.close()
