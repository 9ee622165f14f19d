"""Launch files as pure data: validated without a runtime and without the user's code."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from roboscale.errors import SpecError, SpecErrors, UserError
from roboscale.runtime.launch import load_launch
from roboscale.runtime.launchspec import (
    CommandChild,
    RosNodeChild,
    SupervisorChild,
    explain,
    read_launch,
)

ROOT = Path(__file__).parents[2]
EXAMPLES = sorted(p for p in (ROOT / "examples" / "launch").iterdir() if p.is_file())

BOOM = 'raise RuntimeError("imported by the check")\n'
LAUNCH = """\
name: robot
children:
  - node: camera
    class: boom_pkg.camera:Camera
  - command: talker
    argv: [sleep, "60"]
    restart_delay_s: 0.5
    required: true
    watchdog: {heartbeat_file: /tmp/beat, heartbeat_s: 1}
  - supervisor: workers
    strategy: one_for_all
    children:
      - process: detector
        target: boom_pkg.detect:main
"""
CLI = [sys.executable, "-c", "import sys; from roboscale.cli import main; main(sys.argv[1:])"]


def user_package(tmp_path: Path) -> Path:
    """A package of the user's whose import fails loudly."""
    pkg = tmp_path / "boom_pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(BOOM)
    (pkg / "camera.py").write_text(BOOM)
    (tmp_path / "robot.yaml").write_text(LAUNCH)
    return tmp_path / "robot.yaml"


