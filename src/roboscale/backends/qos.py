"""Quality of service as spec axes: what a trial may ask of its middleware, and what each
backend declares it honours. Stdlib only (imported by backends and the spec).

Three axes, as DDS and ROS 2 name them: reliability (`reliable`, `best_effort`),
history (`keep_last`, `keep_last N`, `keep_all`) and durability (`volatile`,
`transient_local`). A trial that leaves an axis unset gets the backend's own
behaviour; a trial that sets one runs only on backends whose `qos` capability
holds that setting's kind, and is refused before anything runs otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

AXES: dict[str, tuple[str, ...]] = {
    "reliability": ("reliable", "best_effort"),
    "history": ("keep_last", "keep_all"),
    "durability": ("volatile", "transient_local"),
}
MAX_DEPTH = 1_000_000
_HISTORY = re.compile(r"[ \t]*(keep_all|keep_last)(?:[ \t]+([1-9][0-9]*))?[ \t]*")

Capability = Mapping[str, frozenset[str]]
# What a backend over a reliable stream (TCP, Zenoh's reliable channel, in-process
# delivery) always does, and nothing else: nothing to choose, no late-joiner history.
RELIABLE_VOLATILE: Capability = {
    "reliability": frozenset({"reliable"}),
    "durability": frozenset({"volatile"}),
}
EVERY_SETTING: Capability = {axis: frozenset(kinds) for axis, kinds in AXES.items()}


def split_history(value: str) -> tuple[str, int]:
    """('keep_last', N) or ('keep_all', 0); N is 0 for a bare `keep_last` (the node's
    queue length). Raises ValueError with what is allowed."""
    # Matched in full, ASCII digits only: `str.split` and `isdigit` also took a newline
    # inside the value and digits of other scripts (then int() failed).
    m = _HISTORY.fullmatch(value) if isinstance(value, str) else None
    if m and m.group(1) == "keep_all" and not m.group(2):
        return "keep_all", 0
    if m and m.group(1) == "keep_last":
        if not m.group(2):
            return "keep_last", 0
        if len(m.group(2)) <= 7 and 1 <= int(m.group(2)) <= MAX_DEPTH:
            return "keep_last", int(m.group(2))
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
    raise ValueError(
        f"history {shown}: allowed keep_all, keep_last (the queue length) or "
        f"keep_last N with N from 1 to {MAX_DEPTH:,}"
    )


def kind_of(axis: str, value: str) -> str:
    """The setting's kind, what a backend's capability names (`keep_last 10` -> keep_last)."""
    return split_history(value)[0] if axis == "history" else value


def check_value(axis: str, value: str) -> str:
    """A QoS value of a spec in its one spelling (`keep_last 5`: it names trials and
    their folders), or ValueError naming what is allowed."""
    if kind_of(axis, value) not in AXES[axis]:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:39] + "…"
        raise ValueError(f"{axis} {shown}: allowed {' or '.join(AXES[axis])}")
    if axis == "history":
        kind, depth = split_history(value)
        return f"{kind} {depth}" if depth else kind
    return value


def label(axis: str, value: str | None) -> str:
    """A trial id's part for a set QoS value ('' when unset)."""
    return "" if value is None else value.replace(" ", "")
