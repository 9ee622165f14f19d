"""A chaos run's spec: the --chaos option and a launch file's chaos: section, every key
checked with a clear error."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.errors import SpecError, UserError
from roboscale.runtime.chaosspec import (
    ChaosSpec,
    Method,
    chaos_from_launch,
    parse_chaos_option,
    parse_methods,
)

EXAMPLE = Path(__file__).parents[2] / "examples" / "launch" / "workers.yaml"


def test_chaos_option_parses_every_key() -> None:
    spec = parse_chaos_option(
        "rate=50,duration=2.5,method=exception:8+hang,target=/workers/*,seed=7,settle=1,log=k.jsonl"
    )
    assert spec == ChaosSpec(
        rate=50,
        duration=2.5,
        methods=((Method.EXCEPTION, 8.0), (Method.HANG, 1.0)),
        target="/workers/*",
        seed=7,
        settle=1.0,
        log=Path("k.jsonl"),
    )
    assert spec.kills == 125
    assert parse_methods({"sigkill": 1, "sigterm": 3}) == (
        (Method.SIGKILL, 1.0),
        (Method.SIGTERM, 3.0),
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("rate=fast", "--chaos: rate: 'fast' is not allowed; a number > 0 and <= 10000"),
        ("rate=0", "--chaos: rate: '0' is not allowed"),
        ("duration=-1", "--chaos: duration: '-1' is not allowed"),
        ("method=poison", "--chaos: method: unknown method 'poison'; allowed: sigterm | sigkill"),
        ("method=hang:0", "--chaos: method: weight of hang must be a number > 0"),
        ("speed=3", "--chaos: speed: unknown key; allowed: rate, duration, method"),
        ("rate", "--chaos: 'rate' is not key=value"),
        ("seed=x", "--chaos: seed: 'x' is not allowed; a whole number"),
    ],
)
def test_bad_chaos_options_say_what_is_allowed(text: str, message: str) -> None:
    with pytest.raises(UserError) as caught:
        parse_chaos_option(text)
    assert str(caught.value).startswith(message)


def test_chaos_section_of_a_launch_file_is_validated_with_its_line(tmp_path: Path) -> None:
    path = tmp_path / "robot.yaml"
    text = EXAMPLE.read_text().replace(
        "children:\n  - node: camera",
        "chaos:\n  rate: 100\n  method: poison\nchildren:\n  - node: camera",
        1,
    )
    path.write_text(text)
    with pytest.raises(SpecError) as caught:
        chaos_from_launch(path)
    line = text.splitlines().index("  method: poison") + 1
    assert str(caught.value).startswith(f"{path}:{line}: chaos.method: unknown method 'poison'")
    path.write_text(text.replace("poison", "exception"))
    assert chaos_from_launch(path) == ChaosSpec(rate=100)
    assert chaos_from_launch(EXAMPLE) is None
