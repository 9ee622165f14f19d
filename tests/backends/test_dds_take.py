"""The dds backend's C part refuses what it cannot use, before Cyclone ever calls it.

What it does with samples is tested on both paths in test_dds_cdr."""

from __future__ import annotations

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
