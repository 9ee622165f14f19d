"""The bounded YAML reader: line maps, and every limit a clear error that names the line."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from roboscale.errors import UserError
from roboscale.yamlfile import MAX_BYTES, MAX_DEPTH, MAX_NUMBER_CHARS, dotted, line_for, load_yaml


def load(tmp_path: Path, text: str | bytes) -> tuple[object, dict[tuple[str | int, ...], int]]:
    path = tmp_path / "f.yaml"
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return load_yaml(path)


def error(tmp_path: Path, text: str | bytes) -> str:
    with pytest.raises(UserError) as info:
        load(tmp_path, text)
    return str(info.value).replace(str(tmp_path / "f.yaml"), "F")


def test_values_and_lines(tmp_path: Path) -> None:
    data, lines = load(tmp_path, "a: 1\nb:\n  - x\n  - {c: 2.5, d: true}\nday: 2024-13-45\n")
    assert data == {"a": 1, "b": ["x", {"c": 2.5, "d": True}], "day": "2024-13-45"}
    assert lines[("b", 1, "d")] == 4 and lines[("a",)] == 1
    assert line_for(("b", 1, "e", 3), lines) == 4
    assert dotted(("sweep", "rate_hz", 2)) == "sweep.rate_hz[2]"


def test_alias_of_a_whole_value_is_allowed(tmp_path: Path) -> None:
    data, _ = load(tmp_path, "a: &x [1, 2]\nb: *x\n")
    assert data == {"a": [1, 2], "b": [1, 2]}


def test_alias_bomb_stops_fast(tmp_path: Path) -> None:
    rows = ['l0: &l0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    rows += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    start = time.monotonic()
    assert "values once aliases are expanded" in error(tmp_path, "\n".join(rows))
    assert time.monotonic() - start < 5


def test_recursive_alias(tmp_path: Path) -> None:
    assert error(tmp_path, "a: &a [1, *a]\n") == (
        "F:1: a[1]: an alias refers to a value that contains it"
    )


def test_depth_limit(tmp_path: Path) -> None:
    assert error(tmp_path, "[" * 100_000 + "]" * 100_000) == (
        f"F:1: nested too deeply; allowed: at most {MAX_DEPTH} levels"
    )


@pytest.mark.parametrize("text", ["a: !foo 3\n", "a: !!python/object:os.system x\n", "!!str a\n"])
def test_any_tag_is_refused(tmp_path: Path, text: str) -> None:
    assert "is not allowed; write plain values without tags" in error(tmp_path, text)


def test_merge_key_is_refused(tmp_path: Path) -> None:
    assert error(tmp_path, "b: &b {x: 1}\nc:\n  <<: *b\n") == (
        "F:3: c: merge keys (<<) are not supported; write the keys out "
        "(an alias may stand for a whole value)"
    )


def test_complex_key_and_duplicate(tmp_path: Path) -> None:
    assert "F:1: a key must be a plain name" in error(tmp_path, "? [a, b]\n: 1\n")
    assert error(tmp_path, "a: 1\na: 2\n") == "F:2: a: duplicate key"


def test_bad_bytes(tmp_path: Path) -> None:
    assert error(tmp_path, b"a: 1\n\xff\n") == (
        "F:2: byte 0xff is not UTF-8; a spec file is UTF-8 text"
    )
    assert "F:1: a binary file (a NUL byte)" in error(tmp_path, b"\x7fELF\x00\x01")


def test_size_limit(tmp_path: Path) -> None:
    assert f"a spec file is at most {MAX_BYTES} bytes" in error(tmp_path, "#" * (MAX_BYTES + 1))


def test_not_a_regular_file(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match=r"is a FIFO .* must be a regular file"):
        load_yaml(fifo)  # no writer: a blocking open would hang here
    with pytest.raises(UserError, match="is a directory"):
        load_yaml(tmp_path, "launch file")
    with pytest.raises(UserError, match="is a character device"):
        load_yaml(Path("/dev/zero"))
    with pytest.raises(UserError, match="no such launch file"):
        load_yaml(tmp_path / "nope.yaml", "launch file")


def test_syntax_error_and_empty(tmp_path: Path) -> None:
    assert error(tmp_path, "a: x\nb: [\n") == (
        "F:3: not valid YAML: expected the node content, but found '<stream end>'"
    )
    assert error(tmp_path, "") == "F:1: the file is empty; a spec file is a YAML mapping"


def test_depth_limit_beyond_the_c_parsers_own_limit(tmp_path: Path) -> None:
    # libyaml 0.2.5 (PyYAML 6.0.4) refuses 1,000 levels itself; the error path must not
    # hand the text to the recursive composer (a RecursionError before this was fixed).
    for text in ("[" * 5_000, "- " * 1_200 + "x\n", "{a: " * 1_500):
        assert "nested too deeply" in error(tmp_path, text)


def test_long_numbers_are_refused_quickly(tmp_path: Path) -> None:
    # Base-60 integers took seconds to build from 160 KB (quadratic); a number is at most
    # MAX_NUMBER_CHARS characters.
    text = "rate_hz: " + ":".join(["1"] * 80_000) + "\n"
    assert error(tmp_path, text) == (
        f"F:1: rate_hz: a number written in 159999 characters; allowed: at most "
        f"{MAX_NUMBER_CHARS} (quote it if it is text)"
    )
    assert "a number written in 300 characters" in error(tmp_path, "n: " + "9" * 300 + "\n")
    assert "a number written in" in error(tmp_path, "n: 1." + "5" * 100 + "\n")


def test_numbers_within_the_limit_and_quoted_text_are_read(tmp_path: Path) -> None:
    (tmp_path / "f.yaml").write_text(f"a: {'9' * 64}\nb: '{'1:' * 100}1'\nc: 1:30\n")
    data, _ = load_yaml(tmp_path / "f.yaml")
    assert data == {"a": int("9" * 64), "b": "1:" * 100 + "1", "c": 90}
