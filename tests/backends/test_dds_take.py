"""The dds backend's C part refuses what it cannot use, before Cyclone ever calls it.

What it does with samples is tested on both paths in test_dds_cdr."""

from __future__ import annotations

import subprocess
import sys

import pytest
from tests.conftest import require

from roboscale.backends import dds_cdr


@pytest.fixture
def compiled() -> object:
    module = dds_cdr.compiled_take()
    require(module is not None, "the dds backend's C part (_dds_take) was not built (make extras)")
    return module


def test_a_taker_needs_its_functions_a_batch_and_a_layout(compiled: object) -> None:
    taker_type = compiled.Taker  # type: ignore[attr-defined]
    good = dict(functions=(1, 2, 3, 4, 5), reader=1, mask=0, batch=4, info_layout=(64, 12))
    bad = [
        {"functions": (0, 2, 3, 4, 5)},
        {"batch": 0},
        {"info_layout": (64, 64)},
        {"info_layout": (0, 0)},
    ]
    for change in bad:
        with pytest.raises(ValueError, match="a Taker needs"):
            taker_type(**{**good, **change}, deliver=print, sample_type=dds_cdr.Sample)
    with pytest.raises(TypeError):
        taker_type(**{**good, "functions": (1, 2)}, deliver=print, sample_type=dds_cdr.Sample)
    taker = taker_type(**good, deliver=print, sample_type=dds_cdr.Sample)
    assert taker.malformed == 0 and taker.errors == [] and taker.function() != 0
    with pytest.raises(TypeError, match="once"):
        taker.__init__(**good, deliver=print, sample_type=dds_cdr.Sample)


def test_an_uninitialized_taker_or_forwarder_refuses_to_run(compiled: object) -> None:
    taker = compiled.Taker.__new__(compiled.Taker)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="not initialized"):
        taker.take()
    with pytest.raises(ValueError, match="not initialized"):
        taker.argument()
    forwarder = compiled.Forwarder.__new__(compiled.Forwarder)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="not initialized"):
        forwarder(dds_cdr.Sample(1, 1, 1))
    with pytest.raises(ValueError, match="a Forwarder needs"):
        compiled.Forwarder((0, 1), 1)  # type: ignore[attr-defined]


# The C take driven by ctypes stand-ins for Cyclone's functions: a take that returns
# BATCH fake sample references (never dereferenced: their infos say "not valid").
SECOND_INIT = """
import ctypes, sys
from roboscale.backends import dds_cdr
module = dds_cdr.compiled_take()
TAKE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.POINTER(ctypes.c_void_p),
                        ctypes.c_uint32, ctypes.c_void_p, ctypes.c_uint32)
UNREF = ctypes.CFUNCTYPE(None, ctypes.c_void_p)

def take(reader, refs, count, infos, mask):
    for i in range(count):
        refs[i] = 4096 + i
    return count

take_fn, unref_fn = TAKE(take), UNREF(lambda ref: None)
functions = (ctypes.cast(take_fn, ctypes.c_void_p).value,
             ctypes.cast(unref_fn, ctypes.c_void_p).value, 1, 1, 1)
taker = module.Taker(functions, 1, 0, 4, (16, 0), print, dds_cdr.Sample)
try:  # the second call: a layout 64 MiB apart, which the buffers of the first cannot hold
    taker.__init__(functions, 1, 0, 4, (1 << 26, 0), print, dds_cdr.Sample)
except TypeError as e:
    print("refused:", e)
print("taken", taker.take(), taker.malformed)
"""


def test_a_second_init_is_refused_before_it_changes_the_layout(compiled: object) -> None:
    """#23 item 11: the sizes were written before the "once" check, so take_all read past
    the first call's buffers (seen under AddressSanitizer; here it faults or reads junk)."""
    proc = subprocess.run(
        [sys.executable, "-c", SECOND_INIT], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "refused: a Taker is initialized once" in proc.stdout
    assert "taken 4 0" in proc.stdout
