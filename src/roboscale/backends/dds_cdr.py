"""Serialized samples in and out of Cyclone DDS through ctypes, past the binding's copies.

The binding (cyclonedds 11.0.1, clayer/pysertype.c) takes a sample with `ddspy_take`:
Cyclone's serdata is copied into a container it allocates, that into a Python `bytes`,
and a SampleInfo object is built per sample, all while holding the GIL (35-43 µs for a
256 KB sample here); forwarding those bytes with `dds_write` copies them once more into
a new serdata and validates them again. Here, as ddsperf and rmw_cyclonedds do in C:

- `CdrReader.take` takes references to the reader's serialized samples (`dds_takecdr`)
  and hands each to the callback as a `Sample`: Cyclone's own buffer, read in place,
  valid while the callback runs and released after it;
- `forward_sample` writes a received sample's reference (`dds_writecdr`): no copy;
- `SampleWriter` writes a bytes/bytearray (`dds_write`: one copy into a serdata).

Every call goes through ctypes, so the GIL is let go while Cyclone works.

Where the C part (`_dds_take.c`, built at install when a compiler is there) is
available, `taker` and `forwarder` give its Taker and Forwarder instead: the same steps
without a Python frame of their own per message (docs/dds.md measures the difference).
Both paths deliver (id, Sample) to the same callbacks, count the same malformed samples
and keep the same errors.
"""

from __future__ import annotations

import atexit
import ctypes
import struct
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol


class SampleContainer(ctypes.Structure):
    """The binding's sample for its sertype: a pointer to the CDR and its length."""

    _fields_ = (("usample", ctypes.c_void_p), ("usample_size", ctypes.c_size_t))


class IoVec(ctypes.Structure):
    _fields_ = (("base", ctypes.c_void_p), ("length", ctypes.c_size_t))


SERDATA_HEADER = 64  # sizeof(struct ddsi_serdata) in Cyclone 11.0.1 on 64-bit machines


class PySerdata(ctypes.Structure):
    """The binding's serdata (clayer/pysertype.c, `ddspy_serdata_t`): Cyclone's common
    header, then a pointer to the CDR (encapsulation header first) and its length.
    Read in place, it spares two foreign calls per sample; `CdrReader` checks the layout
    against `ddsi_serdata_to_ser_ref` on its first sample and uses that call otherwise."""

    _fields_ = (
        ("header", ctypes.c_char * SERDATA_HEADER),
        ("data", ctypes.c_void_p),
        ("data_size", ctypes.c_size_t),
    )


HEAD_BYTES = 16  # encapsulation header, id and stamp: what a callback's seq comes from
Head = ctypes.c_char * HEAD_BYTES
ID = struct.Struct("<i")  # the id, after the 4-byte encapsulation header
MAX_ERRORS = 10  # a callback's exceptions kept (the first is printed)
Deliver = Callable[[int, "Sample"], object]  # a subscriber's callback: (id, sample)


@dataclass(frozen=True)
class Cyclone:
    """The few libddsc functions used here, typed once per process."""

    write: Any
    waitset_wait: Any
    takecdr: Any
    writecdr: Any
    serdata_ref: Any
    serdata_unref: Any
    serdata_size: Any
    to_ser_ref: Any
    to_ser_unref: Any
    sample_info: Any
    create_listener: Any
    lset_data_available: Any
    set_listener: Any
    delete_listener: Any


_cyclone: Cyclone | None = None
# dds_on_data_available_fn: void (*)(dds_entity_t reader, void *arg)
DataAvailable = ctypes.CFUNCTYPE(None, ctypes.c_int32, ctypes.c_void_p)


def _typed(lib: Any, name: str, argtypes: list[Any], restype: Any) -> Any:
    fn = getattr(lib, name)
    fn.argtypes, fn.restype = argtypes, restype
    return fn


