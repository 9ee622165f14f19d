"""Structured supervision events, and subscribers that log or record them.

Every start, exit, restart, give-up and escalation of a supervised child is one
`SupervisionEvent`. Subscribers are plain callables; they run on the runtime's
event loop, so they must be quick (the recorder only buffers a line).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from roboscale.errors import UserError
from roboscale.safewrite import open_stream

# What happened; the set is closed so that recorders and reports can rely on it.
EVENT_KINDS = frozenset(
    {
        "started",  # a child reported ready
        "start_failed",  # a child failed to start
        "exited",  # a child ended without being asked to (reason says how)
        "restarted",  # the supervisor restarted a child after an exit
        "stopped",  # the supervisor stopped a child (shutdown or strategy)
        "killed",  # a child missed its shutdown timeout and was killed
        "gave_up",  # restart intensity reached: children stopped, supervisor ends
        "escalated",  # the supervisor reported its own end to its parent
        "hung",  # a watchdog or heartbeat check declared a node failed
        "overflow",  # a bounded queue dropped a message (counted, never silent)
        "gap",  # a durable subscriber missed messages the publisher no longer retained
        "malformed",  # the bridge dropped samples it could not decode (counted)
        "peer",  # a Zenoh peer was admitted to the bridge's session, or left it
        "insecure",  # a bridge reaches beyond loopback without authentication (opted in)
        "thread_failed",  # a thread the runtime owns ended on an exception (detail says it)
        "death_notice",  # a process node's early death notice fell back to its exit report
    }
)


@dataclass(frozen=True, slots=True)
class SupervisionEvent:
    kind: str
    supervisor: str  # path of the supervisor, e.g. "/top/faces"
    child: str  # child name, "" for events about the supervisor itself
    reason: str = ""  # an ExitReason value for exits
    detail: str = ""
    t_ns: int = dataclasses.field(default_factory=time.monotonic_ns)

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)


EventSubscriber = Callable[[SupervisionEvent], None]

_log = logging.getLogger("roboscale.runtime")


def log_event(event: SupervisionEvent) -> None:
    """A subscriber that writes events to the `roboscale.runtime` logger."""
    level = (
        logging.INFO
        if event.kind in {"started", "stopped", "restarted", "peer", "shared_memory_swept"}
        else logging.WARNING
    )
    _log.log(
        level,
        "%s %s/%s %s %s",
        event.kind,
        event.supervisor,
        event.child,
        event.reason,
        event.detail,
    )


class JsonLinesRecorder:
    """A subscriber that appends one JSON object per event to a file."""

    def __init__(self, path: Path) -> None:
        try:
            self._file: IO[str] = os.fdopen(open_stream(path, append=True), "a", encoding="utf-8")
        except OSError as e:
            raise UserError(f"cannot write events to {path}: {e.strerror}") from e
        self.path = path
        self.count = 0

    def __call__(self, event: SupervisionEvent) -> None:
        self._file.write(json.dumps(event.to_dict(), separators=(",", ":")) + "\n")
        self.count += 1

    def close(self) -> None:
        self._file.close()


def read_events(path: Path) -> list[SupervisionEvent]:
    """Read back what a JsonLinesRecorder wrote."""
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line:
            events.append(SupervisionEvent(**json.loads(line)))
    return events
