"""Bags recorded the ways rosbag2 records them, built here with rosbags' and mcap's writers
(rosbag2's own test bags cannot be downloaded): metadata.yaml version 9, sqlite3 and MCAP
storage, `serialization_format: cdr`, `offered_qos_profiles`, `type_description_hash`;
with and without stored definitions, split over several files, with service-event
channels, a topic of a type nobody defines, and an MCAP whose chunks carry no message
index (rosbags' reader yields none of its messages; the mcap library reads them all).
What can be replayed is replayed; what cannot is skipped with one line."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests.conftest import require_module

require_module("rosbags", "the data extra")

from rosbags.rosbag2 import StoragePlugin  # noqa: E402
from rosbags.rosbag2 import Writer as Writer2  # noqa: E402
from rosbags.typesys import Stores, get_typestore  # noqa: E402

from roboscale.bags import replay_info, replay_kinds  # noqa: E402
from roboscale.errors import UserError  # noqa: E402

STORE = get_typestore(Stores.LATEST)
RIHS = "RIHS01_" + "0" * 64
START = 1_700_000_000_000_000_000
GAP = 10_000_000  # 100 Hz per topic
EVENT_DEF = (  # a service event as rosbag2 (Jazzy) stores it: rosbags cannot parse this one
    "service_msgs/ServiceEventInfo info\nAddTwoInts_Request[<=1] request\n"
    "AddTwoInts_Response[<=1] response\n"
)
PLUGINS = {"sqlite3": StoragePlugin.SQLITE3, "mcap": StoragePlugin.MCAP}
SUFFIX = {"sqlite3": ".db3", "mcap": ".mcap"}


def int32(value: int) -> bytes:
    typ = "std_msgs/msg/Int32"
    return bytes(STORE.serialize_cdr(STORE.types[typ](data=value), typ))


def string(value: str) -> bytes:
    typ = "std_msgs/msg/String"
    return bytes(STORE.serialize_cdr(STORE.types[typ](data=value), typ))


def record(
    path: Path, storage: str, *, definitions: bool = True, events: bool = False,
    unknown: bool = False, first: int = 0, count: int = 5,
) -> Path:  # fmt: skip
    """One rosbag2 folder: /count (Int32) and /chatter (String), `count` messages each,
    100 Hz; optionally a service's event channel with messages, and an idle topic of a
    type no store knows. Without definitions, the schemas are stored empty, as rosbag2
    before Iron did."""
    defs: dict[str, Any] = {} if definitions else {"msgdef": "", "rihs01": RIHS}
    with Writer2(path, version=9, storage_plugin=PLUGINS[storage]) as w:
        kw = defs or {"typestore": STORE}
        count_c = w.add_connection("/count", "std_msgs/msg/Int32", **kw)
        chatter = w.add_connection("/chatter", "std_msgs/msg/String", **kw)
        event = None
        if events:
            event = w.add_connection(
                "/add_two_ints/_service_event", "example_interfaces/srv/AddTwoInts_Event",
                msgdef=EVENT_DEF, rihs01=RIHS,
            )  # fmt: skip
        if unknown:
            w.add_connection("/idle", "vendor_msgs/msg/Secret", msgdef="", rihs01=RIHS)
        for i in range(first, first + count):
            stamp = START + i * GAP
            w.write(count_c, stamp, int32(i))
            w.write(chatter, stamp + 1_000, string(f"hello {i}"))
            if event is not None:
                w.write(event, stamp + 2_000, b"\0\1\0\0" + bytes(24))
    return path


def split(path: Path, storage: str, parts: int = 3, **kw: Any) -> Path:
    """A recording split over `parts` files (`<name>_0.db3`, ...: `ros2 bag record
    --max-bag-size`), with one metadata.yaml listing them all."""
    path.mkdir()
    metas = []
    for k in range(parts):
        part = path.parent / f"{path.name}.part{k}"
        record(part, storage, first=k * 5, **kw)
        (part / f"{part.name}{SUFFIX[storage]}").rename(path / f"{path.name}_{k}{SUFFIX[storage]}")
        metas.append(yaml.safe_load((part / "metadata.yaml").read_text()))
        shutil.rmtree(part)
    infos = [m["rosbag2_bagfile_information"] for m in metas]
    info = infos[0]
    names = [f"{path.name}_{k}{SUFFIX[storage]}" for k in range(parts)]
    info["relative_file_paths"] = names
    info["files"] = [{**i["files"][0], "path": n} for i, n in zip(infos, names, strict=True)]
    info["message_count"] = sum(i["message_count"] for i in infos)
    for j, topic in enumerate(info["topics_with_message_count"]):
        topic["message_count"] = sum(
            i["topics_with_message_count"][j]["message_count"] for i in infos
        )
    end = (
        infos[-1]["starting_time"]["nanoseconds_since_epoch"] + infos[-1]["duration"]["nanoseconds"]
    )
    info["duration"]["nanoseconds"] = end - info["starting_time"]["nanoseconds_since_epoch"]
    (path / "metadata.yaml").write_text(yaml.safe_dump(metas[0]))
    return path


def unindexed_mcap(path: Path) -> Path:
    """The recording with its MCAP rewritten with chunk indexes but no message indexes, as
    early rosbag2 MCAP writers wrote it: rosbags' reader yields no message of it."""
    from mcap.reader import make_reader
    from mcap.writer import IndexType, Writer

    record(path, "mcap")
    file = path / f"{path.name}.mcap"
    with file.open("rb") as f:
        messages = list(make_reader(f).iter_messages())
    with file.open("wb") as f:
        writer = Writer(f, index_types=IndexType.CHUNK)
        writer.start(profile="ros2", library="rosbag2 (2020)")
        schemas: dict[int, int] = {}
        channels: dict[int, int] = {}
        for schema, channel, message in messages:
            assert schema is not None
            if schema.id not in schemas:
                schemas[schema.id] = writer.register_schema(
                    schema.name, schema.encoding, schema.data
                )
            if channel.id not in channels:
                channels[channel.id] = writer.register_channel(
                    channel.topic, channel.message_encoding, schemas[schema.id], channel.metadata
                )
            writer.add_message(
                channels[channel.id], message.log_time, message.data, message.publish_time
            )
        writer.finish()
    return path


