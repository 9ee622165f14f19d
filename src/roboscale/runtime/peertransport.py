"""Says when a bridge's link fell back to the queued transport.

A link is lowlatency only if both sessions ask for it; with a peer on the queued
transport, Zenoh negotiates the queued one and says nothing (runtime/zenoh_config.py).
Zenoh's transport events do not tell which one was negotiated, so each bridge states its
own: a queryable `<prefix>/@bridge/<its Zenoh id>` answers its transport. When a peer is
admitted, the bridge asks the peer's (again, a bounded number of times, while the peer's
declarations are on their way), its own transport and id in the query's payload, so that
both ends learn from one exchange (a bridge that connected while it opened sees no
admission event of that peer). A peer on the other transport is counted
(`stats()["peers"]["other_transport"]`), logged as a warning and reported as a
`transport` supervision event, once per peer. A peer that is no bridge (a router) never
answers: it is not judged.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import TYPE_CHECKING

from roboscale.runtime.zenoh_config import TRANSPORTS

if TYPE_CHECKING:
    from roboscale.runtime.bridge import Bridge

_log = logging.getLogger("roboscale.runtime")

ASK_TIMEOUT_S = 1.0  # one query; a peer with no such queryable answers at once (no reply)
ASKS = 40  # queries per admitted peer at most, ASK_PAUSE_S apart (10 s), until it answers
ASK_PAUSE_S = 0.25
MAX_ZID = 32  # hex digits of a Zenoh id
# Peers judged at most: the asker's id in a query is its own word, so a peer that may query
# could name endless ids; past this, what is said is no longer recorded, warned or counted.
MAX_KNOWN = 1024


class PeerTransports:
    """The transport of each peer bridge, compared with this bridge's own (on its loop)."""

    def __init__(self, bridge: Bridge) -> None:
        self.bridge = bridge
        self.mine = bridge.config.transport
        self.known: dict[str, str] = {}  # peer zid -> its transport, as it said
        self.other = 0  # peers on the other transport
        self.zid = ""  # this bridge's, once declared
        self._tasks: set[asyncio.Task[None]] = set()
        self._one_ask = asyncio.Lock()  # one executor thread asks at a time
        self._closing = threading.Lock()  # held while a query runs: close waits for it
        self._closed = False

    def key(self, zid: str) -> str:
        return f"{self.bridge.config.prefix}/@bridge/{zid}"

    def declare(self, zid: str) -> None:
        """On the loop: answer this bridge's transport to whoever asks."""
        self.zid = zid
        self.bridge._link().queryable(self.key(zid), self._answer)

    def _answer(self, _key: str, _after: str | None, payload: bytes) -> list[tuple[bytes, bytes]]:
        """On a Zenoh thread: our transport; the asker's, in the payload, is judged too."""
        said = _said(payload)
        if said is not None:
            with contextlib.suppress(RuntimeError):  # a closed loop: the process is ending
                self.bridge.runtime.loop.call_soon_threadsafe(self.judge, *said)
        return [(self.mine.encode(), b"")]

    def admitted(self, zid: str) -> None:
        """On the loop: a peer's transport opened; ask it which transport it asked for."""
        if zid in self.known or self._closed:
            return
        task = self.bridge.runtime.loop.create_task(self._ask(zid))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _ask(self, zid: str) -> None:
        loop = self.bridge.runtime.loop
        for _ in range(ASKS):
            question = f"{self.mine} {self.zid}".encode()  # zid: declared on the loop
            async with self._one_ask:
                if zid in self.known or self._closed:
                    return
                replies = await loop.run_in_executor(None, self._get, self.key(zid), question)
            for payload, _, _ in replies:
                said = _said(payload + b" " + zid.encode())
                if said is not None:
                    self.judge(*said)
                    return
            await asyncio.sleep(ASK_PAUSE_S)

    def _get(self, key: str, question: bytes) -> list[tuple[bytes, bytes, str]]:
        """In a worker thread: one query, never while the session closes."""
        with self._closing:
            link = self.bridge.link
            if self._closed or link is None:
                return []
            try:
                return link.get(key, question, ASK_TIMEOUT_S)
            except Exception:  # the session closing under it: nothing to judge
                return []

    def judge(self, transport: str, zid: str) -> None:
        """On the loop: what a peer said of its transport, once per peer."""
        if zid in self.known or zid == self.zid or len(self.known) >= MAX_KNOWN:
            return
        if transport != self.mine:
            self.other += 1
            detail = (
                f"peer {zid} is on transport {transport}, this bridge on {self.mine}: their "
                "link runs on the queued transport (lowlatency needs both ends); set the same "
                "transport on every process"
            )
            _log.warning("bridge: %s", detail)
            self.bridge.emit("transport", detail)
        self.known[zid] = transport  # last: known once said (what a test waits for)

    def close(self) -> None:
        """From outside the loop, before the session closes: wait for a query in flight
        (at most ASK_TIMEOUT_S), ask no more, cancel the asks still pending."""
        with self._closing:
            self._closed = True
        with contextlib.suppress(RuntimeError):  # a closed loop: nothing pending any more
            self.bridge.runtime.loop.call_soon_threadsafe(self._cancel)

    def _cancel(self) -> None:
        for task in list(self._tasks):
            task.cancel()


def _said(payload: bytes) -> tuple[str, str] | None:
    """(transport, zid) of `b"<transport> <zid>"`, or None if it is not that."""
    parts = payload.split(b" ")
    if len(parts) != 2:
        return None
    transport, zid = (p.decode("ascii", "replace") for p in parts)
    ok_zid = 0 < len(zid) <= MAX_ZID and all(c in "0123456789abcdef" for c in zid)
    return (transport, zid) if transport in TRANSPORTS and ok_zid else None
