"""Parts registered by name (backends, workloads) and imported only when chosen.

Stdlib only: agents look their backend and workload up in Debian's system Python.
"""

from __future__ import annotations

import importlib
from typing import Any


def load_registered(registry: dict[str, str], name: str, kind: str, default: str) -> Any:
    """Import `registry[name]` (`module` or `module:ATTRIBUTE`, `default` when no
    attribute is named), so that a part that cannot be imported breaks no other."""
    if name not in registry:
        from roboscale.errors import UserError

        raise UserError(
            f"{kind} {name!r} is not available in this roboscale; "
            f"known {kind}s: {', '.join(registry)}"
        )
    module_name, _, attribute = registry[name].partition(":")
    return getattr(importlib.import_module(module_name), attribute or default)
