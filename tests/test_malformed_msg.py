"""Malformed and hostile message definitions and bags: `.msg` files, ROS 1 bags and
rosbag2 folders (sqlite3, MCAP) built here with rosbags' and mcap's writers.

First the attack that matters most: a definition that would run code in ros1 agents
(genpy writes definitions into Python source and imports it). Every variant is refused
by the real command with exit 2, an `error:` naming the file (or the bag and its
connection), the line and the field, before any agent starts; the payload would create
a marker file, which never exists. Then the bad inputs of issue 22 (each refused
cleanly, or, for the two legitimate files, accepted), bags recorded the ways rosbag2
records them, and property-based tests of the .msg checker and the bag reader.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict
from pathlib import Path

import pytest
from tests.conftest import REPO, require_module
from tests.test_malformed import check, run

require_module("rosbags", "the data extra")

from rosbags.rosbag1 import Writer as Writer1  # noqa: E402
from rosbags.rosbag2 import StoragePlugin  # noqa: E402
from rosbags.rosbag2 import Writer as Writer2  # noqa: E402

from roboscale import msgtypes  # noqa: E402
from roboscale.backends import ros1def  # noqa: E402
from roboscale.errors import UserError  # noqa: E402

E5 = REPO / "experiments" / "thesis-e5.yaml"
RIHS = "RIHS01_" + "0" * 64
CODE = "__import__('os').system('touch {marker}')"
# Definitions that try to leave data and become code in genpy ({code} creates the marker),
# each with the field the refusal names (and, for .msg files, its line).
ESCAPES = {  # variant: (definition, the field a bag's refusal names, the .msg file's line)
    "multi-line quoted string": ('string A="x\nint32 {code};X=1\n"\nint32 data\n', "A", 2),
    "quoted string over valid lines": ('string A="x\nstring Z=q"\nint32 data\n', "A", 1),
    "form feed": ("string S=a\x0cint32 {code};X=1\nint32 data\n", "S", 1),
    "line separator U+2028": ("int32 data\nstring S=a\u2028int32 {code};X=1\n", "S", 2),
    "next line U+0085": ("int32 data\nstring S=a\x85int32 {code};X=1\n", "S", 2),
    "carriage return alone": ("string S=a\rint32 {code};X=1\nint32 data\n", "S", 1),
    "vertical tab": ("string S=a\x0bint32 {code};X=1\nint32 data\n", "S", 1),
    "file separator": ("string S=a\x1cint32 {code};X=1\nint32 data\n", "S", 1),
    "numeric constant named with code": ("int32 {code};X=1\nint32 data\n", "", 1),
    "string constant named with code": ("string {code};X=1\nint32 data\n", "", 1),
    "bell in a string constant": ("int32 data\nstring S=a\x07b\n", "S", 2),
    "constant named with a keyword": ("int32 data\nint32 class=1\n", "class", 2),
    "string ending in a backslash": ("int32 data\nstring S=x\\\n", "S", 2),
}
# What a .msg file's refusal says for the line breaks (they are refused on reading).
BREAKS = {
    "form feed": "U+000C",
    "line separator U+2028": "U+2028",
    "next line U+0085": "U+0085",
    "carriage return alone": "U+000D",
    "vertical tab": "U+000B",
    "file separator": "U+001C",
}


def escape(variant: str, marker: Path) -> str:
    return ESCAPES[variant][0].replace("{code}", CODE.format(marker=marker))


def write_msg(root: Path, name: str, text: str) -> Path:
    """`name` is package/Type: the file goes to root/package/msg/Type.msg, byte for byte."""
    package, typ = name.split("/")
    path = root / package / "msg" / f"{typ}.msg"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode())
    return path


def msg_spec(tmp: Path, payload: str = "evil_msgs/Evil", types: str = "msgs") -> Path:
    spec = tmp / "s.yaml"
    spec.write_text(
        f"name: evil\nsweep:\n  backend: ros1\n  rate_hz: 10\n  payload: {payload}\n"
        f"trial:\n  messages: 5\nmessage_types: {types}\n"
    )
    return spec


def replay_spec(tmp: Path, bag: Path) -> Path:
    spec = tmp / "e5.yaml"
    spec.write_text(E5.read_text().replace("replay: stata", f"replay: {bag}"))
    return spec


def evil_bag(path: Path, fmt: str, definition: str, msgtype: str = "evil_msgs/msg/Evil") -> Path:
    """A bag whose one connection carries `definition`, with one message (an int32)."""
    if fmt == "ros1":
        with Writer1(path) as w1:
            conn = w1.add_connection("/evil", msgtype, msgdef=definition, md5sum="0" * 32)
            w1.write(conn, 1_000, b"\1\0\0\0")
        return path
    plugin = StoragePlugin.SQLITE3 if fmt == "sqlite3" else StoragePlugin.MCAP
    with Writer2(path, version=9, storage_plugin=plugin) as w2:
        conn = w2.add_connection("/evil", msgtype, msgdef=definition, rihs01=RIHS)
        w2.write(conn, 1_000, b"\0\1\0\0\1\0\0\0")
    return path


def refused_before_anything_runs(argv: list[str], tmp: Path, marker: Path, *named: str) -> None:
    check(argv, *named)
    assert not marker.exists(), "the definition ran code"
    assert not (tmp / "out").exists(), "a trial started"


# -- 1. no message definition becomes code ---------------------------------------------------


@pytest.mark.parametrize("variant", list(ESCAPES))
def test_a_msg_file_that_escapes_into_genpy_is_refused(tmp_path: Path, variant: str) -> None:
    marker = tmp_path / "ran"
    path = write_msg(tmp_path / "msgs", "evil_msgs/Evil", escape(variant, marker))
    _, field, line = ESCAPES[variant]
    named = [f"{path}:{line}", BREAKS[variant]] if variant in BREAKS else [f"{path}:{line}"]
    if field and variant not in BREAKS and variant != "multi-line quoted string":
        named.append(f"{field}:")  # (that one is refused on line 2, which names its code)
    argv = ["bench", str(msg_spec(tmp_path)), "--out", str(tmp_path / "out")]
    refused_before_anything_runs(argv, tmp_path, marker, "s.yaml", *named)


@pytest.mark.parametrize("fmt", ["ros1", "mcap", "sqlite3"])
@pytest.mark.parametrize("variant", list(ESCAPES))
def test_a_bag_definition_that_escapes_into_genpy_is_refused(
    tmp_path: Path, variant: str, fmt: str
) -> None:
    """The same definitions stored in a bag's connection record (no line check of the
    file applies there): refused naming the bag and its connection, or, when rosbags
    cannot parse the definition at all, the topic is skipped and nothing is left."""
    marker = tmp_path / "ran"
    bag = evil_bag(
        tmp_path / ("evil.bag" if fmt == "ros1" else "evil"), fmt, escape(variant, marker)
    )
    _, field, _ = ESCAPES[variant]
    try:
        from roboscale.bags import replay_info

        replay_info(str(bag))
        pytest.fail("the bag was accepted")
    except UserError as e:
        said = str(e)
    assert str(bag) in said and ("connection /evil" in said or "can be replayed" in said), said
    if "connection /evil" in said and field:
        assert f"{field}: " in said and "line " in said, said
    assert "\n" not in said, "a definition pasted into the error"
    argv = ["bench", str(replay_spec(tmp_path, bag)), "--quick", "--out", str(tmp_path / "out")]
    refused_before_anything_runs(argv, tmp_path, marker, "e5.yaml", str(bag))


def unchecked_ros1_text(definition: str) -> str:
    """What the ros1 agents were handed before: rosbags' ROS 1 text of a definition, as
    rosbags parsed it, with no check."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC)
    store.register(get_types_from_msg(definition, "evil_msgs/msg/Evil"))
    return str(store.generate_msgdef("evil_msgs/msg/Evil", ros_version=1)[0])


