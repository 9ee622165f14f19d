"""The writers follow no link: a planted symlink is replaced, its target untouched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from roboscale import safewrite


def test_symlink_at_the_name_is_replaced_not_followed(tmp_path: Path) -> None:
    victim = tmp_path / "authorized_keys"
    victim.write_text("ssh-ed25519 AAAA owner\n")
    folder = tmp_path / "received"
    folder.mkdir()
    (folder / "report.html").symlink_to(victim)
    safewrite.write_text(folder / "report.html", "<html>attacker's key</html>")
    assert victim.read_text() == "ssh-ed25519 AAAA owner\n"
    assert not (folder / "report.html").is_symlink()
    assert (folder / "report.html").read_text() == "<html>attacker's key</html>"


def test_a_planted_part_file_is_not_followed(tmp_path: Path) -> None:
    # The old writers used a fixed "<name>.part": a link planted there was followed.
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (tmp_path / "summary.json.part").symlink_to(victim)
    safewrite.write_json(tmp_path / "summary.json", {"a": 1})
    assert victim.read_text() == "keep"
    assert json.loads((tmp_path / "summary.json").read_text()) == {"a": 1}


def test_no_temporary_file_is_left_on_failure(tmp_path: Path) -> None:
    (tmp_path / "x.json").mkdir()  # the rename fails after the data is written
    with pytest.raises(OSError):
        safewrite.write_text(tmp_path / "x.json", "data")
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


def test_mode_follows_the_umask(tmp_path: Path) -> None:
    safewrite.write_text(tmp_path / "f", "x", mode=0o600)
    assert (tmp_path / "f").stat().st_mode & 0o777 == 0o600
