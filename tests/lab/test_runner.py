"""What the runner keeps with every trial to reproduce it: the replayed data's hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

from roboscale.lab.runner import replayed_data


def test_replayed_files_and_folders_are_hashed_by_content(tmp_path: Path) -> None:
    bag = tmp_path / "run.mcap"
    bag.write_bytes(b"abc" * 1000)
    one = replayed_data(str(bag))
    assert one.sha256 == hashlib.sha256(b"abc" * 1000).hexdigest() and one.bytes == 3000
    folder = tmp_path / "rosbag2"
    folder.mkdir()
    (folder / "metadata.yaml").write_text("a")
    (folder / "run_0.db3").write_bytes(b"b")
    whole = replayed_data(str(folder))
    assert whole.sha256 == hashlib.sha256(b"ab").hexdigest() and whole.bytes == 2
    (folder / "run_0.db3").write_bytes(b"c")  # new content, a new hash
    assert replayed_data(str(folder)).sha256 == hashlib.sha256(b"ac").hexdigest()


def test_generated_replay_is_named_as_such() -> None:
    assert replayed_data("stata").sha256 == "generated"
