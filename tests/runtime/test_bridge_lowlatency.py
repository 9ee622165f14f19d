"""The bridge on Zenoh's `lowlatency` transport (`transport: lowlatency`), which does not
fragment: Zenoh drops a larger message with only a log line (eclipse-zenoh/zenoh#1087).
The bridge caps payloads at LOWLATENCY_MAX_PAYLOAD, at load and at publish, so that no
message vanishes silently. Real sessions on loopback, both links, shared memory off (the
path where Zenoh would drop)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from roboscale.backends.base import free_port
from roboscale.errors import UserError
from roboscale.runtime.bridge import Bridge, bridge_config, bridge_settings, session_config
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.executor import Runtime
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


@pytest.fixture
def lowlatency_pair(
    zenoh: None, bridge_path: str
) -> Iterator[tuple[Runtime, Bridge, Bridge, list[Any], list[SupervisionEvent]]]:
    """Runtime a exports /any (durable: retained) to runtime b, both on lowlatency;
    yields once a first message got through."""
    a, b = Runtime().start(), Runtime().start()
    events: list[SupervisionEvent] = []
    a.subscribers.append(events.append)
    got: list[Any] = []
    subscriber(b, got)
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    exporter = {**LOW, "listen": [endpoint], "export": ["/any"], "durable": ["/any"]}
    importer = {**LOW, "connect": [endpoint], "import": ["/any"]}
    try:
        with Bridge(a, bridge_config(exporter)) as ba, Bridge(b, bridge_config(importer)) as bb:
            wait_until(lambda: a.call(lambda: a.bus.topic("/any").publish(b"probe")) and got)
            yield a, ba, bb, got, events
    finally:
        a.close()
        b.close()


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
