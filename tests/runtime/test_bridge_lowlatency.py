"""The bridge on Zenoh's `lowlatency` transport (`transport: lowlatency`), which does not
fragment: Zenoh drops a larger message with only a log line (eclipse-zenoh/zenoh#1087).
The bridge caps payloads at LOWLATENCY_MAX_PAYLOAD, at load and at publish, so that no
message vanishes silently. Real sessions on loopback, both links, shared memory off (the
path where Zenoh would drop)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roboscale.backends.base import free_port
from roboscale.errors import UserError
from roboscale.runtime.backlog import fewer_cursors, pack_cursors
from roboscale.runtime.bridge import Bridge, bridge_config, bridge_settings, session_config
from roboscale.runtime.bridgeconfig import QUERY_CURSORS, REPLY_KEY_ALLOWANCE
from roboscale.runtime.durable import _Stream
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.peertransport import MAX_KNOWN, _said
from roboscale.runtime.supervisor import ChildSpec, Supervisor
from roboscale.runtime.wire import DEFAULT_MAX_PAYLOAD, Unencodable
from roboscale.runtime.zenoh_config import LOWLATENCY_MAX_PAYLOAD

from .conftest import wait_until
from .test_bridge import subscriber

CAP = LOWLATENCY_MAX_PAYLOAD
LOW = {"transport": "lowlatency", "shared_memory": False}


def test_lowlatency_settings_are_zenohs_own_and_the_default_is_unchanged() -> None:
    low = bridge_config({**LOW, "import": ["/a"]})
    settings = dict(bridge_settings(low))
    assert json.loads(settings["transport/unicast/lowlatency"]) is True
    assert json.loads(settings["transport/unicast/qos/enabled"]) is False
    config = session_config(low)  # zenoh.Config takes them
    assert json.loads(config.get_json("transport/unicast/lowlatency")) is True
    assert low.max_payload == CAP and low.send_limit() == CAP
    default = bridge_config({"import": ["/a"]})
    assert default.transport == "queued" and default.send_limit() is None
    assert default.max_payload == DEFAULT_MAX_PAYLOAD
    assert not any(k.startswith("transport/unicast/") for k, _ in bridge_settings(default))


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ({"transport": "fast"}, "transport: 'fast' is not allowed: allowed are queued, lowlatency"),
        ({**LOW, "max_payload": CAP + 1}, f"max_payload: a number of bytes from 1 to {CAP}"),
        ({**LOW, "max_payload": {"/a": CAP + 1}}, f"max_payload: /a: a number of bytes from 1 to {CAP}"),  # noqa: E501
    ],
)  # fmt: skip
def test_a_bad_transport_or_a_payload_over_its_cap_is_refused_at_load(
    raw: dict[str, Any], says: str
) -> None:
    with pytest.raises(UserError) as e:
        bridge_config({**raw, "import": ["/a"]}, "launch.yaml: bridge")
    assert str(e.value).startswith("launch.yaml: bridge: ") and says in str(e.value)
    assert bridge_config({**LOW, "max_payload": CAP, "import": ["/a"]}).max_payload == CAP


@contextlib.contextmanager
def lowlatency_link(
    durable: bool,
) -> Iterator[tuple[Runtime, Bridge, Bridge, list[Any], list[SupervisionEvent]]]:
    """Runtime a exports /any (durable: retained) to runtime b, both on lowlatency;
    yields once a first message got through."""
    a, b = Runtime().start(), Runtime().start()
    events: list[SupervisionEvent] = []
    a.subscribers.append(events.append)
    got: list[Any] = []
    subscriber(b, got)
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    exporter = {**LOW, "listen": [endpoint], "export": ["/any"]}
    if durable:
        exporter["durable"] = ["/any"]
    importer = {**LOW, "connect": [endpoint], "import": ["/any"]}
    try:
        with Bridge(a, bridge_config(exporter)) as ba, Bridge(b, bridge_config(importer)) as bb:
            wait_until(lambda: a.call(lambda: a.bus.topic("/any").publish(b"probe")) and got)
            yield a, ba, bb, got, events
    finally:
        a.close()
        b.close()


@pytest.fixture
def lowlatency_pair(
    zenoh: None, bridge_path: str
) -> Iterator[tuple[Runtime, Bridge, Bridge, list[Any], list[SupervisionEvent]]]:
    """A durable /any from runtime a to runtime b, both on lowlatency."""
    with lowlatency_link(durable=True) as pair:
        yield pair


@pytest.mark.zenoh
def test_a_payload_at_the_cap_arrives_and_one_byte_over_is_refused_never_lost(
    lowlatency_pair: tuple[Runtime, Bridge, Bridge, list[Any], list[SupervisionEvent]],
) -> None:
    a, ba, bb, got, events = lowlatency_pair
    publish = a.bus.topic("/any").publish
    a.call(lambda: publish(b"x" * CAP))
    wait_until(lambda: got[-1] == b"x" * CAP)
    with pytest.raises(Unencodable, match=f"payload of {CAP + 1} bytes, over .* {CAP}"):
        a.call(lambda: publish(b"y" * (CAP + 1)))  # raised to its publisher
    a.call(lambda: publish(b"last"))
    wait_until(lambda: got[-1] == b"last")
    assert [len(m) for m in got if m != b"probe"] == [CAP, 4]
    assert ba.stats()["refused"] == 1 and bb.stats()["malformed"] == 0
    assert any(e.kind == "refused" and "lowlatency" in e.detail for e in events)
    # Retained as sent: the refused payload is not in what a backlog query would get.
    retained = [len(data) for _, data, _ in ba._retained["/any"].after(0)]
    assert CAP in retained and CAP + 1 not in retained and max(retained) == CAP


@pytest.mark.zenoh
def test_a_peer_on_the_other_transport_connects_on_the_queued_one(
    zenoh: None, bridge_path: str
) -> None:
    """Zenoh 1.10 negotiates: lowlatency only if both sides ask for it, else the queued
    transport (which fragments): nothing is lost, the gain is. The lowlatency side keeps
    its cap (it cannot know what its link negotiated)."""
    a, b = Runtime().start(), Runtime().start()
    got: list[Any] = []
    subscriber(b, got)
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    exporter = {**LOW, "listen": [endpoint], "export": ["/any"]}
    importer = {"shared_memory": False, "connect": [endpoint], "import": ["/any"]}
    try:
        with Bridge(a, bridge_config(exporter)) as ba, Bridge(b, bridge_config(importer)):
            wait_until(lambda: a.call(lambda: a.bus.topic("/any").publish(b"probe")) and got)
            a.call(lambda: a.bus.topic("/any").publish(b"x" * CAP))
            wait_until(lambda: got[-1] == b"x" * CAP)
            with pytest.raises(Unencodable):
                a.call(lambda: a.bus.topic("/any").publish(b"y" * (CAP + 1)))
            assert ba.stats()["refused"] == 1
    finally:
        a.close()
        b.close()


class DurableSink(Node):
    def on_start(self) -> None:
        self.subscribe(self.params["topic"], self.params["got"].append, durable=True)


def durable_sink(rt: Runtime, topic: str, got: list[Any]) -> None:
    recipe = NodeRecipe("sink", DurableSink, {"topic": topic, "got": got})
    rt.wait(Supervisor(rt, "s", [ChildSpec(recipe)]).start_async())


# A topic whose backlog replies carry a key past REPLY_KEY_ALLOWANCE: a reply carries its
# key in full, so a message at the cap, sent live on a declared key, would not fit in one.
LONG = "/" + "b" * 1_500


@pytest.mark.zenoh
def test_a_late_subscriber_gets_every_message_of_a_lowlatency_backlog(
    pair: tuple[Runtime, Runtime, str], tmp_path: Path
) -> None:
    """Each retained message crosses as one backlog reply, its key in full: the durable
    export's cap leaves room for that key, so every message it took fits in a reply, and
    a late subscriber gets them all (a reply over what Zenoh carries would be dropped and
    close the link). The backlog spans several replies of ~49 KB."""
    a, b, endpoint = pair
    exporter = {**LOW, "listen": [endpoint], "export": [LONG], "durable": [LONG]}
    importer = {**LOW, "connect": [endpoint], "import": [LONG], "durable": [LONG]}
    key = f"rs/@retain{LONG}"
    limit = CAP - (len(key) - REPLY_KEY_ALLOWANCE)
    with Bridge(a, bridge_config(exporter)) as ba:
        assert ba.config.send_limit(key) == limit < CAP
        publish = a.bus.topic(LONG).publish
        sent = [bytes([65 + n]) * limit for n in range(4)] + [b"small"]
        for n, data in enumerate(sent):
            a.call(lambda d=data: publish(d))
            if n == 1:  # a message at the plain cap would not fit in its reply: refused
                says = f"over this topic's maximum of {limit} .*backlog replies' key"
                with pytest.raises(Unencodable, match=says):
                    a.call(lambda: publish(b"z" * CAP))
        got: list[Any] = []
        durable_sink(b, LONG, got)
        cursors = {LONG: tmp_path / "cursor"}
        with Bridge(b, bridge_config(importer), cursors=cursors) as bb:
            wait_until(lambda: len(got) >= len(sent))
            assert got == sent
            assert bb.stats()["peers"]["left"] == 0 and bb.stats()["malformed"] == 0
        assert ba.stats()["refused"] == 1


@pytest.mark.zenoh
def test_a_backlog_query_naming_more_publishers_than_fit_is_trimmed_not_lost(
    pair: tuple[Runtime, Runtime, str], tmp_path: Path
) -> None:
    """A long-lived subscriber knows every publisher id it ever confirmed (a new one per
    publisher session: restarts add them); 16 B each in its backlog query. Past
    QUERY_CURSORS the query names the admitted peers' first, then the newest: it still
    fits one lowlatency message (a larger one was dropped and closed the link), and its
    replies still come."""
    a, b, endpoint = pair
    exporter = {**LOW, "listen": [endpoint], "export": ["/d"], "durable": ["/d"]}
    importer = {**LOW, "connect": [endpoint], "import": ["/d"], "durable": ["/d"]}
    got: list[Any] = []
    durable_sink(b, "/d", got)
    with Bridge(a, bridge_config(exporter)) as ba:
        publish = a.bus.topic("/d").publish
        a.call(lambda: publish(b"before"))
        cursors = {"/d": tmp_path / "cursor"}
        with Bridge(b, bridge_config(importer), cursors=cursors) as bb:
            wait_until(lambda: got == [b"before"])
            durable = bb.imported["/d"]
            assert durable is not None

            def forget_and_know_many() -> None:
                # This subscriber knew QUERY_CURSORS + 100 publishers that are gone, and
                # lost its place in a's stream: a's backlog must come again, in full.
                streams = durable.seq.streams
                del streams[ba.publisher_id]
                for n in range(QUERY_CURSORS + 100):
                    streams[(1 << 40) + n] = _Stream(7)
                durable.query()

            queries = bb.stats()["durable"]["/d"]["queries"]
            b.call(forget_and_know_many)
            wait_until(lambda: got == [b"before", b"before"])  # a's reply came
            stats = bb.stats()
            assert stats["durable"]["/d"]["trimmed_queries"] == 1
            assert stats["durable"]["/d"]["queries"] == queries + 1
            assert stats["peers"]["left"] == 0  # the link stayed up
            a.call(lambda: publish(b"after"))
            wait_until(lambda: got[-1:] == [b"after"])


def test_a_trimmed_query_keeps_the_admitted_peers_then_the_newest_and_fits() -> None:
    after = {p: p * 10 for p in range(1, 10_001)}
    kept = fewer_cursors(after, {3, 5}, QUERY_CURSORS)
    assert len(kept) == QUERY_CURSORS and kept[3] == 30 and kept[5] == 50
    assert 10_000 in kept and 6 not in kept
    assert len(pack_cursors(kept)) <= LOWLATENCY_MAX_PAYLOAD  # 49,135 B arrived, measured


@pytest.mark.zenoh
@pytest.mark.parametrize("importer_transport", ["queued", "lowlatency"])
def test_a_peer_on_the_other_transport_is_said_once_and_a_matching_one_is_not(
    pair: tuple[Runtime, Runtime, str], importer_transport: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Each bridge answers its transport on `<prefix>/@bridge/<zid>`; when a peer is
    admitted the bridge asks it, its own transport in the question, so both ends learn.
    A mismatch is counted, logged and reported once per peer; a match is not."""
    a, b, endpoint = pair
    events: dict[str, list[SupervisionEvent]] = {"a": [], "b": []}
    a.subscribers.append(events["a"].append)
    b.subscribers.append(events["b"].append)
    exporter = {**LOW, "listen": [endpoint], "export": ["/any"]}
    importer = {"transport": importer_transport, "connect": [endpoint], "import": ["/any"]}
    with Bridge(a, bridge_config(exporter)) as ba, Bridge(b, bridge_config(importer)) as bb:
        # Both ends learn the other's transport (b connected while it opened: a asked it).
        wait_until(lambda: bb.transports.known and ba.transports.known)
        assert ba.transports.known == {b.call(bb._link().zid): importer_transport}
        assert bb.transports.known == {a.call(ba._link().zid): "lowlatency"}
        mismatch = importer_transport != "lowlatency"
        for bridge, runtime in ((ba, "a"), (bb, "b")):
            assert bridge.stats()["peers"]["other_transport"] == int(mismatch)
            said = [e.detail for e in events[runtime] if e.kind == "transport"]
            assert len(said) == int(mismatch)
            if mismatch:
                assert "lowlatency" in said[0] and "queued" in said[0]
        warned = [r for r in caplog.records if "is on transport" in r.getMessage()]
        assert len(warned) == (2 if mismatch else 0)