GENPY = (
    "import sys; sys.path.insert(0, sys.argv[1])\n"
    "from genpy.dynamic import generate_dynamic\n"
    "from roboscale.backends.ros1def import parse_full_text\n"
    "if sys.argv[3] == 'checked': parse_full_text('evil_msgs/Evil', sys.argv[2])\n"
    "generate_dynamic('evil_msgs/Evil', sys.argv[2])\n"
)


@pytest.mark.ros1
@pytest.mark.parametrize("variant", ["multi-line quoted string", "form feed"])
def test_the_attack_is_real_and_agents_refuse_it_too(
    tmp_path: Path, ros1: None, variant: str
) -> None:
    """The attack each check stops: genpy, given rosbags' text of the definition as it
    was handed on before, runs the payload (the marker appears); the agents' own check
    (backends/ros1def, before genpy) refuses the same text, and nothing runs."""
    from roboscale.lab.nodes import package_path

    marker = tmp_path / "ran"
    text = unchecked_ros1_text(escape(variant, marker))
    argv = ["/usr/bin/python3", "-c", GENPY, str(package_path()), text]
    checked = subprocess.run([*argv, "checked"], capture_output=True, text=True, check=False)
    assert checked.returncode != 0 and "DefinitionError" in checked.stderr
    assert not marker.exists()
    if variant == "multi-line quoted string":  # genpy runs it (form feed: genpy's own error)
        subprocess.run([*argv, "unchecked"], capture_output=True, check=False)
        assert marker.exists(), "the payload did not run unchecked: the test proves nothing"


