"""Specs on real machines: env.inventory and env.machines, checked before anything connects."""

from __future__ import annotations

from pathlib import Path

import pytest

from roboscale.errors import SpecError
from roboscale.spec.loader import load_spec
from roboscale.spec.planner import plan

REPO = Path(__file__).resolve().parents[2]
INVENTORY = "hosts:\n  laptop:\n    address: 10.0.0.1\n  robot:\n    address: 10.0.0.2\n"


@pytest.mark.parametrize("spec", sorted((REPO / "experiments" / "machines").glob("*.yaml")))
@pytest.mark.parametrize("quick", [False, True])
def test_the_shipped_machine_specs_plan_on_the_inventory(spec: Path, quick: bool) -> None:
    loaded = load_spec(spec, quick=quick)
    trials = plan(loaded)
    assert trials
    for t in trials:
        assert t.remote and not t.emulated
        assert t.machines == ("laptop", "robot")[: t.hosts]
        assert Path(t.inventory or "").is_absolute()
        assert t.link_crossed == ("real" if t.hosts > 1 else "loopback")


def spec_with(tmp_path: Path, env: str, sweep: str = "") -> Path:
    (tmp_path / "inv.yaml").write_text(INVENTORY)
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: s\nsweep:\n  rate_hz: 10\n  hosts: 2\n{sweep}env:\n{env}")
    return path


@pytest.mark.parametrize(
    ("env", "sweep", "line", "field", "says"),
    [
        ("  inventory: inv.yaml\n  machines: [laptop, robbot]\n", "", 7, "env.machines",
         "did you mean 'robot'"),
        ("  inventory: inv.yaml\n  machines: [laptop]\n", "", 4, "sweep.hosts", "at most 1"),
        ("  inventory: inv.yaml\n", "", 5, "env.machines", "name the hosts"),
        ("  machines: [laptop]\n", "", 6, "env.machines", "needs env.inventory"),
        ("  inventory: inv.yaml\n  machines: [laptop, robot]\n", "  link: wifi\n", 5,
         "sweep.link", "the link is the real one"),
        ("  inventory: inv.yaml\n  machines: [laptop, robot]\n", "  cpu: 0.5\n", 5,
         "sweep.cpu", "CPU quotas"),
        ("  inventory: inv.yaml\n  machines: [laptop, robot]\n  load_cpu: 0.5\n", "", 8,
         "env.load_cpu", "background load"),
    ],
)  # fmt: skip
def test_bad_machine_settings_name_line_and_field(
    tmp_path: Path, env: str, sweep: str, line: int, field: str, says: str
) -> None:
    with pytest.raises(SpecError) as caught:
        load_spec(spec_with(tmp_path, env, sweep))
    e = caught.value
    assert (e.line, e.field) == (line, field) and says in e.problem, str(e)


def test_a_missing_or_broken_inventory_is_named(tmp_path: Path) -> None:
    path = spec_with(tmp_path, "  inventory: nowhere.yaml\n  machines: [laptop]\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert caught.value.field == "env.inventory" and "nowhere.yaml" in caught.value.problem
    (tmp_path / "inv.yaml").write_text("hosts:\n  laptop:\n    port: 99999\n")
    path.write_text(path.read_text().replace("nowhere.yaml", "inv.yaml"))
    with pytest.raises(Exception, match=r"inv.yaml:3: hosts.laptop.port"):
        load_spec(path)
