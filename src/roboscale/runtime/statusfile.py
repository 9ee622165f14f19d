"""Live status of a running launch, published to a file that `roboscale status` reads.

A launch rewrites `<run dir>/<name>-<pid>.json` about twice per second, atomically
(write a temporary file, then rename), so a reader never sees half a file. The
run directory is `launch` in the user's private runtime directory (`privdir`:
`$XDG_RUNTIME_DIR/roboscale` first, else `/tmp/roboscale-<uid>`), created 0700 and
checked for owner and mode: a directory another user made is refused, never used.

The document holds the rows of `Supervisor.status()` and per-topic message
rates. Rates come from `Topic.published`, a counter the bus already keeps: each
snapshot stores the counters with their time, and the rate is the difference
to the oldest snapshot of the last second. No work is added to publishing.

A file whose pid no longer runs is stale (the launch was killed before it could
remove its file): readers report it as such and delete it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roboscale.errors import UserError
from roboscale.privdir import private_subdir
from roboscale.runtime.bus import Bus
from roboscale.runtime.supervisor import Supervisor
from roboscale.safewrite import write_text

FORMAT_VERSION = 1
PUBLISH_PERIOD_S = 0.5  # "about twice per second"
RATE_WINDOW_S = 1.0  # rates are messages per second over the last second


def run_dir() -> Path:
    """Where running launches publish their status: private, created and checked here."""
    return private_subdir("launch")


def status_path(directory: Path, name: str, pid: int) -> Path:
    return directory / f"{name}-{pid}.json"


class TopicRates:
    """Messages per second per topic over the last second, from the bus's publish counters."""

    def __init__(self, bus: Bus, clock: Callable[[], float] = time.monotonic) -> None:
        self.bus = bus
        self.clock = clock
        self._snapshots: deque[tuple[float, dict[str, int]]] = deque()

    def sample(self) -> list[dict[str, Any]]:
        """Take a snapshot (on the loop thread) and return one row per topic."""
        now = self.clock()
        counts = {name: t.published for name, t in self.bus.topics.items()}
        snaps = self._snapshots
        snaps.append((now, counts))
        # Keep the newest snapshot at least a window old as the base of the rate.
        while len(snaps) > 2 and now - snaps[1][0] >= RATE_WINDOW_S:
            snaps.popleft()
        base_t, base = snaps[0]
        span = now - base_t
        rows = []
        for name in sorted(counts):
            topic = self.bus.topics[name]
            delta = counts[name] - base.get(name, 0)
            rows.append(
                {
                    "topic": name,
                    "published": counts[name],
                    "rate_hz": round(delta / span, 1) if span > 0 else 0.0,
                    "subscribers": len(topic.inboxes),
                }
            )
        return rows


def snapshot(
    name: str, root: Supervisor, rates: TopicRates, started_unix: float, extra: dict[str, Any]
) -> dict[str, Any]:
    """The status document of a launch; call it on the runtime's loop thread."""
    return {
        "format": FORMAT_VERSION,
        "name": name,
        "pid": os.getpid(),
        "started_unix": started_unix,
        "updated_unix": time.time(),
        "alive": root.alive(),
        "rows": root.status(),
        "topics": rates.sample(),
        **extra,
    }


class StatusPublisher:
    """Rewrites the status file of one launch ~2x per second; removes it when closed."""

    def __init__(
        self,
        root: Supervisor,
        bus: Bus,
        *,
        directory: Path | None = None,
        extra: Callable[[], dict[str, Any]] = dict,
    ) -> None:
        self.root = root
        self.rates = TopicRates(bus)
        self.directory = directory or run_dir()
        self.path = status_path(self.directory, root.name, os.getpid())
        self.extra = extra
        self.started_unix = time.time()
        self.writes = 0

    def publish(self) -> None:
        """Write one snapshot now (on the loop thread: the tree is only read there)."""
        doc = snapshot(self.root.name, self.root, self.rates, self.started_unix, self.extra())
        # A small file on a tmpfs: written inline, well under a millisecond; the rename makes
        # it atomic for readers.
        write_text(self.path, json.dumps(doc, separators=(",", ":")))
        self.writes += 1

    async def run(self) -> None:
        """Publish until cancelled, on absolute deadlines; the file is removed at the end."""
        try:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as e:
            raise UserError(f"cannot create the status directory {self.directory}: {e}") from e
        loop = asyncio.get_running_loop()
        due = loop.time()
        try:
            while True:
                self.publish()
                due += PUBLISH_PERIOD_S
                await asyncio.sleep(max(0.0, due - loop.time()))
        finally:
            self.remove()

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
        self.path.with_name(self.path.name + ".part").unlink(missing_ok=True)


@dataclass(frozen=True, slots=True)
class LaunchStatus:
    """One status file as read back: its document, or why it is stale."""

    path: Path
    name: str
    pid: int
    doc: dict[str, Any] | None  # None when stale
    stale: str = ""  # why the file was stale (and removed); "" when live


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # it exists, owned by someone else
    return True


def _split_name(path: Path) -> tuple[str, int] | None:
    name, sep, pid = path.stem.rpartition("-")
    if not sep or not name or not pid.isdigit():
        return None
    return name, int(pid)


def read_statuses(
    directory: Path | None = None, name: str | None = None, *, clean: bool = True
) -> list[LaunchStatus]:
    """Every launch status file (of `name`, if given), sorted by name then pid.

    A file of a pid that is gone is returned as stale and, with `clean`, deleted.
    """
    directory = directory or run_dir()
    found: list[LaunchStatus] = []
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        parsed = _split_name(path)
        if parsed is None or (name is not None and parsed[0] != name):
            continue
        launch, pid = parsed
        if not pid_alive(pid):
            if clean:
                path.unlink(missing_ok=True)
            found.append(LaunchStatus(path, launch, pid, None, f"process {pid} is not running"))
            continue
        doc = _read_doc(path)
        if doc is None:
            continue  # removed between listing and reading: that launch just ended
        found.append(LaunchStatus(path, launch, pid, doc))
    return found


def _read_doc(path: Path) -> dict[str, Any] | None:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: not a readable status file: {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_VERSION:
        found = doc.get("format") if isinstance(doc, dict) else None
        raise UserError(
            f"{path}: status format {found!r} is not supported (this roboscale reads "
            f"{FORMAT_VERSION}); upgrade roboscale or restart that launch"
        )
    return doc