def test_the_ros1_text_is_rechecked_against_rosbags_parse() -> None:
    """A text that parses but holds other constants than the definition is refused."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC)
    store.register(get_types_from_msg("int32 data\nint32 X=1\n", "evil_msgs/msg/Evil"))
    ros1def.check_text(store.fielddefs, "evil_msgs/msg/Evil", "int32 data\nint32 X=1\n")
    with pytest.raises(ros1def.DefinitionError, match="X"):
        ros1def.check_text(store.fielddefs, "evil_msgs/msg/Evil", "int32 data\nint32 X=2\n")
    with pytest.raises(ros1def.DefinitionError, match="other fields"):
        ros1def.check_text(
            store.fielddefs, "evil_msgs/msg/Evil", "int32 data\nint32 X=1\nint8 Y=2\n"
        )


@pytest.mark.ros1
def test_legitimate_quotes_and_backslashes_still_reach_genpy(tmp_path: Path, ros1: None) -> None:
    """Constants of every quoting case genpy has come out as the same strings."""
    from roboscale.lab.nodes import package_path

    values = ["plain", "it's", 'say "hi"', "both ' and \"", "a 'b' \"c\"", 'a\\"""b', "a=b#c"]
    text = "".join(f"string S{i}={v}\n" for i, v in enumerate(values)) + "int32 data\n"
    write_msg(tmp_path / "msgs", "good_msgs/Quotes", text)
    kind = msgtypes.message_kind((str(tmp_path / "msgs"),), "good_msgs/msg/Quotes")
    assert kind.typed is not None
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1])\n"
        "from roboscale.backends.base import MessageKind, TypedPayload\n"
        "from roboscale.backends.ros1 import build_message\n"
        "msg = build_message(MessageKind('custom', 0, TypedPayload(**json.loads(sys.argv[2]))))\n"
        f"print(json.dumps([getattr(type(msg.msg), f'S{{i}}') for i in range({len(values)})]))"
    )
    argv = ["/usr/bin/python3", "-c", code, str(package_path()), json.dumps(asdict(kind.typed))]
    res = subprocess.run(argv, capture_output=True, text=True, check=True)
    assert json.loads(res.stdout) == values


# -- 2. bad .msg files (issue 22): each refused with its file, line and field ---------------

