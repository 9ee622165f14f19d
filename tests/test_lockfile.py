"""The lock files pin every dependency pyproject.toml declares, and this environment holds
exactly the pinned versions: a fresh machine installs what CI tested."""

from __future__ import annotations

import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
DEMO_LOCK = ROOT / "requirements" / "demo.lock"
TEST_LOCK = ROOT / "requirements" / "test.lock"
# The extras `make test` installs (the Makefile's EXTRAS).
TEST_EXTRAS = re.search(r"^EXTRAS := (\S+)$", (ROOT / "Makefile").read_text(), re.M)


def pins(lock: Path) -> dict[str, str]:
    """Name -> version of every `name==version` line of a lock file."""
    found = re.findall(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", lock.read_text(), re.M)
    return {canonicalize_name(name): version for name, version in found}


def declared() -> tuple[list[Requirement], dict[str, list[Requirement]]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = [Requirement(r) for r in project["dependencies"]]
    extras = {k: [Requirement(r) for r in v] for k, v in project["optional-dependencies"].items()}
    return base, extras


def unmet(requirements: list[Requirement], pinned: dict[str, str]) -> list[str]:
    """The requirements (for this platform) that the pins do not satisfy."""
    return [
        f"{r} (pinned: {pinned.get(canonicalize_name(r.name), 'nothing')})"
        for r in requirements
        if (r.marker is None or r.marker.evaluate())
        and not r.specifier.contains(pinned.get(canonicalize_name(r.name), "0.dev0"), True)
    ]


def test_the_demo_lock_pins_every_base_dependency() -> None:
    base, _ = declared()
    assert unmet(base, pins(DEMO_LOCK)) == [], "run `make lock`"


def test_the_test_lock_pins_every_dependency_of_make_test() -> None:
    base, extras = declared()
    assert TEST_EXTRAS is not None
    wanted = base + [r for name in TEST_EXTRAS.group(1).split(",") for r in extras[name]]
    assert unmet(wanted, pins(TEST_LOCK)) == [], "run `make lock`"


def test_both_locks_agree_and_every_pin_has_a_hash() -> None:
    demo, test = pins(DEMO_LOCK), pins(TEST_LOCK)
    assert {n: v for n, v in demo.items() if test.get(n) != v} == {}
    for lock in (DEMO_LOCK, TEST_LOCK):
        entries = re.split(r"\n(?=[A-Za-z0-9])", lock.read_text())
        assert all("--hash=sha256:" in e for e in entries if "==" in e.split("\n")[0])


def test_this_environment_holds_the_pinned_versions() -> None:
    if not (ROOT / ".venv" / ".extras").exists():
        pytest.skip("not installed by `make test`")  # CI always installs through make test
    wrong = {}
    for name, version in pins(TEST_LOCK).items():
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            installed = "missing"
        if installed != version:
            wrong[name] = f"{installed}, locked {version}"
    assert wrong == {}, "install through `make test`, or `make lock` after changing pyproject"
