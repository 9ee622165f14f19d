"""backends/ros1def: the ROS 1 text genpy is given, parsed as genpy parses it.

Differential tests against the real genpy (Debian's python3-genpy): for generated texts
with every kind of line break, quote, backslash, comment and name, whatever ros1def
accepts, genpy builds into a class holding exactly the constants and fields ros1def
read, and running genpy's generated module creates no marker file."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from roboscale.backends import ros1def

GENPY = r"""
import json, sys
from genpy.dynamic import generate_dynamic
out = []
for text in json.loads(sys.stdin.read()):
    try:
        cls = generate_dynamic("fuzz_msgs/Fuzz", text)["fuzz_msgs/Fuzz"]
    except BaseException as e:
        out.append(["error", type(e).__name__])
        continue
    consts = {k: v for k, v in vars(cls).items()
              if not k.startswith("_") and type(v) in (int, float, str, bool)}
    out.append(["ok", list(cls.__slots__), list(cls._slot_types), sorted(consts.items())])
print(json.dumps(out))
"""
PIECES = [
    "int32", "string", "float64", "bool", "uint8", "int8[]", "float32[3]", "time", " ", "  ",
    "=", "#", "'", '"', '"""', "\\", "\t", "\x0c", "\r", "\x85", "\u2028", "x", "A", "data",
    "1", "-1", "1e3", "nan", "True", "class", ";", "(", ")", "__import__('os')", "é",
]  # fmt: skip
NAMES = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,5}", fullmatch=True)
VALUES = st.one_of(
    st.integers(-(2**65), 2**65).map(str),
    st.floats().map(str),
    st.text(st.sampled_from("ab 0#='\"\\\t\x0c\x85\u2028é;()"), max_size=10),
)
CONSTANT = st.tuples(
    st.sampled_from(["int32", "string", "float64", "float32", "bool", "uint8", "char", "int64"]),
    NAMES,
    VALUES,
).map(lambda t: f"{t[0]} {t[1]}={t[2]}")
FIELD = st.tuples(st.sampled_from(["int32", "string", "time", "uint8[]", "float32[3]"]), NAMES)
LINES = st.one_of(
    st.lists(st.sampled_from(PIECES), max_size=6).map("".join),
    CONSTANT,
    CONSTANT,
    FIELD.map(" ".join),
)
TEXTS = st.lists(LINES, min_size=1, max_size=5).map(lambda lines: "\n".join(lines) + "\n")


def genpy_builds(texts: list[str], tmp: Path) -> list[list[object]]:
    """What genpy makes of each text, in Debian's python3 (where it lives), run in `tmp`."""
    res = subprocess.run(
        ["/usr/bin/python3", "-c", GENPY], input=json.dumps(texts), capture_output=True,
        text=True, check=True, cwd=tmp, timeout=120,
    )  # fmt: skip
    return list(json.loads(res.stdout))


@pytest.mark.ros1
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(texts=st.lists(TEXTS, min_size=40, max_size=40))
def test_what_ros1def_accepts_genpy_builds_to_the_same_value(
    texts: list[str], ros1: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.mktemp("genpy")
    marker = tmp / "ran"
    texts = [
        t.replace("__import__('os')", f"__import__('os').system('touch {marker}')") for t in texts
    ]
    accepted = []
    for text in texts:
        try:
            accepted.append(
                (text, ros1def.parse_full_text("fuzz_msgs/Fuzz", text)["fuzz_msgs/Fuzz"])
            )
        except ros1def.DefinitionError:
            continue
    event(f"{len(accepted) // 10 * 10}+ of 40 accepted")
    built = genpy_builds([t for t, _ in accepted], tmp)
    for (text, mine), theirs in zip(accepted, built, strict=True):
        assert theirs[0] == "ok", (text, theirs)
        _, slots, slot_types, consts = theirs
        assert slots == [name for _, name in mine.fields], text
        assert [t.replace("[]", "").split("[")[0] for t in slot_types] == [
            t.replace("[]", "").split("[")[0] for t, _ in mine.fields
        ]
        assert dict(consts) == {c.name: c.value for c in mine.constants}, text  # type: ignore[arg-type]
    assert not marker.exists(), "genpy ran code from text ros1def accepted"


def test_genpy_literals_parse_back_to_their_strings() -> None:
    for value in ["plain", "it's", 'say "hi"', "both ' and \"", 'a\\"""b']:
        assert ros1def.string_problem(value) is None
    for value in ["a\nb", "a\x0cb", "x\\", "C:\\path\\x", "a\u2028b", "tab\there"]:
        assert ros1def.string_problem(value) is not None


def test_the_agents_check_refuses_a_separator_header_that_is_not_a_type() -> None:
    text = "int32 x\n" + "=" * 80 + "\nMSG: os.system('x')/T\nint32 y\n"
    with pytest.raises(ros1def.DefinitionError, match="MSG: package/Type"):
        ros1def.parse_full_text("p/A", text)