BAD_MSGS = {  # name: ({type: text}, what the error holds; the first file is the one named)
    "recursive type": ({"p/A": "int32 x\np/A next\n"}, ["A.msg:2", "next:", "contains itself"]),
    "mutually recursive types": (
        {"p/B": "p/A[] a\n", "p/A": "p/B b\nint32 x\n"},
        ["msg:1", "contains itself", "p/msg/A -> p/msg/B -> p/msg/A"],
    ),
    "fixed array of 10^9": ({"p/A": "uint8[1000000000] data\n"}, ["A.msg:1", "data:", "at most"]),
    "nested fixed arrays": (
        {"p/A": "p/B[100000] b\n", "p/B": "float64[1000] x\n"},
        ["A.msg:1", "b:", "at most 16777216"],
    ),
    "field named with a keyword": ({"p/A": "int32 class\n"}, ["A.msg:1", "class:", "keyword"]),
    "uint8 constant of 300": ({"p/A": "uint8 X=300\n"}, ["A.msg:1", "X:", "from 0 to 255"]),
    "int8 constant of -129": ({"p/A": "int8 X=-129\n"}, ["A.msg:1", "X:", "from -128 to 127"]),
    "int64 constant of 2^63": ({"p/A": f"int64 X={2**63}\n"}, ["A.msg:1", "X:", "out of range"]),
    "uint64 constant of -1": ({"p/A": "uint64 X=-1\n"}, ["A.msg:1", "X:", "out of range"]),
    "float32 constant of 1e39": ({"p/A": "float32 X=1e39\n"}, ["A.msg:1", "X:", "float32"]),
    "float64 constant of nan": ({"p/A": "float64 X=nan\n"}, ["A.msg:1", "X:"]),
    "NUL byte": ({"p/A": "int32 x\nint32 y\0\n"}, ["A.msg:2", "NUL"]),
}


def msg_folder(tmp: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        write_msg(tmp / "msgs", name, text)
    return tmp / "msgs"


@pytest.mark.parametrize("case", list(BAD_MSGS))
def test_a_bad_msg_file_is_refused(tmp_path: Path, case: str) -> None:
    files, fragments = BAD_MSGS[case]
    msg_folder(tmp_path, files)
    spec = msg_spec(tmp_path, payload=f"{next(iter(files))}")
    check(["bench", str(spec), "--dry-run"], "s.yaml:8: message_types:", *fragments)


@pytest.mark.parametrize(
    ("case", "text"),
    [
        ("a comment holding =", "int32 data # data=speed, in m/s\n"),
        ("a string constant holding =", "string UNITS=m=metres\nint32 data\n"),
        ("Windows line ends", "int32 data\r\nstring UNITS=m\r\n"),
        ("an empty type", "# nothing\n"),
        ("a string default holding =", 'string name "a=b"\nstring other a=b\nint32 data\n'),
        ("constants written loosely", "bool B=1\nint32 X = +5\nfloat32 MAX=3.4028235e38\n"),
    ],
)
def test_a_legitimate_msg_file_is_accepted(tmp_path: Path, case: str, text: str) -> None:
    write_msg(tmp_path / "msgs", "p/A", text)
    code, err = run(["bench", str(msg_spec(tmp_path, payload="p/A")), "--dry-run"])
    assert code == 0, err


def special_msgs(tmp: Path, kind: str) -> Path:
    """A folder of .msg files holding a special one, or the special file itself."""
    folder = msg_folder(tmp, {"p/A": "int32 x\n"})
    special = folder / "p" / "msg" / "B.msg"
    if kind == "fifo":
        os.mkfifo(special)
    elif kind == "endless device":
        special.symlink_to("/dev/zero")
    elif kind == "link loop":
        special.symlink_to(special)
    elif kind == "30 MB":
        special.write_bytes(b"int32 x\n" + b"# " + b"x" * 30_000_000 + b"\n")
    return special


@pytest.mark.parametrize("given", ["folder", "file"])
@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("fifo", "is a FIFO"),
        ("endless device", "is a character device"),
        ("link loop", "symbolic links"),
        ("30 MB", "a .msg file is at most 262144 bytes"),
    ],
)
def test_a_special_msg_file_is_refused_without_hanging(
    tmp_path: Path, kind: str, expected: str, given: str
) -> None:
    special = special_msgs(tmp_path, kind)
    types = "msgs" if given == "folder" else str(special)
    spec = msg_spec(tmp_path, payload="p/A", types=types)
    check(["bench", str(spec), "--dry-run"], "message_types:", str(special), expected)


