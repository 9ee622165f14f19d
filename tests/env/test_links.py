"""Link profiles: built-ins, YAML custom profiles and their located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.env.links import BUILTIN, load_profiles, resolve, tbf_args
from roboscale.errors import SpecError, SpecErrors, UserError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "links.yaml"
    path.write_text(text)
    return path


def test_builtin_profiles_follow_the_thesis() -> None:
    assert BUILTIN["ethernet"].bandwidth_mbit == 1000
    assert not BUILTIN["ethernet"].needs_emulator
    wifi = BUILTIN["wifi"]
    assert wifi.bandwidth_mbit == 25 and wifi.needs_emulator and 0 < wifi.loss < 0.05


def test_custom_profile_starts_from_a_base(tmp_path: Path) -> None:
    path = write(tmp_path, "profiles:\n  slow:\n    base: wifi\n    bandwidth_mbit: 5\n")
    slow = load_profiles(path)["slow"]
    assert slow.bandwidth_mbit == 5 and slow.delay_ms == BUILTIN["wifi"].delay_ms


def test_unknown_field_names_line_and_nearest_name(tmp_path: Path) -> None:
    path = write(tmp_path, "profiles:\n  lossy:\n    delay_ms: 3\n    bandwdth_mbit: 10\n")
    with pytest.raises(SpecError) as err:
        load_profiles(path)
    text = str(err.value)
    assert f"{path}:4: profiles.lossy.bandwdth_mbit: unknown field" in text
    assert "did you mean 'bandwidth_mbit'?" in text


def test_negative_bandwidth_and_bad_loss_are_both_reported(tmp_path: Path) -> None:
    path = write(tmp_path, "profiles:\n  bad:\n    bandwidth_mbit: -5\n    loss: 1.5\n")
    with pytest.raises(SpecErrors) as err:
        load_profiles(path)
    lines = str(err.value).splitlines()
    assert lines[0].startswith(f"{path}:3: profiles.bad.bandwidth_mbit: -5 is out of range")
    assert "above 0" in lines[0]
    assert lines[1].startswith(f"{path}:4: profiles.bad.loss: 1.5 is out of range")


def test_jitter_above_delay_and_text_values_are_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "profiles:\n  j:\n    delay_ms: 1\n    jitter_ms: 2\n")
    with pytest.raises(SpecError, match=r":4: profiles.j.jitter_ms: 2.0 exceeds delay_ms"):
        load_profiles(path)
    path = write(tmp_path, "profiles:\n  t:\n    delay_ms: fast\n")
    with pytest.raises(SpecError, match="must be a number, got 'fast'"):
        load_profiles(path)


def test_emulated_profile_above_the_emulator_rate_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "profiles:\n  g:\n    bandwidth_mbit: 1000\n    delay_ms: 5\n")
    with pytest.raises(SpecError, match="userspace link emulator"):
        load_profiles(path)


def test_unknown_top_level_key_and_unknown_profile_name(tmp_path: Path) -> None:
    path = write(tmp_path, "profiles: {}\nprofile: {}\n")
    with pytest.raises(SpecError, match=":2: profile: unknown field; allowed: profiles"):
        load_profiles(path)
    with pytest.raises(UserError, match="did you mean 'wifi'"):
        resolve("wfi")


def test_tbf_holds_a_gso_segment_and_the_queue() -> None:
    args = tbf_args(BUILTIN["ethernet"])
    assert args[:3] == ["tbf", "rate", "1000000000bit"]
    assert int(args[args.index("burst") + 1]) >= 64 * 1024
    assert int(args[args.index("limit") + 1]) >= 1000 * 1514
