"""A process node for the restart benchmarks: it opens its own Zenoh session, then is ready.

Run by roboscale.runtime.process.ProcessNode as `process_target:zenoh_node`, forked
from a zygote or in a fresh interpreter; either way the session is opened after start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

# preloaded by the zygote with this module
from roboscale.runtime.zenoh_config import zenoh_config, zenoh_settings


def zenoh_node(config: dict[str, Any], ready: Callable[[], None]) -> int:
    import zenoh

    with zenoh.open(zenoh_config(zenoh_settings([], []))):
        ready()
        time.sleep(float(config.get("lifetime_s", 60)))
    return 0