def test_message_types_slash_is_a_bounded_search(tmp_path: Path) -> None:
    """`message_types: /` would scan the whole disk: the search stops after a bound, saying
    where to point instead, never reporting an unrelated file of the disk."""
    spec = msg_spec(tmp_path, payload="p/A", types="/")
    check(["bench", str(spec), "--dry-run"], "message_types: /: more than", "package folder")


# -- 3. bad bags (issue 22) -----------------------------------------------------------------


def ros1_bag(path: Path, stamps: list[int]) -> Path:
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC)
    typ = "std_msgs/msg/Int32"
    with Writer1(path) as w1:
        conn = w1.add_connection("/count", typ, typestore=store)
        for k, stamp in enumerate(stamps):
            w1.write(conn, stamp, bytes(store.serialize_ros1(store.types[typ](data=k), typ)))
    return path


@pytest.mark.parametrize(
    ("kind", "expected"),
    [("fifo", "is a FIFO"), ("link loop", "symbolic links"), ("missing", "no such bag")],
)
def test_a_special_bag_is_refused_without_hanging(tmp_path: Path, kind: str, expected: str) -> None:
    bag = tmp_path / "x.bag"
    if kind == "fifo":
        os.mkfifo(bag)
    elif kind == "link loop":
        bag.symlink_to(bag)
    argv = ["bench", str(replay_spec(tmp_path, bag)), "--dry-run"]
    check(argv, "e5.yaml", "replay:", str(bag), expected)


