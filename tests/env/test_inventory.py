"""The host inventory: every malformed entry is named by file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.env.inventory import load_inventory
from roboscale.errors import SpecError, SpecErrors, UserError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "inventory.yaml"
    path.write_text(text)
    return path


def test_a_full_entry_loads(tmp_path: Path) -> None:
    key = tmp_path / "id"
    key.write_text("key")
    key.chmod(0o600)
    inv = load_inventory(
        write(
            tmp_path,
            "hosts:\n  robot:\n    address: 192.168.1.20\n    user: pi\n    port: 2200\n"
            "    identity_file: id\n    workdir: .rs\n    roles: [echoer, roscore]\n"
            "  laptop:\n    address: laptop.local\n",
        )
    )
    robot = inv.host("robot")
    assert (robot.address, robot.user, robot.port, robot.identity_file) == (
        "192.168.1.20", "pi", 2200, key,
    )  # fmt: skip
    assert robot.may_run("echoer") and not robot.may_run("sender")
    assert inv.host("laptop").may_run("sender")
    assert inv.host("laptop").workdir == ".roboscale"


@pytest.mark.parametrize(
    ("text", "line", "field", "says"),
    [
        (
            "hosts:\n  robot:\n    adress: x\n    address: x\n",
            3,
            "hosts.robot.adress",
            "did you mean 'address'",
        ),
        ("hosts:\n  robot:\n    user: pi\n", 2, "hosts.robot.address", "required"),
        (
            "hosts:\n  robot:\n    address: x\n    port: 70000\n",
            4,
            "hosts.robot.port",
            "1 to 65535",
        ),
        ("hosts:\n  robot:\n    address: x\n    port: true\n", 4, "hosts.robot.port", "TCP port"),
        ("hosts:\n  robot:\n    address: 'a;rm -rf /'\n", 3, "hosts.robot.address", "hostname"),
        ("hosts:\n  robot:\n    address: -oProxyCommand=x\n", 3, "hosts.robot.address", "hostname"),
        (
            "hosts:\n  robot:\n    address: x\n    workdir: '$(id)'\n",
            4,
            "hosts.robot.workdir",
            "path",
        ),
        (
            "hosts:\n  robot:\n    address: x\n    roles: [pilot]\n",
            4,
            "hosts.robot.roles",
            "sender",
        ),
        (
            "hosts:\n  robot:\n    address: x\n    identity_file: nokey\n",
            4,
            "identity_file",
            "no such",
        ),
        ("hosts:\n  1robot:\n    address: x\n", 2, "hosts.1robot", "a letter"),
        ("hosts:\n  robot: x\n", 2, "hosts.robot", "a mapping"),
    ],
)
def test_malformed_entries_name_line_and_field(
    tmp_path: Path, text: str, line: int, field: str, says: str
) -> None:
    with pytest.raises(SpecError) as caught:
        load_inventory(write(tmp_path, text))
    e = caught.value
    assert e.line == line and field in e.field and says in e.problem, str(e)


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    with pytest.raises(SpecErrors) as caught:
        load_inventory(write(tmp_path, "hosts:\n  a:\n    port: 0\n  b:\n    address: 'x y'\n"))
    assert len(caught.value.errors) == 3


@pytest.mark.parametrize("text", ["", "hosts: []\n", "robots: {}\n", "hosts: {}\n"])
def test_an_inventory_without_hosts_is_refused(tmp_path: Path, text: str) -> None:
    with pytest.raises(UserError, match="inventory"):
        load_inventory(write(tmp_path, text))


def test_an_unknown_host_name_suggests_the_nearest(tmp_path: Path) -> None:
    inv = load_inventory(write(tmp_path, "hosts:\n  robot:\n    address: x\n"))
    with pytest.raises(SpecError, match="did you mean 'robot'"):
        inv.host("robbot")


def test_the_shipped_example_loads() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "inventory.yaml"
    inv = load_inventory(example)
    assert inv.host("robot").data_address == "192.168.1.20"
    assert inv.host("laptop").data_address == "192.168.1.10"
