"""Which asyncio event loop this process runs: beneath the runtime (which runs it) and the
host facts (which record it), so that neither imports the other."""

from __future__ import annotations

import os

from roboscale.errors import UserError

LOOP_ENV = "ROBOSCALE_LOOP"
LOOPS = ("uvloop", "asyncio")


def loop_kind() -> str:
    """The event loop this process uses: $ROBOSCALE_LOOP, else uvloop when installed."""
    chosen = os.environ.get(LOOP_ENV, "")
    if chosen and chosen not in LOOPS:
        raise UserError(f"{LOOP_ENV}={chosen!r} is not allowed: allowed are {', '.join(LOOPS)}")
    if chosen == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if chosen == "uvloop":
            raise UserError(f"{LOOP_ENV}=uvloop but uvloop is not installed") from None
        return "asyncio"
    return "uvloop"
