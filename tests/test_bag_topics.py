"""Choosing a bag's topics (`replay_topics`), on rosbag2 folders built here with rosbags'
writers (`tests/test_bags_rosbag2.record`): the chosen topics are replayed, the others
skipped with one line each; a name the bag does not have, an empty list, a name that is
not a topic name in full and a name given twice are refused by the real command with
exit 2, the spec's file, line and field, and no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.conftest import require_module
from tests.test_malformed import check, run

require_module("rosbags", "the data extra")

from tests.test_bags_rosbag2 import record  # noqa: E402

from roboscale.bags import replay_info  # noqa: E402


def topics_spec(tmp: Path, topics: str, replay: str = "rec") -> Path:
    """A replay spec whose `replay_topics` list starts on line 3 (its items on 4, 5...)."""
    spec = tmp / "s.yaml"
    spec.write_text(
        f"name: topics\nreplay: {replay}\nreplay_topics:{topics}\nsweep:\n  backend: native\n"
        "  pairs: 1\ntrial:\n  messages: 5\n  warmup: 0\n  drain_s: 1\n"
    )
    return spec


def test_only_the_chosen_topics_are_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bag = record(tmp_path / "rec", "sqlite3", events=True, count=5)
    info = replay_info(str(bag), ("/count",))
    assert [t.name for t in info.topics] == ["/count"] and info.messages == 5
    err = capsys.readouterr().err.splitlines()
    assert f"roboscale: {bag}: topic /chatter skipped: not among replay_topics" in err
    assert len([line for line in err if "/chatter" in line]) == 1
    assert [t.name for t in replay_info(str(bag)).topics] == ["/chatter", "/count"]


@pytest.mark.parametrize(
    ("items", "line", "field", "said"),
    [
        ("\n  - /count\n  - /cout", 5, "replay_topics[1]",
         "the bag has no topic '/cout'; did you mean '/count'? its topics: "),
        (" [/chatter/extra]", 3, "replay_topics[0]", "the bag has no topic '/chatter/extra'"),
        ("\n  - \"/count\\n\"", 4, "replay_topics[0]", "'/count\\n' is not a topic name"),
        ("\n  - \"/count \"", 4, "replay_topics[0]", "'/count ' is not a topic name"),
        ("\n  - /count\n  - /count", 5, "replay_topics[1]", "/count is named twice"),
        (" []", 3, "replay_topics", "List should have at least 1 item"),
        (" /count", 3, "replay_topics", "Input should be a valid list"),
    ],
    ids=["unknown", "unknown, no near name", "trailing newline", "trailing space", "twice",
         "empty", "not a list"],
)  # fmt: skip
def test_a_bad_choice_of_topics_is_a_spec_error(
    tmp_path: Path, items: str, line: int, field: str, said: str
) -> None:
    record(tmp_path / "rec", "mcap", events=True)
    spec = topics_spec(tmp_path, items)
    check(["bench", str(spec), "--dry-run"], f"{spec}:{line}: {field}: {said}")


def test_topics_of_the_generated_streams_are_refused(tmp_path: Path) -> None:
    spec = topics_spec(tmp_path, " [/base_scan]", replay="stata")
    check(["bench", str(spec), "--dry-run"], f"{spec}:3: replay_topics:", "replay a bag")


def test_a_choice_of_topics_replays_end_to_end_on_native(tmp_path: Path) -> None:
    """The real command: the chosen topic alone is sent and arrives."""
    from roboscale.results import load

    record(tmp_path / "rec", "mcap", events=True)
    spec = topics_spec(tmp_path, "\n  - /chatter")
    out = tmp_path / "out"
    code, err = run(["bench", str(spec), "--out", str(out)])
    assert code == 0, err
    entries = load(out).entries
    assert [e["stream_topics"] for e in entries] == [["/chatter"]]
    assert all(e["received"] == e["sent"] > 0 for e in entries)
