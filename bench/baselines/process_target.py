"""A process node for the restart benchmarks: it opens its own Zenoh session, then is ready.

Run by roboscale.runtime.process.ProcessNode as `process_target:zenoh_node`, forked
from a zygote or in a fresh interpreter; either way the session is opened after the
fork, by the node itself or, on a warm standby, by its `prepare` before the hand-over.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# preloaded by the zygote with this module
from roboscale.runtime.zenoh_config import zenoh_config, zenoh_settings


def zenoh_node(config: dict[str, Any], ready: Callable[[], None], session: Any = None) -> int:
    """Ready once its Zenoh session is open; a warm standby opened it in `prepare`."""
    import zenoh

    with session if session is not None else zenoh.open(zenoh_config(zenoh_settings([], []))):
        ready()
        time.sleep(float(config.get("lifetime_s", 60)))
    return 0


def _open_session() -> Any:
    import zenoh

    return zenoh.open(zenoh_config(zenoh_settings([], [])))


# A warm standby (Zygote spawn standby=True) opens the session before its hand-over.
zenoh_node.prepare = _open_session  # type: ignore[attr-defined]
