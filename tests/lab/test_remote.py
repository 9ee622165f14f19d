"""Real machines over real SSH: sshd in emulated hosts, reached from a controller host."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from roboscale.lab.remote import HostCheck, build_wheels

from .sshd_hosts import SshLab, ssh_lab

pytestmark = [pytest.mark.netns, pytest.mark.slow]
ROBOSCALE = str(Path(sys.executable).parent / "roboscale")


@pytest.fixture(scope="module")
def lab(root: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshLab]:
    with ssh_lab(tmp_path_factory.mktemp("ssh")) as made:
        yield made


def inventory(lab: SshLab, tmp: Path, **hosts: dict[str, object]) -> Path:
    lines = ["hosts:"]
    for name, entry in hosts.items():
        lines.append(f"  {name}:")
        full = {
            "user": "root",
            "identity_file": str(lab.keys / "client"),
            "known_hosts": str(lab.keys / "known_hosts"),
            "workdir": str(tmp / f"remote-{name}"),
            "python": "/usr/bin/python3",
            **entry,
        }
        lines += [f"    {k}: {v}" for k, v in full.items()]
    path = tmp / "inventory.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_check_tells_each_hosts_problem(lab: SshLab, tmp_path: Path) -> None:
    inv = inventory(
        lab,
        tmp_path,
        good={"address": lab.remote(1).address},
        stranger={"address": lab.remote(1).address, "identity_file": lab.keys / "stranger"},
        closed={"address": lab.remote(2).address, "port": 2222},
        nopython={"address": lab.remote(2).address, "python": "/nonexistent/python3"},
    )
    report = tmp_path / "check.json"
    done = lab.run([ROBOSCALE, "hosts", "check", str(inv), "--json", str(report)], 120)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    checks = {c["name"]: c for c in json.loads(report.read_text())}
    good = checks["good"]
    assert good["reachable"] and good["python"].startswith("3.")
    assert "not installed" in good["problem"]
    assert good["clock"]["exchanges"] == 16
    # One machine, one CLOCK_MONOTONIC: the offset lies within its own bound.
    assert abs(good["clock"]["offset_ns"]) <= good["clock"]["bound_ns"]
    assert not checks["stranger"]["reachable"]
    assert "key was refused" in checks["stranger"]["problem"]
    assert not checks["closed"]["reachable"]
    assert "Connection refused" in checks["closed"]["problem"]
    assert checks["nopython"]["reachable"]
    assert "no usable Python" in checks["nopython"]["problem"]


def test_install_puts_this_roboscale_on_the_host(lab: SshLab, tmp_path: Path) -> None:
    system = json.loads(
        subprocess.run(
            ["/usr/bin/python3", "-c", "import json, platform; print(json.dumps("
             "[platform.python_version(), platform.machine(), platform.libc_ver()[1]]))"],
            capture_output=True, text=True, check=True,
        ).stdout
    )  # fmt: skip
    wheels = build_wheels(
        tmp_path / "wheels",
        [HostCheck("h", "", True, python=system[0], machine=system[1], libc=system[2])],
    )
    inv = inventory(lab, tmp_path, robot={"address": lab.remote(1).address})
    done = lab.run([ROBOSCALE, "hosts", "install", str(inv), "--wheels", str(wheels)], 900)
    assert done.returncode == 0, done.stdout + done.stderr
    remote_python = tmp_path / "remote-robot" / "venv" / "bin" / "python"
    assert remote_python.exists()  # a remote directory apart from this checkout
    report = tmp_path / "check.json"
    done = lab.run([ROBOSCALE, "hosts", "check", str(inv), "--json", str(report)], 120)
    assert done.returncode == 0, done.stdout + done.stderr
    (robot,) = json.loads(report.read_text())
    assert robot["problem"] == ""
    assert not robot["backends"]["zenoh"].startswith("unavailable"), robot["backends"]
    # Other code on the host: the fingerprint differs, and check says so.
    package = next((tmp_path / "remote-robot" / "venv").rglob("roboscale/__init__.py"))
    package.write_text(package.read_text() + "\n# changed on the host\n")
    done = lab.run([ROBOSCALE, "hosts", "check", str(inv), "--json", str(report)], 120)
    assert done.returncode == 1
    assert "hosts install" in json.loads(report.read_text())[0]["problem"]
