"""Fixtures of the backend tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from roboscale.runtime.executor import Runtime


@pytest.fixture
def rt(zenoh: None) -> Iterator[Runtime]:
    """A started runtime (its loop thread) for a node session to run on; closed after."""
    runtime = Runtime().start()
    yield runtime
    runtime.close()
