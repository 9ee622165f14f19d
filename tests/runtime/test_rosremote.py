"""What reaches a remote host: only the launch file's words, each a literal argument.

The host's shell line is run here by a real `sh` (as sshd runs it), with the real guard:
shell syntax in a launch file's args, remaps or env values stays text (the attack it
stops: a command run on the robot), and every word arrives as it was written (fuzzed)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roboscale.runtime.launchspec import explain, read_launch
from roboscale.runtime.rosremote import Host, is_local, reach_address, remote_command, ssh_argv

SHOW = (
    "import json, os, sys; "
    "print(json.dumps([sys.argv[1:], os.environ.get('X'), os.environ.get('ROS_IP')]))"
)
HOST = Host("arm", "10.0.0.7", user="pi")


def run_on_host(command: str, cwd: Path) -> tuple[list[str], str | None, str | None]:
    """Run the host's line as sshd would (`sh -c`), its stdin open as ssh's channel."""
    proc = subprocess.Popen(
        ["sh", "-c", command], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=cwd,
        env={"PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdin is not None
    out = proc.stdout.read()
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0
    argv, x, ip = json.loads(out)
    return argv, x, ip


ATTACKS = ["$(touch pwned)", "`touch pwned`", "; touch pwned", "a'b\"c", "$HOME", "|| touch pwned"]


def test_shell_syntax_in_a_launch_file_stays_text_on_the_host(tmp_path: Path) -> None:
    argv = ["python3", "-c", SHOW, *ATTACKS]
    command = remote_command(HOST, argv, {"X": "$(touch pwned)"}, "10.0.0.7")
    got, x, ip = run_on_host(command, tmp_path)
    assert got == ATTACKS and x == "$(touch pwned)" and ip == "10.0.0.7"
    assert not (tmp_path / "pwned").exists()


def test_an_environment_name_that_is_not_a_name_is_refused() -> None:
    with pytest.raises(ValueError, match="environment variable name 'A B' is not allowed"):
        remote_command(HOST, ["true"], {"A B": "x"}, "")


@settings(max_examples=25, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                        max_size=20), max_size=5))  # fmt: skip
def test_every_word_arrives_as_written(words: list[str]) -> None:
    command = remote_command(HOST, ["python3", "-c", SHOW, *words], {}, "")
    got, _, _ = run_on_host(command, Path("/tmp"))
    assert got == words


def test_ssh_always_checks_host_keys_and_never_prompts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Options on ssh's command line win over any ssh_config (its first value wins)."""
    config = tmp_path / "ssh_config"
    config.write_text("Host *\n  StrictHostKeyChecking no\n  BatchMode no\n")
    monkeypatch.setenv("ROBOSCALE_SSH_CONFIG", str(config))
    argv = ssh_argv(Host("arm", "10.0.0.7", user="pi", port=2222))
    assert argv[:3] == ["ssh", "-F", str(config)]
    assert argv.index("StrictHostKeyChecking=yes") < len(argv) - 2
    assert "BatchMode=yes" in argv and argv[-2:] == ["--", "10.0.0.7"]
    assert argv[argv.index("-p") + 1] == "2222" and argv[argv.index("-l") + 1] == "pi"


def test_local_addresses_run_here() -> None:
    assert is_local("localhost") and is_local("127.0.0.1") and not is_local("127.0.0.2")
    assert reach_address(["localhost"]) is None
    assert reach_address(["127.0.0.2"]) in ("127.0.0.1", "127.0.0.2")


MACHINES = """\
name: robot
ros:
  machines:
    here: localhost
    arm: {{address: 10.0.0.7, user: pi, env_loader: /opt/ros/env.sh, port: 2222}}
children:
  - ros_master: master
  - ros_node: driver
    pkg: arm
    type: driver
    machine: {machine}
"""


def test_a_yaml_launch_file_declares_machines_too(tmp_path: Path) -> None:
    path = tmp_path / "robot.yaml"
    path.write_text(MACHINES.format(machine="arm"))
    spec = read_launch(path).spec
    assert spec.ros is not None and spec.ros.machines["arm"].env_loader == "/opt/ros/env.sh"
    assert spec.ros.machines["here"].address == "localhost"
    path.write_text(MACHINES.replace("/opt/ros/env.sh", "env.sh").format(machine="arm"))
    with pytest.raises(Exception, match=r"robot.yaml:5: ros.machines.arm.env_loader: 'env.sh' "
                       "is not allowed; allowed: an absolute path on the host"):  # fmt: skip
        read_launch(path)


EXPLAINED = """\
<launch>
  <machine name="arm" address="10.0.0.7" user="pi" env-loader="/opt/ros/env.sh"/>
  <node name="driver" pkg="arm" type="driver" machine="arm" respawn="true" respawn_delay="2"/>
  <node name="guard" pkg="arm" type="guard" machine="arm" required="true"/>
</launch>
"""


def test_a_remote_node_is_an_ordinary_child_of_the_tree(tmp_path: Path) -> None:
    """Read without reaching the host (--check, --explain): the same restart type, delay
    and escalation as a local node; the host is reached only when the tree is built."""
    path = tmp_path / "robot.launch"
    path.write_text(EXPLAINED)
    text = explain(read_launch(path).spec)
    assert "driver  ros_node /driver (arm/driver) on arm  [permanent, delay 2 s" in text
    assert "guard  ros_node /guard (arm/guard) on arm  [temporary, required" in text