def test_check_imports_nothing_of_the_users(tmp_path: Path) -> None:
    path = user_package(tmp_path)
    env = {"PYTHONPATH": f"{tmp_path}:{ROOT / 'src'}", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [*CLI, "launch", "--check", str(path)], capture_output=True, text=True, env=env,
        check=False, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "ok, 4 children" in done.stdout
    explained = subprocess.run(
        [*CLI, "launch", "--explain", str(path)], capture_output=True, text=True, env=env,
        check=False, cwd=tmp_path,
    )  # fmt: skip
    assert explained.returncode == 0, explained.stderr
    lines = explained.stdout.splitlines()
    assert lines[0] == "robot  supervisor one_for_one, at most 1 restarts in 5 s"
    assert (
        "  talker  command sleep 60  [permanent, delay 0.5 s, required: its end stops the "
        "tree, shutdown 5 s]" in lines
    )
    assert "    detector  process boom_pkg.detect:main  [permanent, shutdown 5 s]" in lines


def test_building_is_what_imports(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = user_package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    from roboscale.runtime.executor import Runtime

    rt = Runtime()
    try:
        with pytest.raises(
            SpecError,
            match=r"robot.yaml:4: children\[0\].class: cannot import "
            r"boom_pkg.camera: RuntimeError: imported by the check",
        ):
            load_launch(path, rt)
    finally:
        rt.close()


def test_the_spec_is_plain_data(tmp_path: Path) -> None:
    spec = read_launch(user_package(tmp_path)).spec
    talker = spec.children[1]
    assert isinstance(talker, CommandChild) and talker.required and talker.watchdog is not None
    assert isinstance(spec.children[2], SupervisorChild)
    again = type(spec).model_validate(spec.model_dump(by_alias=True))
    assert again == spec  # a recipe, not a handle: it round-trips
    assert explain(again) == explain(spec)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_shipped_launch_file_checks_without_importing(path: Path) -> None:
    probe = (
        "import sys; from pathlib import Path; from roboscale.runtime.launchspec import "
        f"read_launch; read_launch(Path({str(path)!r}), find=lambda p: '/nonexistent'); "
        "bad = [m for m in sys.modules if m.startswith('roboscale.runtime.chaos') "
        "or m.startswith('rospy')]; assert not bad, bad"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=False)  # fmt: skip
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (("argv: [sleep, \"60\"]", "argv: []"),
         "robot.yaml:6: children[1].argv: List should have at least 1 item after validation, "
         "not 0; allowed: a non-empty list of strings (program, arguments)"),
        (("command: talker", "comand: talker"),
         "robot.yaml:5: children[1]: each child has exactly one of: node, process, command, "
         "ros_master, ros_node, remote, supervisor"),
        (("heartbeat_s: 1}", "every_s: 1}"),
         "robot.yaml:9: children[1].watchdog.every_s: unknown field; allowed fields here: "
         "heartbeat_file, heartbeat_s, topic"),
        (("restart_delay_s: 0.5", "restart_delay_s: -1"),
         "robot.yaml:7: children[1].restart_delay_s: Input should be greater than or equal "
         "to 0 (got -1); allowed: a number of seconds"),
        (("target: boom_pkg.detect:main", "target: boom_pkg/detect.py"),
         "robot.yaml:14: children[2].children[0].target: 'boom_pkg/detect.py' is not allowed; "
         "write package.module:function"),
        (("target: boom_pkg.detect:main", 'target: "boom_pkg.detect:main\\n"'),
         "robot.yaml:14: children[2].children[0].target: 'boom_pkg.detect:main\\n' is not "
         "allowed; write package.module:function"),
        (("class: boom_pkg.camera:Camera", 'class: "boom_pkg.camera:Camera\\n"'),
         "robot.yaml:4: children[0].class: 'boom_pkg.camera:Camera\\n' is not allowed; "
         "write package.module:Class"),
        (("  - process: detector", "  - process: detector\n        required: maybe"),
         "robot.yaml:14: children[2].children[0].required: Input should be a valid boolean"),
        (("  - process: detector", "  - process: detector\n        standby: 3"),
         "robot.yaml:14: children[2].children[0].standby: Input should be a valid boolean "
         "(got 3); allowed: true or false, on a process child of a launch file with a "
         "zygote: section"),
        (("  - process: detector", "  - process: detector\n        standby: \"yes\""),
         "robot.yaml:14: children[2].children[0].standby: Input should be a valid boolean "
         "(got 'yes')"),
        (("  - process: detector", "  - process: detector\n        standby: true"),
         "robot.yaml:14: children[2].children[0].standby: a warm standby is forked by the "
         "zygote: add zygote: {preload: [...]}"),
        (("    required: true", "    standby: true"),
         "robot.yaml:8: children[1].standby: only a process child (a Python target forked "
         "from the zygote) has a warm standby"),
        (("    strategy: one_for_all", "    standby: true"),
         "robot.yaml:11: children[2].standby: only a process child"),
        (("children:\n  - node", "bridge: {transprot: lowlatency}\nchildren:\n  - node"),
         "robot.yaml:2: bridge.transprot: unknown field; did you mean 'transport'? allowed: "
         "mode, listen, connect"),
        (("children:\n  - node", "bridge:\n  transport: lowlatency\n  colour: red\n"
          "children:\n  - node"),
         "robot.yaml:4: bridge.colour: unknown field; allowed: mode, listen"),
        (("children:\n  - node", "bridge: {transport: fast}\nchildren:\n  - node"),
         "robot.yaml:2: bridge.transport: 'fast' is not allowed: allowed are queued, lowlatency"),
        (("children:\n  - node", "bridge: {transport: lowlatency, max_payload: 60000}\n"
          "children:\n  - node"),
         "robot.yaml:2: bridge.max_payload: a number of bytes from 1 to 48000 with transport: "
         "lowlatency"),
        (("children:\n  - node", "bridge:\n  transport: lowlatency\n  import: [/a]\n"
          "  max_payload: {/a: 60000}\nchildren:\n  - node"),
         "robot.yaml:5: bridge.max_payload./a: a number of bytes from 1 to 48000 with "
         "transport: lowlatency"),
    ],
)  # fmt: skip
def test_yaml_launch_errors(tmp_path: Path, change: tuple[str, str], expected: str) -> None:
    path = tmp_path / "robot.yaml"
    path.write_text(LAUNCH.replace(*change))
    with pytest.raises(SpecErrors) as info:
        read_launch(path)
    assert expected in str(info.value).replace(str(tmp_path) + "/", "")


KEYS = ["name", "strategy", "intensity", "period_s", "children", "node", "class", "command",
        "argv", "process", "target", "ros_node", "pkg", "type", "remap", "watchdog", "topic",
        "min_rate_hz", "restart", "shutdown_s", "required", "supervisor", "bridge", "zygote",
        "ros", "params", "cursors", "remote", "node_path", "ros_master", "port", "standby",
        "preload", "transport", "max_payload", "import", "listen"]  # fmt: skip
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 70000), st.floats(allow_nan=True),
    st.sampled_from(["one_for_all", "permanent", "temporary", "a:b", "talker", "/chatter", "",
                     "x" * 80, "lowlatency", "queued", "yes", "tcp/127.0.0.1:7447"]),
)  # fmt: skip
DATA = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(KEYS), inner, max_size=6)
    ),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(KEYS), DATA, max_size=8))
def test_launch_spec_fuzz_gives_spec_errors_only(data: dict[str, object]) -> None:
    """Whatever a YAML launch file holds, reading it is a LaunchFile or a SpecError."""
    path = Path(tempfile.mkdtemp()) / "fuzz.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        with contextlib.suppress(UserError):
            read_launch(path)
    finally:
        shutil.rmtree(path.parent)


