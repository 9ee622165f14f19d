"""ROS-style names for topics, services and nodes, validated with a clear message."""

from __future__ import annotations

import re

from roboscale.errors import UserError

# ROS graph resource names: segments start with a letter, then letters, digits
# and underscores; segments are separated by "/"; a leading "/" makes it global.
_SEGMENT = r"[A-Za-z][A-Za-z0-9_]*"
# Matched in full (`re.fullmatch`): `$` would also match before a final newline.
_NAME = re.compile(rf"/?{_SEGMENT}(/{_SEGMENT})*")

NAME_RULE = (
    "segments separated by '/', each starting with a letter followed by letters, digits "
    "or '_' (e.g. /camera/image_raw)"
)


def check_name(name: str, what: str = "topic") -> str:
    """Return `name` in global form (leading '/'); raise UserError if it is not a valid name."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UserError(f"invalid {what} name {name!r}: allowed are {NAME_RULE}")
    return name if name.startswith("/") else "/" + name


def is_valid_name(name: str) -> bool:
    return isinstance(name, str) and _NAME.fullmatch(name) is not None
