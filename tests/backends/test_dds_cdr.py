"""Cyclone's serialized samples through ctypes: a received sample is read in place, only
during its callback, and forwarded by reference with the same bytes."""

from __future__ import annotations

import ctypes
import struct
import threading
import time
from typing import Any

import pytest

from roboscale.backends import dds as backend
from roboscale.backends.base import MessageKind, NodeContext
from roboscale.backends.dds_cdr import CdrReader, Sample, SampleWriter


def test_a_sample_reads_in_place_and_clips_to_its_size() -> None:
    data = b"\x00\x01\x00\x00" + struct.pack("<iiI", 7, 1, 2) + b"payload"
    buffer = ctypes.create_string_buffer(data, len(data))
    sample = Sample(1, ctypes.addressof(buffer), len(data))
    assert sample.head() == data[:16] and bytes(sample) == data and len(sample) == len(data)
    assert sample.read(16, 100) == b"payload" and sample.read(-3, 2) == data[:2]
    short = Sample(1, ctypes.addressof(buffer), 5)
    assert short.head() == data[:5]


def test_a_released_sample_refuses_every_use() -> None:
    buffer = ctypes.create_string_buffer(32)
    sample = Sample(1, ctypes.addressof(buffer), 32)
    sample.release()
    for use in (bytes, Sample.serdata, lambda s: s.read(0, 4)):
        with pytest.raises(ValueError, match="only during its callback"):
            use(sample)


@pytest.mark.dds
def test_the_reader_takes_the_writers_bytes_in_place(dds: None) -> None:
    """The binding's serdata layout holds on the pinned version (the fast path is used),
    and a sample taken by reference carries exactly the bytes written."""
    from cyclonedds.core import InstanceState, SampleState, ViewState

    from roboscale.backends.dds_types import StampedBytes, Time

    lease = backend.lease_domain()
    try:
        domain, reader, writer = backend.loopback_endpoints(lease.domain, "rt/cdr")
        cdr = StampedBytes(id=3, t=Time(sec=4, nanosec=5), data=bytes(range(256)) * 40).serialize()
        assert SampleWriter(writer._ref)(cdr) == 0
        mask = SampleState.Any | ViewState.Any | InstanceState.Any
        samples = CdrReader(reader._ref, mask, 4)
        got: list[bytes] = []
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            samples.take(lambda s: got.append(bytes(s)))
            time.sleep(0.01)
        assert got == [cdr]
        assert samples._in_place is True
        assert domain is not None  # the domain (its configuration) lived throughout
    finally:
        lease.release()


@pytest.mark.dds
def test_a_forwarded_sample_arrives_unchanged(dds: None) -> None:
    """An echoer's path: the callback's sample is forwarded by reference to another topic
    and arrives there with the same bytes; its body reads as sent."""
    lease = backend.lease_domain()
    xml = backend.cyclone_xml(lease.domain, "lo", ["127.0.0.1"], 4)
    cfg = {"domain": lease.domain, "xml": xml, "qos": {}}
    session = backend.BACKEND.open(NodeContext("echo", "local", cfg))
    kind = MessageKind("bytes", 1000)
    bodies: list[bytes] = []
    echoed: list[tuple[int, bytes]] = []
    arrived = threading.Event()
    body = bytes(range(250)) * 4
    try:
        back = session.publisher("/back", kind, 10)

        def on_out(seq: int, msg: Any) -> None:
            bodies.append(session.body_of(msg, kind))
            back.forward(msg)

        def on_back(seq: int, msg: Any) -> None:
            echoed.append((seq, bytes(msg)))
            arrived.set()

        session.subscribe("/out", kind, on_out, 0)
        session.subscribe("/back", kind, on_back, 0)
        out = session.publisher("/out", kind, 10)
        deadline = time.monotonic() + 20
        while not arrived.wait(0.05) and time.monotonic() < deadline:
            out.send_body(12, 7_000_000_001, body)
    finally:
        session.close()
        lease.release()
    assert echoed, "nothing came back within 20 s"
    seq, raw = echoed[0]
    assert seq == 12 and bodies[0] == body
    assert struct.unpack_from("<iiI", raw, 4) == (12, 7, 1)
    assert raw[20 : 20 + len(body)] == body and back.failed == 0