MACHINES = """\
name: robot
ros: {{machines: {{here: localhost, arm: 10.0.0.7}}}}
children:
  - ros_master: master
  - ros_node: driver
    pkg: arm
    type: driver
    machine: {machine}
"""


def test_a_ros_node_on_an_undeclared_machine_is_refused_when_read_at_its_line(
    tmp_path: Path,
) -> None:
    """Before anything runs (`--check` says it); a declared machine elsewhere is a host the
    node starts on (runtime/rosremote.py, tests/runtime/test_roslaunch_remote_ros1.py)."""
    path = tmp_path / "robot.yaml"
    path.write_text(MACHINES.format(machine="there"))
    with pytest.raises(SpecErrors) as info:
        read_launch(path)
    assert "robot.yaml:8: children[1].machine: unknown machine 'there'; declared: arm, here" in str(
        info.value
    )
    for machine in ("here", "arm"):
        path.write_text(MACHINES.format(machine=machine))
        child = read_launch(path).spec.children[1]
        assert isinstance(child, RosNodeChild) and child.machine == machine


STANDBYS = """\
name: robot
zygote: {{preload: []}}
children:
  - process: detector
    target: pkg.detect:main
    restart: {restart}
    standby: true
"""


def test_a_standby_is_shown_and_refused_where_it_would_never_be_used(tmp_path: Path) -> None:
    """`--explain` says which children restart on a warm standby; a temporary child (never
    restarted) with one is refused at its line, as is a standby with no zygote to fork it."""
    path = tmp_path / "robot.yaml"
    for restart in ("permanent", "transient"):
        path.write_text(STANDBYS.format(restart=restart))
        shown = explain(read_launch(path).spec)
        assert f"detector  process pkg.detect:main  [{restart}, warm standby, shutdown 5 s]" in (
            shown
        )
    path.write_text(STANDBYS.format(restart="temporary"))
    with pytest.raises(SpecErrors) as info:
        read_launch(path)
    assert str(info.value).replace(str(tmp_path) + "/", "") == (
        "robot.yaml:7: children[0].standby: a temporary child is never restarted, its standby "
        "would idle: restart: permanent or transient, or no standby"
    )
    path.write_text(STANDBYS.format(restart="permanent").replace("zygote: {preload: []}\n", ""))
    with pytest.raises(SpecErrors, match=r"robot\.yaml:6: children\[0\]\.standby: a warm standby"):
        read_launch(path)


def test_launch_cli_says_a_standby_mistake_with_exit_code_2(tmp_path: Path) -> None:
    """Through the CLI: `error: file:line: field: ...`, exit code 2, no traceback."""
    path = tmp_path / "robot.yaml"
    path.write_text(STANDBYS.format(restart="permanent").replace("standby: true", "standby: 3"))
    done = subprocess.run([*CLI, "launch", str(path), "--explain"], capture_output=True,
                          text=True, check=False)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: {path}:7: children[0].standby: "), done.stderr
    assert "Traceback" not in done.stderr


STANDBY_VALUES = st.one_of(
    st.booleans(), st.none(), st.integers(-2, 3), st.floats(allow_nan=True),
    st.sampled_from(["yes", "true", "on", "", "1"]), st.lists(st.booleans(), max_size=2),
    st.dictionaries(st.sampled_from(["a", "b"]), st.booleans(), max_size=2),
)  # fmt: skip


@settings(max_examples=200, deadline=None)
@given(
    standby=STANDBY_VALUES,
    kind=st.sampled_from(["process", "command", "node"]),
    zygote=st.booleans(),
    restart=st.sampled_from(["permanent", "transient", "temporary"]),
)
def test_a_standby_is_accepted_only_where_it_is_used(
    standby: object, kind: str, zygote: bool, restart: str
) -> None:
    """Whatever `standby` holds, on whatever child: read only as a boolean on a process
    child, with a zygote, restarted; every other case an error at `children[0].standby`."""
    body = {"process": {"target": "pkg.mod:main"}, "command": {"argv": ["true"]},
            "node": {"class": "pkg.mod:Node"}}[kind]  # fmt: skip
    child = {kind: "a", **body, "restart": restart, "standby": standby}
    data: dict[str, object] = {"name": "robot", "children": [child]}
    if zygote:
        data["zygote"] = {"preload": []}
    path = Path(tempfile.mkdtemp()) / "fuzz.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        read = read_launch(path)
    except SpecErrors as e:
        assert [err.field for err in e.errors] == ["children[0].standby"], e
        return
    finally:
        shutil.rmtree(path.parent)
    used = kind == "process" and zygote and restart != "temporary"
    assert standby is False or (standby is True and used), (standby, kind, zygote, restart)
    assert read.spec.children[0].model_dump().get("standby", False) is standby
