"""Cyclone's serialized samples, taken by the C part or through ctypes: a received sample
is read in place, only during its callback, and forwarded by reference with the same
bytes; both paths count the same malformed samples and keep the same errors."""

from __future__ import annotations

import ctypes
import struct
import threading
import time
from typing import Any

import pytest
from tests.conftest import require

from roboscale.backends import dds as backend
from roboscale.backends import dds_cdr
from roboscale.backends.base import MessageKind, NodeContext
from roboscale.backends.dds_cdr import CdrReader, ReaderListener, Sample, SampleWriter, taker


@pytest.fixture(params=backend.PATHS)
def path(request: pytest.FixtureRequest) -> str:
    """Each test twice: with the C part (which must be built: make test builds it) and
    with the ctypes path ($ROBOSCALE_DDS_PATH=ctypes, or a machine without a C compiler)."""
    if request.param == "c":
        require(
            dds_cdr.compiled_take() is not None,
            "the dds backend's C part (_dds_take) was not built: install gcc and Python's "
            "headers (sudo make system), then reinstall (make extras)",
        )
    return str(request.param)


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
@pytest.mark.parametrize("take", backend.TAKE_MODES)
def test_a_forwarded_sample_arrives_unchanged(dds: None, take: str, path: str) -> None:
    """An echoer's path, with samples taken in a listener or on a reader thread: the
    callback's sample is forwarded by reference to another topic and arrives there with
    the same bytes; its body reads as sent."""
    lease = backend.lease_domain()
    xml = backend.cyclone_xml(lease.domain, "lo", ["127.0.0.1"], 4)
    cfg = {"domain": lease.domain, "xml": xml, "qos": {}, "take": take, "path": path}
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
        # each reader is taken the way asked: by the C part or in Python, and in two
        # listeners or on two reader threads
        assert all(isinstance(t, dds_cdr.CdrTaker) == (path == "ctypes") for t in session._takers)
        assert (len(session._listeners), len(session._threads)) == (
            (2, 0) if take == "listener" else (0, 2)
        )
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


def stamped(seq: int, size: int = 100) -> bytes:
    from roboscale.backends.dds_types import StampedBytes, Time

    return StampedBytes(id=seq, t=Time(sec=1, nanosec=2), data=bytes(size)).serialize()


@pytest.mark.dds
def test_a_listener_takes_what_came_before_and_after_it_and_nothing_once_closed(
    dds: None, path: str
) -> None:
    """A sample written before the listener was attached is taken when it attaches (the
    pending event), later ones as they come (here on the writing thread: Cyclone delivers
    in-process samples there; the trials in test_dds take them on its receive thread);
    an error in the callback is kept, never raised into Cyclone, and the next samples
    still come; after close nothing is called."""
    from cyclonedds.core import InstanceState, SampleState, ViewState

    lease = backend.lease_domain()
    try:
        domain, reader, writer = backend.loopback_endpoints(lease.domain, "rt/listen")
        write = SampleWriter(writer._ref)
        got: list[int] = []
        arrived = threading.Event()

        def deliver(seq: int, sample: Sample) -> None:
            assert struct.unpack_from("<i", sample.head(), 4)[0] == seq
            got.append(seq)
            arrived.set()
            if seq == 2:
                raise RuntimeError("the workload failed")

        assert write(stamped(1)) == 0
        mask = SampleState.Any | ViewState.Any | InstanceState.Any
        taking = taker(reader._ref, mask, 4, deliver, path == "c")
        listener = ReaderListener(reader._ref, taking)
        for seq in (2, 3):
            arrived.clear()
            deadline = time.monotonic() + 10
            while seq not in got and time.monotonic() < deadline:
                write(stamped(seq))
                arrived.wait(0.5)
        listener.close()
        assert got[:1] == [1] and 2 in got and 3 in got
        assert [str(e) for e in taking.errors] == ["the workload failed"] * got.count(2)
        count = len(got)
        assert write(stamped(4)) == 0
        listener.close()  # twice is fine
        assert len(got) == count  # sample 4 is still in the reader: nobody took it
        assert taking.take() == 1 and got[-1] == 4
        assert taking.malformed == 0 and domain is not None
    finally:
        lease.release()


@pytest.mark.dds
def test_malformed_samples_are_counted_and_dropped(dds: None, path: str) -> None:
    """Not plain CDR little endian (byte 1 of the encapsulation header): counted, never
    delivered; a good sample after them still is. The two here are the encodings Cyclone's
    writer lets through (XCDR2 and parameter lists, little endian); it refuses big-endian
    and short ones itself, so the readers' length check is not reachable from here."""
    from cyclonedds.core import InstanceState, SampleState, ViewState

    lease = backend.lease_domain()
    try:
        domain, reader, writer = backend.loopback_endpoints(lease.domain, "rt/bad")
        write = SampleWriter(writer._ref)
        good = stamped(9)
        got: list[int] = []
        mask = SampleState.Any | ViewState.Any | InstanceState.Any
        taking = taker(reader._ref, mask, 8, lambda seq, sample: got.append(seq), path == "c")
        for cdr in (b"\0\x07" + good[2:], b"\0\x03" + good[2:], good):
            assert write(cdr) == 0
            deadline = time.monotonic() + 10  # the reader keeps the last sample only
            while taking.take() == 0 and time.monotonic() < deadline:
                time.sleep(0.01)
        assert got == [9] and taking.malformed == 2 and taking.errors == []
        assert domain is not None
    finally:
        lease.release()


@pytest.mark.dds
def test_a_released_sample_is_not_forwarded(dds: None, path: str) -> None:
    """After its callback a sample's serdata is Cyclone's again: forwarding it is refused."""
    lease = backend.lease_domain()
    try:
        domain, _, writer = backend.loopback_endpoints(lease.domain, "rt/late")
        buffer = ctypes.create_string_buffer(stamped(1), 120)
        sample = Sample(1, ctypes.addressof(buffer), 120)
        sample.release()
        with pytest.raises(ValueError, match="only during its callback"):
            dds_cdr.forwarder(writer._ref, path == "c")(sample)
        assert domain is not None
    finally:
        lease.release()
