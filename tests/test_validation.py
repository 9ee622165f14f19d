"""The translator of pydantic's errors (roboscale.validation): file, line, field, allowed."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.errors import SpecErrors
from roboscale.runtime.launchspec import read_launch


def test_a_long_wrong_value_is_shown_shortened(tmp_path: Path) -> None:
    """A 100,000-character value was echoed whole into its one-line error."""
    path = tmp_path / "robot.yaml"
    path.write_text(
        "name: robot\nchildren:\n  - command: t\n    argv: [sleep, '1']\n"
        f"    restart_delay_s: {'x' * 100_000}\n"
    )
    with pytest.raises(SpecErrors) as info:
        read_launch(path)
    text = str(info.value)
    assert text.startswith(f"{path}:5: children[0].restart_delay_s: ")
    assert "(got 'xxxx" in text and "…" in text and "allowed: a number of seconds" in text
    assert len(text) < len(str(path)) + 300