@pytest.mark.zenoh
def test_a_peer_naming_endless_ids_in_its_questions_is_heard_only_up_to_a_bound(
    zenoh: None, bridge_path: str, rt: Runtime
) -> None:
    """The asker's id in a `@bridge` query is its own word: a peer that floods queries
    with made-up ids fills the table of known peers (and the warnings) only up to
    MAX_KNOWN, and every question is still answered."""
    import zenoh as zenoh_lib

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    with Bridge(rt, bridge_config({**LOW, "listen": [endpoint]})) as bridge:
        zid = rt.call(bridge._link().zid)
        spy = zenoh_lib.open(session_config(bridge_config({"connect": [endpoint]})))
        key = f"rs/@bridge/{zid}"
        try:
            # Once the bridge's queryable reached the spy (a question that says nothing).
            wait_until(lambda: any(r.ok for r in spy.get(key, payload=b"?", timeout=5.0)))
            answers = []
            for n in range(MAX_KNOWN + 50):
                question = b"queued %032x" % (n + 1)
                replies = spy.get(key, payload=question, timeout=5.0)
                answers += [r.ok.payload.to_bytes() for r in replies if r.ok is not None]
            assert answers == [b"lowlatency"] * (MAX_KNOWN + 50)
            wait_until(lambda: len(bridge.transports.known) == MAX_KNOWN)
            assert bridge.stats()["peers"]["other_transport"] == MAX_KNOWN
        finally:
            spy.close()


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=80)
    | st.builds(
        lambda t, z: t + b" " + z,
        st.sampled_from([b"queued", b"lowlatency", b"x"]),
        st.binary(max_size=40),
    )
)
def test_what_a_peer_says_of_its_transport_is_parsed_or_refused_never_raises(
    payload: bytes,
) -> None:
    said = _said(payload)
    if said is not None:
        transport, zid = said
        assert transport in ("queued", "lowlatency") and 0 < len(zid) <= 32
        assert payload == f"{transport} {zid}".encode()


@pytest.mark.zenoh
def test_a_direct_send_in_parts_over_the_cap_is_refused_too(zenoh: None, bridge_path: str) -> None:
    """The lab's senders write a frame's header and body as parts straight into a plain
    export from their own thread (`_Export.send_parts`): the cap holds there as for a
    message published whole, or Zenoh would drop the larger one with only a log line."""
    with lowlatency_link(durable=False) as (a, ba, _, got, events):
        export = a.bus.topic("/any").taps[0]
        assert export.retention is None  # a plain export: what the lab's senders use
        with pytest.raises(Unencodable, match=f"payload of {CAP + 1} bytes, over .* {CAP}"):
            export.send_parts((b"h" * 16, b"y" * (CAP + 1 - 16)))
        export.send_parts((b"h" * 16, b"x" * (CAP - 16)))
        wait_until(lambda: len(got[-1]) == CAP)
        wait_until(lambda: ba.stats()["refused"] == 1)  # counted on the loop
        assert [len(m) for m in got if m != b"probe"] == [CAP]
        wait_until(lambda: any(e.kind == "refused" for e in events))
