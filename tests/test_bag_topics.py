"""Choosing a bag's topics (`replay_topics`), on rosbag2 folders built here with rosbags'
writers (`tests/test_bags_rosbag2.record`): the chosen topics are replayed, the others
skipped with one line each; a name the bag does not have, an empty list, a name that is
not a topic name in full and a name given twice are refused by the real command with
exit 2, the spec's file, line and field, and no traceback. Then bursts: a recording
faster than the burst bound is planned, named and reported as a burst, never as a trial
at the bound's nominal rate."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from tests.conftest import require_module
from tests.test_malformed import check, run

require_module("rosbags", "the data extra")

from tests.test_bags_rosbag2 import RIHS, STORE, int32, record  # noqa: E402
from tests.test_malformed_msg import ros1_bag  # noqa: E402

from roboscale.bags import replay_info  # noqa: E402


def topics_spec(tmp: Path, topics: str, replay: str = "rec") -> Path:
    """A replay spec whose `replay_topics` list starts on line 3 (its items on 4, 5...)."""
    spec = tmp / "s.yaml"
    spec.write_text(
        f"name: topics\nreplay: {replay}\nreplay_topics:{topics}\nsweep:\n  backend: native\n"
        "  pairs: 1\ntrial:\n  runs: 1\n  messages: 5\n  warmup: 0\n  drain_s: 1\n"
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
    entries = [e.to_dict() for e in load(out).entries]
    assert [e["stream_topics"] for e in entries] == [["/chatter"]]
    assert all(e["received"] == e["sent"] > 0 for e in entries)


def burst_spec(tmp: Path, stamps: list[int]) -> Path:
    """A replay of a ROS 1 bag of /count messages at `stamps`, swept over two factors."""
    ros1_bag(tmp / "b.bag", stamps)
    spec = tmp / "b.yaml"
    spec.write_text(
        "name: burst\nreplay: b.bag\nsweep:\n  backend: native\n  rate_factor: [1, 2]\n"
        "  pairs: 1\ntrial:\n  runs: 1\n  warmup: 0\n  drain_s: 1\n"
    )
    return spec


def test_a_burst_is_planned_as_one_trial_named_burst(tmp_path: Path) -> None:
    """1 ns apart: one trial (the factors change nothing when sent back to back), its name
    says burst and claims no rate; a recording at 100 Hz keeps its rates in its names."""
    code, _ = run(["bench", str(burst_spec(tmp_path, [5_000 + k for k in range(20)])),
                   "--dry-run"])  # fmt: skip
    assert code == 0
    plan = [t.trial for t in _planned(tmp_path / "b.yaml")]
    assert plan == ["t0000-native-burst-b-p1-r0"]
    paced = tmp_path / "paced"
    paced.mkdir()
    spec = burst_spec(paced, [5_000 + k * 10_000_000 for k in range(20)])
    assert [t.trial for t in _planned(spec)] == [
        "t0000-native-100hz-b-p1-r0", "t0001-native-200hz-b-p1-r0"
    ]  # fmt: skip


def _planned(spec: Path) -> list[Any]:
    from roboscale.spec.loader import load_spec
    from roboscale.spec.planner import plan

    return plan(load_spec(spec))


def test_a_burst_replays_and_its_trial_line_claims_no_rate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real command on native: every message arrives; the trial line says burst and
    gives no rate; the verdict does not hold a burst to the bound's nominal rate."""
    from roboscale.cli import main
    from roboscale.results import load

    spec = burst_spec(tmp_path, [5_000_000] * 20)
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as done:
        main(["bench", str(spec), "--out", str(out)])
    captured = capsys.readouterr()
    assert done.value.code in (0, None), captured.err
    assert "Traceback" not in captured.err and "None" not in captured.out
    lines = [line for line in captured.out.splitlines() if "t0000-" in line and "/20" in line]
    assert len(lines) == 1 and "a burst, sent back to back" in lines[0], captured.out
    assert "Hz" not in lines[0] and "hz" not in lines[0]
    entries = [e.to_dict() for e in load(out).entries]
    assert len(entries) == 1 and entries[0]["burst"] is True
    assert entries[0]["received"] == entries[0]["sent"] == 20
    assert entries[0]["sustained"] is True
    summary = (out / "summary.md").read_text()
    row = next(line for line in summary.splitlines() if line.startswith("| t0000-"))
    assert "| burst |" in row and "100000" not in row, row
    # No rate is claimed anywhere on the page (plotly.js itself holds the digits 100000).
    assert not re.search(r"100000 ?[Hh]z", (out / "report.html").read_text())


def test_a_topic_left_out_is_never_parsed(tmp_path: Path) -> None:
    """A bag whose /evil connection holds a definition that is refused (a fixed array of
    10^9 elements) is refused whole; choosing /count replays /count, and the left-out
    definition is never parsed nor handed on."""
    from rosbags.rosbag2 import StoragePlugin
    from rosbags.rosbag2 import Writer as Writer2

    from roboscale.errors import UserError

    bag = tmp_path / "mixed"
    with Writer2(bag, version=9, storage_plugin=StoragePlugin.SQLITE3) as w:
        evil = w.add_connection(
            "/evil", "evil_msgs/msg/Evil", msgdef="int32[1000000000] data\n", rihs01=RIHS
        )
        count = w.add_connection("/count", "std_msgs/msg/Int32", typestore=STORE)
        for i in range(5):
            w.write(evil, 1_000 + i * 10_000_000, b"\0\1\0\0\1\0\0\0")
            w.write(count, 2_000 + i * 10_000_000, int32(i))
    with pytest.raises(UserError, match="data"):
        replay_info(str(bag))
    info = replay_info(str(bag), ("/count",))
    assert [t.name for t in info.topics] == ["/count"] and info.messages == 5