def test_the_unindexed_mcap_is_one_rosbags_reads_nothing_from(tmp_path: Path) -> None:
    from rosbags.rosbag2 import Reader

    with Reader(unindexed_mcap(tmp_path / "old")) as reader:
        assert sum(1 for _ in reader.messages()) == 0 and reader.message_count == 10


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
@pytest.mark.parametrize(
    ("layout", "messages"),
    [("definitions", 10), ("no definitions", 10), ("split", 30), ("split, no definitions", 30)],
)
def test_a_rosbag2_recording_replays(
    tmp_path: Path, storage: str, layout: str, messages: int
) -> None:
    definitions = "no definitions" not in layout
    bag = (
        split(tmp_path / "rec", storage, definitions=definitions)
        if layout.startswith("split")
        else record(tmp_path / "rec", storage, definitions=definitions)
    )
    info = replay_info(str(bag))
    assert [t.name for t in info.topics] == ["/chatter", "/count"]
    assert [t.msgtype for t in info.topics] == ["std_msgs/msg/String", "std_msgs/msg/Int32"]
    assert info.messages == messages and info.topic_messages == (messages // 2,) * 2
    last = (messages // 2 - 1) * GAP + 1_000  # one pass: to the last message, plus a mean gap
    assert info.rate_hz == pytest.approx(messages * 1e9 / (last + last // (messages - 1)))
    kinds = replay_kinds(str(bag))  # each topic's type, carried to every backend
    assert [k.typed.msgtype for k in kinds if k.typed] == [t.msgtype for t in info.topics]


@pytest.mark.parametrize("storage", ["sqlite3", "mcap"])
def test_service_events_and_undefined_types_are_skipped_with_one_line(
    tmp_path: Path, storage: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bag = record(tmp_path / "svc", storage, events=True, unknown=True)
    info = replay_info(str(bag))
    assert [t.name for t in info.topics] == ["/chatter", "/count"] and info.messages == 10
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if "/add_two_ints/_service_event skipped" in line] == [
        f"roboscale: {bag}: topic /add_two_ints/_service_event skipped: a service's events, "
        "not a topic's messages"
    ]
    assert any("topic /idle skipped: type vendor_msgs/msg/Secret has no definition" in line
               for line in err)  # fmt: skip
    assert len(err) == 2 and "service_msgs" not in " ".join(err)  # no definition pasted


def test_an_mcap_rosbags_reads_nothing_from_is_read_with_the_mcap_library(tmp_path: Path) -> None:
    bag = unindexed_mcap(tmp_path / "old")
    info = replay_info(str(bag))
    assert info.messages == 10 and info.topic_messages == (5, 5)


def test_an_mcap_nobody_reads_says_so(tmp_path: Path) -> None:
    bag = unindexed_mcap(tmp_path / "old")
    file = bag / "old.mcap"
    data = file.read_bytes()
    file.write_bytes(data[:8] + bytes(len(data) - 16) + data[-8:])  # records zeroed
    with pytest.raises(UserError) as e:
        replay_info(str(bag))
    assert str(bag) in str(e.value) and "\n" not in str(e.value)


def test_a_rosbag2_replays_end_to_end_on_native(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The real command: a split MCAP recording with service events and an idle topic of
    an unknown type replays its two topics; trial lines hold figures, never None."""
    from roboscale.cli import main
    from roboscale.results import load

    split(tmp_path / "rec", "mcap", events=True, unknown=True)
    spec = tmp_path / "e5.yaml"
    e5 = (Path(__file__).parents[1] / "experiments" / "thesis-e5.yaml").read_text()
    spec.write_text(e5.replace("replay: stata", "replay: rec"))
    out = tmp_path / "out"
    with pytest.raises(SystemExit) as done:
        main(["bench", str(spec), "--quick", "--backend", "native", "--out", str(out)])
    captured = capsys.readouterr()
    assert done.value.code in (0, None), captured.err
    assert "None" not in captured.out and "Traceback" not in captured.err
    entries = [e.to_dict() for e in load(out).entries]
    assert all(e["received"] == e["sent"] > 0 for e in entries)
    assert all(e["stream_topics"] == ["/chatter", "/count"] for e in entries)