def cyclone() -> Cyclone:
    """libddsc as the binding loaded it (the wheel's own copy), typed."""
    global _cyclone
    if _cyclone is None:
        from cyclonedds.internal import dds_c_t, load_cyclonedds

        lib, i32, vp = load_cyclonedds(), ctypes.c_int32, ctypes.c_void_p
        info = dds_c_t.sample_info
        iov = ctypes.POINTER(IoVec)
        _cyclone = Cyclone(
            write=_typed(lib, "dds_write", [i32, vp], i32),
            waitset_wait=_typed(
                lib, "dds_waitset_wait", [i32, vp, ctypes.c_size_t, ctypes.c_int64], i32
            ),
            takecdr=_typed(
                lib,
                "dds_takecdr",
                [i32, ctypes.POINTER(vp), ctypes.c_uint32, ctypes.POINTER(info), ctypes.c_uint32],
                i32,
            ),
            writecdr=_typed(lib, "dds_writecdr", [i32, vp], i32),
            serdata_ref=_typed(lib, "ddsi_serdata_ref", [vp], vp),
            serdata_unref=_typed(lib, "ddsi_serdata_unref", [vp], None),
            serdata_size=_typed(lib, "ddsi_serdata_size", [vp], ctypes.c_uint32),
            to_ser_ref=_typed(
                lib, "ddsi_serdata_to_ser_ref", [vp, ctypes.c_size_t, ctypes.c_size_t, iov], vp
            ),
            to_ser_unref=_typed(lib, "ddsi_serdata_to_ser_unref", [vp, iov], None),
            sample_info=info,
            create_listener=_typed(lib, "dds_create_listener", [vp], vp),
            lset_data_available=_typed(lib, "dds_lset_data_available", [vp, DataAvailable], None),
            set_listener=_typed(lib, "dds_set_listener", [i32, vp], i32),
            delete_listener=_typed(lib, "dds_delete_listener", [vp], None),
        )
    return _cyclone


class Sample:
    """A received sample: Cyclone's serialized data (encapsulation header first), read in
    place. Valid while the subscriber's callback runs: afterwards it is released and every
    use raises ValueError. `bytes(sample)` copies it whole."""

    __slots__ = ("_base", "_serdata", "size")

    def __init__(self, serdata: int, base: int, size: int) -> None:
        self._serdata, self._base, self.size = serdata, base, size

    def read(self, offset: int, size: int) -> bytes:
        """A copy of bytes [offset, offset + size), clipped to the sample."""
        if not self._serdata:
            raise ValueError("a received DDS sample is valid only during its callback")
        start = min(max(offset, 0), self.size)
        return ctypes.string_at(self._base + start, min(max(size, 0), self.size - start))

    def head(self) -> bytes:
        """The first 16 bytes (fewer if the sample is shorter): header, id and stamp."""
        if self.size < HEAD_BYTES:
            return self.read(0, self.size)
        return Head.from_address(self._base).raw

    def __bytes__(self) -> bytes:
        return self.read(0, self.size)

    def __len__(self) -> int:
        return self.size

    def serdata(self) -> int:
        """Cyclone's serdata pointer, for a writer (`forward_sample`)."""
        if not self._serdata:
            raise ValueError("a received DDS sample is valid only during its callback")
        return self._serdata

    def release(self) -> None:
        self._serdata = self._base = self.size = 0


class CdrReader:
    """Takes a reader's samples as references to Cyclone's serialized data, in batches.

    Every line here runs once per message on a thread that has just woken: cold, each
    Python operation costs ten times what it costs in a loop (docs/dds.md), so the path
    is kept to one foreign call per batch and one per sample."""

    def __init__(self, reader: int, mask: int, batch: int) -> None:
        self._c = cyclone()
        self._reader, self._mask, self._batch = reader, mask, batch
        self._refs = (ctypes.c_void_p * batch)()
        self._infos = (self._c.sample_info * batch)()
        self._iov = IoVec()
        self._in_place: bool | None = None  # PySerdata's layout checked on the first sample

    def take(self, deliver: Callable[[Sample], None]) -> int:
        """Take what the reader holds and `deliver` each valid sample; the count taken,
        negative when the reader is gone (deleted with its session)."""
        refs, infos, unref = self._refs, self._infos, self._c.serdata_unref
        taken: int = self._c.takecdr(self._reader, refs, self._batch, infos, self._mask)
        for i in range(taken):
            serdata = refs[i]
            if not serdata:
                continue
            try:
                if infos[i].valid_data:
                    self._deliver_one(serdata, deliver)
            finally:
                unref(serdata)  # the reference dds_takecdr gave us
        return taken

    def _deliver_one(self, serdata: int, deliver: Callable[[Sample], None]) -> None:
        if self._in_place is None:
            self._in_place = self._layout_holds(serdata)
        if self._in_place:
            fields = PySerdata.from_address(serdata)
            sample = Sample(serdata, fields.data or 0, fields.data_size)
            try:
                deliver(sample)
            finally:
                sample.release()
            return
        c, iov = self._c, self._iov
        size = c.serdata_size(serdata)
        held = c.to_ser_ref(serdata, 0, size, ctypes.byref(iov))
        sample = Sample(serdata, iov.base or 0, size)
        try:
            deliver(sample)
        finally:
            sample.release()
            c.to_ser_unref(held, ctypes.byref(iov))

    def _layout_holds(self, serdata: int) -> bool:
        """Whether PySerdata reads what Cyclone's own `to_ser_ref` returns."""
        c, iov = self._c, self._iov
        size = c.serdata_size(serdata)
        held = c.to_ser_ref(serdata, 0, size, ctypes.byref(iov))
        fields = PySerdata.from_address(serdata)
        holds: bool = fields.data == iov.base and fields.data_size == size
        c.to_ser_unref(held, ctypes.byref(iov))
        return holds


