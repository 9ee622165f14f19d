"""Write files without following links: every writer of the tool goes through here.

A results folder, a report's folder or a model's folder may have been made by someone
else (a folder received from a colleague, a path another user could create). A name in
it may be a symlink planted to make the tool overwrite some other file
(`report.html -> ~/.ssh/authorized_keys`). So a file is never opened for writing by its
name: the data goes to a new file in the same folder, created with O_EXCL (which
follows no link) under a random name, and is then renamed over the name. A rename
replaces a symlink itself, never its target. Readers never see half a file either.

Standard library only: a foundation module, below every package.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def _read_umask() -> int:
    # The umask can only be read by setting it: done once, at import, not per write (the
    # umask is the process's, and another thread may be creating files meanwhile).
    current = os.umask(0o022)
    os.umask(current)
    return current


_UMASK = _read_umask()


def write_bytes(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Write `data` to `path` atomically, through a new file renamed into place."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(tmp, mode & ~_UMASK)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: Path, text: str, mode: int = 0o644) -> None:
    """Write UTF-8 `text` to `path` atomically (see `write_bytes`)."""
    write_bytes(path, text.encode("utf-8"), mode)


def write_json(path: Path, data: Any, *, indent: int | None = 2) -> None:
    """Write `data` as JSON to `path` atomically (see `write_bytes`)."""
    write_text(path, json.dumps(data, indent=indent) + "\n")


def open_stream(path: Path, *, append: bool = False) -> int:
    """A file descriptor to write a stream (a log, a record of events) to `path`, which is
    never a link followed: O_NOFOLLOW refuses a symlink at the name (ELOOP, an OSError
    like any other failure to open). Truncated unless `append`; created 0644 (umask)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    flags |= os.O_APPEND if append else os.O_TRUNC
    return os.open(path, flags, 0o644)
