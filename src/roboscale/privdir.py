"""Directories only this user can write: where run state lives and code is imported from.

A path under /tmp that is predictable can be created first by another local user;
a tool that then writes (or, worse, imports) there runs on their terms. So every
directory roboscale keeps state in comes from `private_dir`: created mode 0700 if
missing, and whether new or found, checked with lstat: a real directory (not a
symlink), owned by this user, writable by nobody else. Anything else is refused
with a clear error and never used.

`runtime_dir()` is the root of that state: `$XDG_RUNTIME_DIR/roboscale` when the
variable is set (a per-user tmpfs the login manager made), else
`<tmp>/roboscale-<uid>`. Standard library only: the runtime and ros1 agents in the
system Python import this module.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from roboscale.errors import UserError

_OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


def check_private(path: Path) -> Path:
    """`path` if it is a directory of ours that nobody else can write; else a UserError."""
    try:
        st = os.lstat(path)
    except OSError as e:
        raise UserError(f"{path}: cannot inspect it ({e.strerror or e})") from None
    uid = os.getuid()
    problem = ""
    if stat.S_ISLNK(st.st_mode):
        problem = f"it is a symlink to {os.readlink(path)}"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "it is not a directory"
    elif st.st_uid != uid:
        problem = f"it is owned by uid {st.st_uid}, not by you (uid {uid})"
    elif st.st_mode & _OTHERS_WRITE:
        problem = f"others can write to it (mode {stat.S_IMODE(st.st_mode):04o})"
    if problem:
        raise UserError(
            f"{path}: refusing to use it as a private directory: {problem}",
            hint="another user may have created it to take over roboscale's files: "
            "inspect and remove it, or set XDG_RUNTIME_DIR to a directory only you can write",
        )
    return path


def private_dir(path: Path) -> Path:
    """Create `path` (mode 0700) unless it exists, then check it as `check_private` does.

    Its parent must exist and be safe: owned by us or root, and writable by others
    only if sticky (like /tmp), where others cannot rename or remove what we made.
    """
    _check_parent(path.parent)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass  # checked below, whoever made it
    except OSError as e:
        raise UserError(f"{path}: cannot create it ({e.strerror or e})") from None
    return check_private(path)


def _check_parent(parent: Path) -> None:
    try:
        st = os.stat(parent)
    except OSError as e:
        raise UserError(f"{parent}: cannot use it ({e.strerror or e})") from None
    owner_ok = st.st_uid in (0, os.getuid())
    if not owner_ok or (st.st_mode & _OTHERS_WRITE and not st.st_mode & stat.S_ISVTX):
        raise UserError(
            f"{parent}: refusing to keep private files in it: owned by uid {st.st_uid}, "
            f"mode {stat.S_IMODE(st.st_mode):04o}; allowed: owned by you or root, and "
            "writable by others only with the sticky bit (like /tmp)"
        )


def runtime_dir() -> Path:
    """The private root of this user's run state (status files, the agents' package link)."""
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        base = Path(xdg)
        if not base.is_absolute():
            raise UserError(
                f"XDG_RUNTIME_DIR={xdg!r} is not an absolute path",
                hint="unset it, or set it to your private runtime directory (/run/user/<uid>)",
            )
        return private_dir(private_dir(base) / "roboscale")
    return private_dir(Path(tempfile.gettempdir()) / f"roboscale-{os.getuid()}")


def private_subdir(*parts: str) -> Path:
    """`runtime_dir()/parts...`, every level created 0700 and checked."""
    path = runtime_dir()
    for part in parts:
        path = private_dir(path / part)
    return path
