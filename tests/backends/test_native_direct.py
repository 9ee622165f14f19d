"""The native-proc sender's frames go through the bridge export from the pacing thread
only where that is all their topic has (backends/native.py `direct_export`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from roboscale.backends.base import free_port
from roboscale.backends.native import direct_export
from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime


@pytest.fixture
def rt(zenoh: None) -> Iterator[Runtime]:
    runtime = Runtime().start()
    yield runtime
    runtime.close()


@pytest.mark.zenoh
def test_only_a_plain_export_with_no_local_subscriber_is_sent_through_directly(
    rt: Runtime,
) -> None:
    bus = rt.bus
    for name in ("/plain", "/watched", "/durable", "/later"):
        rt.call(bus.topic, name)
    rt.call(lambda: bus.inbox(bus.topic("/watched"), 10, _drop_oldest(), None))
    assert direct_export(bus.topic("/later")) is None  # not exported yet: asked again later
    config = {
        "listen": [f"tcp/127.0.0.1:{free_port()}"],
        "export": ["/plain", "/watched", "/durable"],
        "durable": ["/durable"],
        "retain": 10,
    }
    with Bridge(rt, bridge_config(config)):
        plain = direct_export(bus.topic("/plain"))
        assert callable(plain) and plain in bus.topic("/plain").taps
        assert direct_export(bus.topic("/watched")) is False  # a subscriber here: the loop
        assert direct_export(bus.topic("/durable")) is False  # a retention window: the loop
        assert plain(b"frame from the pacing thread") is None  # the export's own put


def _drop_oldest() -> Any:
    from roboscale.runtime.bus import Overflow

    return Overflow.DROP_OLDEST
