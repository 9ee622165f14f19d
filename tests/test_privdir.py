"""Private directories: a directory another user could have prepared is refused, never used."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from roboscale.errors import UserError
from roboscale.lab.nodes import package_path
from roboscale.privdir import private_dir, private_subdir, runtime_dir
from roboscale.runtime.statusfile import run_dir

NOBODY = 65534


@pytest.fixture
def fallback_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Make `<tmp>/roboscale-<uid>` the runtime directory, with <tmp> a fresh sticky dir."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    return tmp / f"roboscale-{os.getuid()}"


def other_owner(path: Path) -> None:
    path.mkdir()
    os.chown(path, NOBODY, NOBODY)


def world_writable(path: Path) -> None:
    path.mkdir()
    path.chmod(0o777)


def symlink_elsewhere(path: Path) -> None:
    target = path.parent / "elsewhere"
    target.mkdir(mode=0o700)
    path.symlink_to(target)


HOSTILE: dict[str, tuple[Callable[[Path], None], str]] = {
    "other owner": (other_owner, f"owned by uid {NOBODY}, not by you"),
    "mode 0777": (world_writable, r"others can write to it \(mode 0777\)"),
    "symlink": (symlink_elsewhere, "it is a symlink to"),
}


def test_a_new_private_directory_is_0700_and_ours(fallback_tmp: Path) -> None:
    assert runtime_dir() == fallback_tmp
    st = os.lstat(fallback_tmp)
    assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.getuid()
    assert private_subdir("a", "b") == fallback_tmp / "a" / "b"
    assert stat.S_IMODE(os.lstat(fallback_tmp / "a" / "b").st_mode) == 0o700
    assert runtime_dir() == fallback_tmp  # found again: accepted


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_prepared_runtime_directory_is_refused_and_never_used(
    root: None, fallback_tmp: Path, kind: str
) -> None:
    prepare, problem = HOSTILE[kind]
    prepare(fallback_tmp)
    before = sorted(p.name for p in fallback_tmp.iterdir())
    for use in (runtime_dir, package_path, run_dir):
        with pytest.raises(UserError, match=f"refusing to use it.*{problem}") as err:
            use()
        assert str(fallback_tmp) in str(err.value) and "hint:" in str(err.value)
    assert sorted(p.name for p in fallback_tmp.iterdir()) == before  # nothing written


def test_a_hostile_xdg_runtime_dir_is_refused(
    root: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    xdg = tmp_path / "xdg"
    other_owner(xdg)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(xdg))
    with pytest.raises(UserError, match=f"{xdg}: refusing to use it"):
        runtime_dir()
    assert not (xdg / "roboscale").exists()
    monkeypatch.setenv("XDG_RUNTIME_DIR", "relative/dir")
    with pytest.raises(UserError, match="not an absolute path"):
        runtime_dir()


def test_a_parent_others_can_write_without_sticky_bit_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UserError, match="writable by others only with the sticky bit"):
        private_dir(shared / "mine")
    assert not (shared / "mine").exists()


def test_the_agents_package_link_lives_in_the_private_directory(fallback_tmp: Path) -> None:
    root = package_path()
    assert root.parent == fallback_tmp
    link = root / "roboscale"
    assert link.is_symlink() and (link / "privdir.py").is_file()
    assert package_path() == root  # reused, not made again