class SampleForwarder:
    """Writes received samples unchanged: a new reference to the sample's serdata, which
    `dds_writecdr` consumes (stamping the current time, as `dds_write` does); no copy.
    Cyclone converts the serdata when the writer's sertype is another."""

    def __init__(self, entity: int) -> None:
        c = cyclone()
        self._ref, self._writecdr, self.entity = c.serdata_ref, c.writecdr, entity

    def __call__(self, sample: Sample) -> int:
        serdata = sample.serdata()
        self._ref(serdata)
        status: int = self._writecdr(self.entity, serdata)
        return status


class SampleWriter:
    """`dds_write` of a serialized sample through ctypes, which lets go of the GIL while
    Cyclone sends (and, when its writer is throttled, waits); the binding's ddspy_write
    holds it throughout, starving the node's other threads (a publisher's acks).
    The sample is the binding's container (clayer/pysertype.c in cyclonedds 11.0.1):
    a pointer to the CDR and its length; Cyclone copies it before returning."""

    def __init__(self, entity: int) -> None:
        self._write = cyclone().write
        self.entity = entity
        self._container = SampleContainer()
        self._ref = ctypes.byref(self._container)

    def __call__(self, cdr: bytes | bytearray) -> int:
        c = self._container
        if isinstance(cdr, bytearray):  # the view lives until the call returns
            view = (ctypes.c_char * len(cdr)).from_buffer(cdr)
            c.usample = ctypes.addressof(view)
        else:  # the bytes object's own buffer, not a copy
            c.usample = ctypes.cast(ctypes.c_char_p(cdr), ctypes.c_void_p).value
        c.usample_size = len(cdr)
        status: int = self._write(self.entity, self._ref)
        return status


class PinnedSampleWriter:
    """`dds_write` of one buffer that is patched in place between writes (a publisher's
    message: id and stamp change, nothing else). The container points at it once; the
    export pins it (a bytearray cannot be resized while this lives), so a send is one
    foreign call and no Python object is made per message."""

    def __init__(self, entity: int, buffer: bytearray) -> None:
        self._view = (ctypes.c_char * len(buffer)).from_buffer(buffer)
        self._container = SampleContainer(ctypes.addressof(self._view), len(buffer))
        self._ref = ctypes.byref(self._container)
        self._write, self._entity = cyclone().write, entity

    def __call__(self) -> int:
        status: int = self._write(self._entity, self._ref)
        return status


_held_thread_states: set[int] = set()


def hold_thread_state() -> None:
    """Keep the calling foreign thread's Python thread state for later calls.

    ctypes runs a callback on a thread Python did not start by creating a thread state
    and deleting it again on return, every call; one more `PyGILState_Ensure`, never
    released, keeps that state (and the thread's warm interpreter data) between calls.
    """
    ident = threading.get_ident()
    if ident not in _held_thread_states:
        ctypes.pythonapi.PyGILState_Ensure()
        _held_thread_states.add(ident)


class Taking(Protocol):
    """A reader's take path: `take` delivers what the reader holds to the subscriber's
    callback as (id, Sample), dropping (and counting) samples that are not CDR little
    endian with an id, and keeping the callback's exceptions instead of raising them;
    `function(argument)` is the same step as Cyclone's on_data_available (a listener)."""

    @property
    def malformed(self) -> int: ...

    @property
    def errors(self) -> list[BaseException]: ...

    def take(self) -> int: ...

    def function(self) -> int: ...

    def argument(self) -> int: ...


