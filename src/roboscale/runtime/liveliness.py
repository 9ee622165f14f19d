"""Remote node death through Zenoh liveliness tokens.

Each node that must be watchable declares a token `<prefix>/@alive/<node path>`
on its process's session (`declare_alive`). Zenoh drops the token when the
session closes or the process dies (its link closes at once on loopback; across
hosts, when the lease expires). A `LivelinessWatcher` (one liveliness
subscriber per session, `history=True`, one callback handing events to the loop)
tracks which tokens exist.

`RemoteNodeChild` is a `ChildHandle` for a node that runs elsewhere: it is
"started" when its token is present (it waits `ready_timeout_s` for it), and a
token DELETE is its exit (reason CRASH), which its supervisor acts on like any
other exit: a restart is again waiting for the token (the remote host's own
supervisor, or whoever launches it, brings it back). If it wraps a `launcher`
ChildHandle (e.g. a process node), start and stop also start and stop that.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

from roboscale.runtime.child import ChildStartError, ExitCallback, ExitReason
from roboscale.runtime.executor import Runtime
from roboscale.runtime.names import check_name


def alive_key(prefix: str, node_path: str) -> str:
    return f"{prefix}/@alive{check_name(node_path, 'node')}"


def declare_alive(session: Any, node_path: str, prefix: str = "rs") -> Any:
    """Declare the liveliness token of a node; undeclare it (or close the session) to leave."""
    return session.liveliness().declare_token(alive_key(prefix, node_path))


class LivelinessWatcher:
    """The set of live node tokens seen by one session, with callbacks on the loop."""

    def __init__(self, runtime: Runtime, session: Any, prefix: str = "rs") -> None:
        self.runtime = runtime
        self.prefix = prefix
        self.alive: set[str] = set()
        self._watchers: dict[str, list[Callable[[bool], None]]] = {}
        self._sub = session.liveliness().declare_subscriber(
            f"{prefix}/@alive/**", self._on_sample, history=True
        )

    def _on_sample(self, sample: Any) -> None:
        import zenoh

        # On a Zenoh thread: hand over to the loop, where all state lives.
        present = sample.kind == zenoh.SampleKind.PUT
        key = str(sample.key_expr)
        with contextlib.suppress(RuntimeError):  # a closed loop: the process is ending
            self.runtime.loop.call_soon_threadsafe(self._changed, key, present)

    def _changed(self, key: str, present: bool) -> None:
        if present:
            self.alive.add(key)
        else:
            self.alive.discard(key)
        for callback in list(self._watchers.get(key, ())):
            callback(present)

    def watch(self, key: str, callback: Callable[[bool], None]) -> None:
        self._watchers.setdefault(key, []).append(callback)

    def unwatch(self, key: str, callback: Callable[[bool], None]) -> None:
        callbacks = self._watchers.get(key, [])
        if callback in callbacks:
            callbacks.remove(callback)

    def close(self) -> None:
        self._sub.undeclare()


class RemoteNodeChild:
    """A supervised node in another process or host, alive while its token exists."""

    def __init__(
        self,
        watcher: LivelinessWatcher,
        name: str,
        node_path: str,
        *,
        ready_timeout_s: float = 10.0,
        launcher: Any = None,
    ) -> None:
        self.watcher = watcher
        self.runtime = watcher.runtime
        self.name = check_name(name, "node").lstrip("/")
        self.path = "/" + self.name
        self.key = alive_key(watcher.prefix, node_path)
        self.ready_timeout_s = ready_timeout_s
        self.launcher = launcher  # an optional ChildHandle that runs the remote node
        self.on_exit: ExitCallback | None = None
        self._ready: asyncio.Future[None] | None = None

    def alive(self) -> bool:
        return self.on_exit is not None and self.key in self.watcher.alive

    def start(self, on_exit: ExitCallback) -> None:
        self.runtime.wait(self.start_async(on_exit), timeout_s=self.ready_timeout_s + 30.0)

    def stop(self, timeout_s: float) -> None:
        self.runtime.wait(self.stop_async(timeout_s), timeout_s=timeout_s + 30.0)

    async def start_async(self, on_exit: ExitCallback) -> None:
        if self.launcher is not None:
            await asyncio.to_thread(self.launcher.start, self._launcher_exit)
        if self.key not in self.watcher.alive:
            self._ready = self.runtime.loop.create_future()
            self.watcher.watch(self.key, self._appeared)
            try:
                await asyncio.wait_for(self._ready, self.ready_timeout_s)
            except TimeoutError:
                raise ChildStartError(
                    self.name, f"no liveliness token {self.key} within {self.ready_timeout_s:g}s"
                ) from None
            finally:
                self.watcher.unwatch(self.key, self._appeared)
                self._ready = None
        self.on_exit = on_exit
        self.watcher.watch(self.key, self._changed)

    def _appeared(self, present: bool) -> None:
        if present and self._ready is not None and not self._ready.done():
            self._ready.set_result(None)

    def _changed(self, present: bool) -> None:
        if not present:
            self._exited(ExitReason.CRASH, f"liveliness token {self.key} dropped")

    def _launcher_exit(self, _name: str, reason: ExitReason, detail: str) -> None:
        # The launcher (a local process) ended on its own: usually seen first, by its pidfd.
        self.runtime.loop.call_soon_threadsafe(self._exited, reason, detail)

    def _exited(self, reason: ExitReason, detail: str) -> None:
        on_exit, self.on_exit = self.on_exit, None
        self.watcher.unwatch(self.key, self._changed)
        if on_exit is not None:
            on_exit(self.name, reason, detail)

    async def stop_async(self, timeout_s: float) -> bool:
        """Stop watching (and stop the launcher, if any): a remote node cannot be stopped."""
        self.on_exit = None
        self.watcher.unwatch(self.key, self._changed)
        if self.launcher is not None:
            await asyncio.to_thread(self.launcher.stop, timeout_s)
        return False