@pytest.mark.parametrize(
    ("case", "stamps"),
    [
        ("one timestamp", [5_000_000] * 20),
        ("1 ns apart", [5_000_000 + k for k in range(20)]),
        ("a burst then a pause", [5_000_000 + k * 100 for k in range(19)] + [6_000_000]),
    ],
)
def test_a_burst_is_a_burst_not_a_gigahertz_trial(
    tmp_path: Path, case: str, stamps: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    from roboscale.bags import MIN_GAP_NS, replay_info

    bag = ros1_bag(tmp_path / "burst.bag", stamps)
    info = replay_info(str(bag))
    assert info.messages == 20 and 0 < info.rate_hz <= 1e9 / MIN_GAP_NS
    bursts = "a burst, sent back to back" in capsys.readouterr().err
    assert bursts == (case != "a burst then a pause")  # that one averages 19 kHz: recorded
    code, err = run(["bench", str(replay_spec(tmp_path, bag)), "--dry-run"])
    assert code == 0, err


def test_a_bag_whose_only_definition_does_not_parse_says_so_in_one_line(tmp_path: Path) -> None:
    bag = evil_bag(tmp_path / "x.bag", "ros1", "int32 data\nthis is\nnot a\ndefinition\n")
    check(["bench", str(replay_spec(tmp_path, bag)), "--dry-run"], "no topic of the bag")
    _, err = run(["bench", str(replay_spec(tmp_path, bag)), "--dry-run"])
    assert "not a\ndefinition" not in err and len(err.strip().splitlines()) <= 3, err


def test_a_trial_line_holds_no_none() -> None:
    """A replay of a bag of one message per topic sends once: no achieved rate, no RTT
    percentile; the trial line says `-`, never None or a traceback."""
    import io

    from rich.console import Console

    from roboscale.lab.runner import _log_trial
    from roboscale.records.models import Distribution, EchoEntry

    out = io.StringIO()
    # Only the fields the trial line reads: built without the rest of a full entry.
    nothing = Distribution.model_construct(p50=None, p99=None)
    entry = EchoEntry.model_construct(
        trial="t0000", workload="echo", sustained=False, received=1, sent=1,
        achieved_rate_hz=None, rtt_us=nothing, burst=False,
    )  # fmt: skip
    _log_trial(Console(file=out, width=200), entry)
    assert "1/1 back, - Hz achieved, RTT p50 - µs p99 - µs" in out.getvalue()


@pytest.mark.parametrize(
    ("topic", "msgtype"),
    [("/bad\nname", "std_msgs/msg/Int32"), ("/ok", "evil_msgs/msg/X\nint32 y"),
     ("no/leading", "std_msgs/msg/Int32"), ("/x", "evil_msgs/msg/X;import os")],
)  # fmt: skip
def test_odd_names_in_a_bag_are_skipped_in_one_line(
    tmp_path: Path, topic: str, msgtype: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from roboscale.bags import replay_info

    odd = tmp_path / "odd.bag"
    with Writer1(odd) as w1:  # the good topic, then the odd one
        good = w1.add_connection(
            "/count", "std_msgs/msg/Int32", msgdef="int32 data\n", md5sum="0" * 32
        )
        bad = w1.add_connection(topic, msgtype, msgdef="int32 data\n", md5sum="0" * 32)
        w1.write(good, 1_000, b"\1\0\0\0")
        w1.write(bad, 2_000, b"\1\0\0\0")
    info = replay_info(str(odd))
    assert [t.name for t in info.topics] == ["/count"]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "skipped" in err, err


def test_a_type_name_ending_in_a_newline_is_refused(tmp_path: Path) -> None:
    """The file name gives the type's name, which genpy writes into source: in full."""
    folder = msg_folder(tmp_path, {"p/A": "int32 x\n"})
    (folder / "p" / "msg" / "B\n.msg").write_text("int32 y\n")
    spec = msg_spec(tmp_path, payload="p/A")
    check(["bench", str(spec), "--dry-run"], "message_types:", "cannot tell the message type")


def test_an_mcap_file_without_its_rosbag2_folder_is_named(tmp_path: Path) -> None:
    bag = evil_bag(tmp_path / "rec", "mcap", "int32 data\n")
    alone = tmp_path / "alone.mcap"
    (bag / "rec.mcap").rename(alone)
    check(["bench", str(replay_spec(tmp_path, alone)), "--dry-run"], str(alone), "metadata.yaml")


@pytest.mark.parametrize("where", ["msg", "ros1", "mcap"])
def test_types_nested_a_thousand_deep_are_refused(tmp_path: Path, where: str) -> None:
    """A chain of types, each holding the next: refused at a bound, never a recursion
    error (the checker, rosbags and genpy all recurse over nesting)."""
    depth = 999
    if where == "msg":
        for i in range(depth):
            write_msg(
                tmp_path / "msgs", f"p/T{i}", f"p/T{i + 1} next\n" if i < depth - 1 else "int32 x\n"
            )
        check(
            ["bench", str(msg_spec(tmp_path, payload="p/T0")), "--dry-run"], "nested more than 64"
        )
        return
    blocks = "".join(
        f"{'=' * 80}\nMSG: p/T{i}\n" + (f"p/T{i + 1} next\n" if i < depth else "int32 x\n")
        for i in range(1, depth + 1)
    )
    bag = evil_bag(tmp_path / ("deep.bag" if where == "ros1" else "deep"), where,
                   "p/T1 next\nint32 data\n" + blocks, "p/msg/T0")  # fmt: skip
    check(["bench", str(replay_spec(tmp_path, bag)), "--dry-run"], "connection /evil", "nested")


def test_definitions_are_bounded_in_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """rosbags parses about 100 KB/s of fields: a bag's definition beyond 256 KiB is
    skipped, .msg files beyond 4 MiB in all are refused, before any parsing."""
    from roboscale.bags import replay_info

    fields = "".join(f"int32 f{i}\n" for i in range(30_000))  # 330 KB
    bag = evil_bag(tmp_path / "big.bag", "ros1", "int32 data\n" + fields)
    with pytest.raises(UserError, match="no topic of the bag can be replayed"):
        replay_info(str(bag))
    assert "a definition of" in capsys.readouterr().err
    for i in range(17):
        write_msg(tmp_path / "msgs", f"p/T{i}", "int32 x\n# " + "x" * 250_000 + "\n")
    spec = msg_spec(tmp_path, payload="p/T0")
    check(["bench", str(spec), "--dry-run"], "message_types:", "more than 4194304 bytes in all")