class CdrTaker:
    """`Taking` in Python over `CdrReader`, where the C part was not built."""

    def __init__(self, reader: int, mask: int, batch: int, deliver: Deliver) -> None:
        self._samples = CdrReader(reader, mask, batch)
        self._deliver = deliver
        self.malformed = 0
        self.errors: list[BaseException] = []
        # Cyclone keeps the function pointer: this object must outlive the listener.
        self._callback = DataAvailable(self._on_data_available)

    def take(self) -> int:
        return self._samples.take(self._deliver_one)

    def _deliver_one(self, sample: Sample) -> None:
        # Byte 1 of the encapsulation header: 1 is CDR little endian, what ROS 2 sends.
        head = sample.head()
        if len(head) < HEAD_BYTES or head[1] != 1:
            self.malformed += 1
            return
        try:
            self._deliver(ID.unpack_from(head, 4)[0], sample)
        except Exception as error:  # kept, as the C part keeps it: never raised into Cyclone
            self._keep(error)

    def _keep(self, error: Exception) -> None:
        if not self.errors:  # the first one to the node's log, as a dying thread would
            traceback.print_exc(file=sys.stderr)
        if len(self.errors) < MAX_ERRORS:
            self.errors.append(error)

    def function(self) -> int:
        return _address(self._callback)

    def argument(self) -> int:
        return 0

    def _on_data_available(self, reader: int, arg: int) -> None:
        try:
            hold_thread_state()
            self.take()
        except Exception as error:  # a ctypes callback cannot raise into Cyclone
            self._keep(error)


def compiled_take() -> ModuleType | None:
    """The C part (`_dds_take`), or None where it was not built (no compiler at install)."""
    try:
        from roboscale.backends import _dds_take
    except ImportError:
        return None
    return _dds_take


def take_path() -> str:
    """Which per-message path this install has, for `roboscale backends`."""
    if compiled_take() is not None:
        return "per-message path in C"
    return (
        "per-message path in ctypes: the C part was not built "
        "(no C compiler or Python headers at install)"
    )


def _address(function: Any) -> int:
    address: int = ctypes.cast(function, ctypes.c_void_p).value or 0
    return address


def taker(reader: int, mask: int, batch: int, deliver: Deliver, in_c: bool = True) -> Taking:
    """The reader's take path: the C part's Taker where it was built (and `in_c`), else
    `CdrTaker`."""
    compiled = compiled_take() if in_c else None
    if compiled is None:
        return CdrTaker(reader, mask, batch, deliver)
    c, info = cyclone(), cyclone().sample_info
    functions = (
        _address(c.takecdr),
        _address(c.serdata_unref),
        _address(c.serdata_size),
        _address(c.to_ser_ref),
        _address(c.to_ser_unref),
    )
    layout = (ctypes.sizeof(info), info.valid_data.offset)
    taking: Taking = compiled.Taker(functions, reader, mask, batch, layout, deliver, Sample)
    return taking


def forwarder(writer: int, in_c: bool = True) -> Callable[[Sample], int]:
    """Writes received samples by reference: the C part's Forwarder where it was built (and
    `in_c`), else `SampleForwarder`."""
    compiled = compiled_take() if in_c else None
    if compiled is None:
        return SampleForwarder(writer)
    c = cyclone()
    forward: Callable[[Sample], int] = compiled.Forwarder(
        (_address(c.serdata_ref), _address(c.writecdr)), writer
    )
    return forward


class ReaderListener:
    """Takes a reader's samples on the thread Cyclone delivers them on, as ddsperf does.

    Cyclone delivers received data synchronously on its receive thread (a writer's
    default latency budget and transport priority), and calls `on_data_available`
    there: taking in that callback spares a second thread's wake-up per message, the
    difference between ddsperf's listener and waitset modes. The callback holds the GIL
    while it runs, so that thread waits whenever a Python thread of the node holds it;
    a node's other threads here wait in Cyclone or in sleeps (docs/dds.md).
    `close` detaches the callback and waits for a running one, the GIL let go.
    """

    def __init__(self, reader: int, taking: Taking) -> None:
        self._c, self._reader, self._taking = cyclone(), reader, taking
        # Cyclone keeps the function pointer and its argument: both live as long as this.
        self._callback = DataAvailable(taking.function())
        self._listener = self._c.create_listener(taking.argument() or None)
        self._c.lset_data_available(self._listener, self._callback)
        _listeners.add(self)
        # Samples that arrived before this are delivered by dds_set_listener itself.
        status = self._c.set_listener(reader, self._listener)
        if status < 0:
            self.close()
            raise OSError(f"dds_set_listener failed with Cyclone status {status}")

    def close(self) -> None:
        if self._listener is None:
            return
        self._c.set_listener(self._reader, None)  # waits for a running callback
        self._c.delete_listener(self._listener)
        self._listener = None
        _listeners.discard(self)


_listeners: set[ReaderListener] = set()


@atexit.register
def _detach_listeners() -> None:
    """Before the interpreter finalizes, no Cyclone thread may call into it."""
    for listener in list(_listeners):
        listener.close()
