"""The runtime's echo with the bridge's data path on zenoh_min: a diagnosis of bench/scale.py.

    runtime_native_echo.py echo LISTEN | ping CONNECT COUNT SIZE...   as runtime_echo.py

The same two runtimes, nodes, bridge code and timing as runtime_echo.py, except where
samples cross Zenoh: the exports put through zenoh_min (baselines/zenoh_pyo3, built by
bench/scale.py) and the one data subscriber wakes the loop through zenoh_min's eventfd,
with no drain thread. Against zenoh_native_echo.py (the same binding, no runtime code) it
prices the runtime's own work per hop; against runtime_echo.py, what a native receive path
would take off the bridge. Publish/subscribe only: no durable topics (the retention
queryable and the backlog query are not carried), so it is a measurement, not a bridge.
"""

from __future__ import annotations

from typing import Any

from runtime_echo import main
from zenoh_native_echo import zenoh_min

from roboscale.errors import UserError
from roboscale.runtime.bridge import BATCH, CHANNEL, Bridge, bridge_settings


class NativePublisher:
    """zenoh_min's publisher under the name and the put the bridge's exports call."""

    def __init__(self, publisher: Any) -> None:
        self.put = publisher.put

    def undeclare(self) -> None:
        pass  # zenoh_min undeclares with its session


class NativeSession:
    """zenoh_min's session with the one declaration of zenoh-python's the exports use."""

    def __init__(self, session: Any) -> None:
        self.native = session

    def declare_publisher(self, key: str, *, express: bool, **_: Any) -> NativePublisher:
        return NativePublisher(self.native.publisher(key, express))

    def close(self) -> None:
        self.native.close()


class NativeBridge(Bridge):
    def _open_session(self) -> NativeSession:
        if self.config.durable:
            raise UserError("runtime_native_echo: durable topics are not carried")
        return NativeSession(zenoh_min.Session(bridge_settings(self.config)))

    def _watch_peers(self) -> None:
        pass  # zenoh_min has no transport events: this echo counts no peers

    def _subscribe(self) -> None:
        inbox = self.session.native.inbox(f"{self.config.prefix}/**", CHANNEL)
        strip, loop = len(self.config.prefix), self.runtime.loop
        loop.add_reader(inbox.fileno(), lambda: self._on_samples(inbox.take_samples(BATCH, strip)))
        self._entities.append(Unsubscribe(loop, inbox))


class Unsubscribe:
    """Undeclared at close, on the loop's thread or not: the loop stops reading the inbox."""

    def __init__(self, loop: Any, inbox: Any) -> None:
        self.loop, self.inbox = loop, inbox

    def undeclare(self) -> None:
        self.inbox.close()
        self.loop.call_soon_threadsafe(self.loop.remove_reader, self.inbox.fileno())


if __name__ == "__main__":
    main(NativeBridge, __doc__)
