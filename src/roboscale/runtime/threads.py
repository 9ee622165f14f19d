"""An owner for threads (trio's rule): every thread runs inside a scope that joins it.

A `ThreadScope` starts the threads of one owner (a bridge link's drain thread, a
backend session's readers, the process monitor), hands any exception a thread ends on
to `on_error` (and keeps it), and joins them all on `close`. Nothing a thread raises is
lost, and nothing it does outlives its owner unseen: a thread still alive after the
join timeout is named in `close`'s result.

    scope = ThreadScope("bridge", on_error=report)
    scope.spawn(drain, sub, name="roboscale-bridge")
    ...
    scope.close(timeout_s=5.0)   # the owner first made the threads' inputs end
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from typing import Any

ErrorHandler = Callable[[str, BaseException], None]


class ThreadScope:
    """The threads of one owner: started here, errors surfaced, joined on close."""

    def __init__(self, owner: str, on_error: ErrorHandler | None = None) -> None:
        self.owner = owner
        self.on_error = on_error
        self.errors: list[tuple[str, BaseException]] = []  # (thread name, exception)
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.closed = False

    def spawn(self, target: Callable[..., Any], *args: Any, name: str) -> threading.Thread:
        """Start `target(*args)` in a thread of this scope."""
        with self._lock:
            if self.closed:
                raise RuntimeError(f"{self.owner}: thread scope closed, cannot start {name}")
            thread = threading.Thread(
                target=self._run, args=(target, args, name), name=name, daemon=True
            )
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()
        return thread

    def _run(self, target: Callable[..., Any], args: tuple[Any, ...], name: str) -> None:
        try:
            target(*args)
        except BaseException as e:
            with self._lock:
                self.errors.append((name, e))
            if self.on_error is not None:
                # The reporter itself failing: the error is still kept in `errors`.
                with contextlib.suppress(Exception):
                    self.on_error(name, e)

    @property
    def threads(self) -> list[threading.Thread]:
        with self._lock:
            return list(self._threads)

    def close(self, timeout_s: float = 5.0) -> list[str]:
        """Join every thread (within `timeout_s` in all); the names of those still alive.
        A thread of this scope closing it is not waited for (it is on its way out)."""
        with self._lock:
            self.closed = True
            threads = list(self._threads)
        deadline = time.monotonic() + timeout_s
        me = threading.current_thread()
        for thread in threads:
            if thread is not me:
                thread.join(max(0.0, deadline - time.monotonic()))
        return [t.name for t in threads if t.is_alive() and t is not me]

    def __enter__(self) -> ThreadScope:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
