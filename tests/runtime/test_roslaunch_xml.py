"""roslaunch XML: every malformed file gets its exact message (file:line: element.attribute),
exit code 2 and no traceback; nothing in a file becomes code; the parsers are fuzzed."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roboscale.cli import main
from roboscale.errors import UserError
from roboscale.runtime import rosexpr
from roboscale.runtime.launchspec import RosNodeChild, SupervisorChild, explain, read_launch
from roboscale.runtime.rosexpr import Context, ExprError

INNER = '<launch>\n  <arg name="rate" default="1"/>\n</launch>\n'


def no_package(pkg: str) -> str:
    raise ExprError(f"$(find {pkg}): no such ROS package on ROS_PACKAGE_PATH")


BROKEN: dict[str, tuple[str, str]] = {
    "doctype": (
        '<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>'
        "\n<launch>&lol2;</launch>\n",
        "robot.launch:2: a DOCTYPE (DTD) is not allowed in a launch file",
    ),
    "xxe": (
        '<?xml version="1.0"?>\n<!DOCTYPE l [<!ENTITY x SYSTEM "file:///etc/passwd">]>\n<launch>'
        '<param name="p" value="&x;"/></launch>\n',
        "robot.launch:2: a DOCTYPE (DTD) is not allowed in a launch file",
    ),
    "entity_undeclared": (
        '<launch>\n  <param name="p" value="&x;"/>\n</launch>\n',
        "robot.launch:2: not well-formed XML: undefined entity",
    ),
    "not_closed": (
        '<launch>\n  <node name="a" pkg="p" type="t">\n</launch>\n',
        "robot.launch:3: not well-formed XML: mismatched tag",
    ),
    "not_launch": (
        "<robot/>\n",
        "robot.launch:1: a roslaunch file has one <launch> element",
    ),
    "test_element": (
        '<launch>\n  <test test-name="t" pkg="p" type="t"/>\n</launch>\n',
        "robot.launch:2: test: element not supported by roboscale (rostest's tests are not run b"
        "y roboscale)",
    ),
    "prefix": (
        '<launch>\n  <node name="a" pkg="p" type="t" launch-prefix="gdb -ex run"/>\n</launch>\n',
        "robot.launch:2: node.launch-prefix: not supported by roboscale (a prefix runs another p"
        "rogram around the node)",
    ),
    "typo": (
        '<launch>\n  <node name="a" pkg="p" type="t" respwan="true"/>\n</launch>\n',
        "robot.launch:2: node.respwan: unknown attribute; allowed on <node>: args, clear_params,"
        " cwd, if, launch-prefix, machine, name, ns, output, pkg, required, respawn, respawn_del"
        "ay, type, unless",
    ),
    "no_pkg": (
        '<launch>\n  <node name="a" type="t"/>\n</launch>\n',
        "robot.launch:2: node.pkg: required on <node>",
    ),
    "undeclared_arg": (
        '<launch>\n  <arg name="rate" default="1"/>\n  <node name="a" pkg="p" type="t" args="$(a'
        'rg nope)"/>\n</launch>\n',
        "robot.launch:3: node.args: arg 'nope' is not declared (declared: rate)",
    ),
    "eval_code": (
        "<launch>\n  <param name=\"p\" value=\"$(eval __import__('os').system('id'))\"/>\n</laun"
        "ch>\n",
        "robot.launch:2: param.value: $(eval): cannot read \".system('id')\"; literals, argument"
        " names, arg('x'), env('X'), optenv('X', 'default'), + - * / // %, == != < <= > >=, and,"
        " or, not, parentheses",
    ),
    "bad_flag": (
        '<launch>\n  <node name="a" pkg="p" type="t" respawn="yes"/>\n</launch>\n',
        "robot.launch:2: node.respawn: 'yes' is not allowed; allowed: true | false",
    ),
    "respawn_required": (
        '<launch>\n  <node name="a" pkg="p" type="t" respawn="true" required="true"/>\n</launch>\n',
        "robot.launch:2: node.required: a node is respawned or required, not both",
    ),
    "bad_name": (
        '<launch>\n  <node name="my-node" pkg="p" type="t"/>\n</launch>\n',
        "robot.launch:2: node.name: invalid node name 'my-node': a letter, then letters, digits "
        "or '_'",
    ),
    "bad_yaml": (
        "<launch>\n  <rosparam>\n    a: [1, 2\n  </rosparam>\n</launch>\n",
        "robot.launch:4: rosparam: not valid YAML: expected ',' or ']', but got '<stream end>'",
    ),
    "yaml_tag": (
        "<launch>\n  <rosparam>\n    a: !!python/object:os.system id\n  </rosparam>\n</launch>\n",
        "robot.launch:3: rosparam: the tag tag:yaml.org,2002:python/object:os.system is not allo"
        "wed; write plain values without tags",
    ),
    "duplicate": (
        '<launch>\n  <node name="a" pkg="p" type="t"/>\n  <node name="a" pkg="p" type="u"/>\n</l'
        "aunch>\n",
        "robot.launch:3: node.name: a second node named /a",
    ),
    "missing_include": (
        '<launch>\n  <include file="$(dirname)/nope.launch"/>\n</launch>\n',
        "robot.launch:2: include.file: {dir}/nope.launch: no such roslaunch file",
    ),
    "unused_include_arg": (
        '<launch>\n  <include file="$(dirname)/inner.launch">\n    <arg name="speed" value="1"/>'
        "\n  </include>\n</launch>\n",
        "robot.launch:2: include: arg 'speed' is not declared in {dir}/inner.launch",
    ),
    "watchdog_no_limit": (
        '<launch>\n  <node name="a" pkg="p" type="t">\n    <watchdog topic="/x"/>\n  </node>\n</'
        "launch>\n",
        "robot.launch:3: watchdog: topic needs min_rate_hz or max_silence_s, and they need topic",
    ),
    "bad_eval_type": (
        '<launch>\n  <arg name="a" default="x"/>\n  <param name="p" value="$(eval a * 2)"/>\n</l'
        "aunch>\n",
        "robot.launch:3: param.value: $(eval): 'x' * 2: arithmetic needs numbers",
    ),
    "bad_param_type": (
        '<launch>\n  <param name="p" type="int" value="ten"/>\n</launch>\n',
        "robot.launch:2: param.value: 'ten' is not allowed for type int (invalid literal for int"
        "() with base 10: 'ten')",
    ),
    "if_and_unless": (
        '<launch>\n  <group if="true" unless="false"/>\n</launch>\n',
        "robot.launch:2: group.unless: give if or unless, not both",
    ),
    "private_top": (
        '<launch>\n  <param name="~p" value="1"/>\n</launch>\n',
        "robot.launch:2: param.name: a private (~) name belongs inside a <node>",
    ),
    "bad_delay": (
        '<launch>\n  <node name="a" pkg="p" type="t" respawn="true" respawn_delay="soon"/>\n</la'
        "unch>\n",
        "robot.launch:2: node.respawn_delay: 'soon' is not allowed; a number of seconds >= 0",
    ),
    "find_missing": (
        '<launch>\n  <include file="$(find nosuchpkg)/x.launch"/>\n</launch>\n',
        "robot.launch:2: include.file: $(find nosuchpkg): no such ROS package on ROS_PACKAGE_PATH",
    ),
    "unknown_subst": (
        '<launch>\n  <param name="p" value="$(shell id)"/>\n</launch>\n',
        "robot.launch:2: param.value: $(shell ...) is not supported; allowed: $(arg, find, env, "
        "optenv, dirname, anon, eval ...)",
    ),
    "textfile_device": (
        '<launch>\n  <param name="p" textfile="/dev/zero"/>\n</launch>\n',
        "robot.launch:2: param.textfile: /dev/zero: is a character device; the textfile must "
        "be a regular file",
    ),
    "rosparam_file_missing": (
        '<launch>\n  <rosparam file="nope.yaml"/>\n</launch>\n',
        "robot.launch:2: rosparam.file: nope.yaml: no such rosparam",
    ),
    "command_param": (
        '<launch>\n  <param name="p" command="cat /etc/passwd"/>\n</launch>\n',
        "robot.launch:2: param.command: not supported by roboscale (it runs a program while the "
        "file is read); allowed on <param>: if, name, textfile, type, unless, value",
    ),
    "machine_option": (
        '<launch>\n  <machine name="arm" address="-oProxyCommand=touch /tmp/x"/>\n</launch>\n',
        "robot.launch:2: machine.address: '-oProxyCommand=touch /tmp/x' is not allowed; allowed:"
        " a host name, IP address or ssh alias",
    ),
    "machine_password": (
        '<launch>\n  <machine name="arm" address="10.0.0.7" password="secret"/>\n</launch>\n',
        "robot.launch:2: machine.password: not supported by roboscale (passwords are not sent: l"
        "og in with an ssh key); allowed on <machine>: address, default, env-loader, if, name, s"
        "sh-port, timeout, unless, user",
    ),
    "machine_port": (
        '<launch>\n  <machine name="arm" address="10.0.0.7" ssh-port="22x"/>\n</launch>\n',
        "robot.launch:2: machine.ssh-port: '22x' is not allowed; a port 1..65535",
    ),
    "machine_loader": (
        '<launch>\n  <machine name="arm" address="10.0.0.7" env-loader="env.sh; reboot"/>\n'
        "</launch>\n",
        "robot.launch:2: machine.env-loader: 'env.sh; reboot' is not allowed; allowed: an absolu"
        "te path on the host",
    ),
    "machine_unknown": (
        '<launch>\n  <machine name="here" address="localhost"/>\n  <group>\n    <node name="a"'
        ' pkg="p" type="t" machine="there"/>\n  </group>\n</launch>\n',
        "robot.launch:4: node.machine: unknown machine 'there'; declared: here",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_each_broken_file_has_its_exact_message(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text, expected = BROKEN[case]
    (tmp_path / "inner.launch").write_text(INNER)
    path = tmp_path / "robot.launch"
    path.write_text(text)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError) as info:
        read_launch(Path("robot.launch"), find=no_package)
    expected = expected.replace("{dir}", str(tmp_path)).replace("{host}", socket.gethostname())
    assert str(info.value) == expected
    if case != "find_missing":  # the CLI's $(find) is rospack's: same message, other path
        with pytest.raises(SystemExit) as exit_info:
            main(["launch", "--check", "robot.launch"])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("error: robot.launch:") and "Traceback" not in err


def test_billion_laughs_is_refused_before_any_expansion(tmp_path: Path) -> None:
    entities = "".join(f'<!ENTITY l{i} "{("&l" + str(i - 1) + ";") * 10}">' for i in range(1, 10))
    text = f'<?xml version="1.0"?>\n<!DOCTYPE launch [<!ENTITY l0 "lol">{entities}]>\n'
    path = tmp_path / "bomb.launch"
    path.write_text(text + "<launch><param name='p' value='&l9;'/></launch>\n")
    t0 = time.monotonic()
    with pytest.raises(UserError, match="DOCTYPE"):
        read_launch(path)
    assert time.monotonic() - t0 < 5  # 10**9 'lol's would take minutes and gigabytes


def test_an_include_bomb_is_refused_at_the_bound(tmp_path: Path) -> None:
    """A file that includes itself 4 times per level, 6 levels deep (depth < 16): 5,460
    includes, each parsed anew (4 per level and 14 levels: 4**14 parses, forever)."""
    include = (
        '  <include file="$(dirname)/bomb.launch" if="$(eval d &lt; 6)">'
        '<arg name="d" value="$(eval d + 1)"/></include>\n'
    )
    path = tmp_path / "bomb.launch"
    path.write_text('<launch>\n  <arg name="d" default="0"/>\n' + include * 4 + "</launch>\n")
    with pytest.raises(UserError, match=r"bomb.launch:\d+: include.file: more than 1000 includes"):
        read_launch(path)


def test_large_includes_are_bounded_in_bytes_in_all(tmp_path: Path) -> None:
    """Under 1000 includes, a file of 0.9 MB read 85 times is 77 MB of XML parsed."""
    include = (
        '  <include file="$(dirname)/big.launch" if="$(eval d &lt; 3)">'
        '<arg name="d" value="$(eval d + 1)"/></include>\n'
    )
    padding = "<!-- " + "x" * 900_000 + " -->\n"
    path = tmp_path / "big.launch"
    path.write_text(
        '<launch>\n  <arg name="d" default="0"/>\n' + include * 4 + padding + "</launch>\n"
    )
    with pytest.raises(UserError, match=r"big.launch:\d+: include.file: more than 16 MiB"):
        read_launch(path)


def test_files_loaded_by_params_are_bounded_in_bytes_in_all(tmp_path: Path) -> None:
    """Each textfile is at most 1 MiB, but 20,000 params fit in a launch file: 20 GB kept."""
    (tmp_path / "half.txt").write_text("x" * 500_000)
    params = "".join(f'  <param name="p{i}" textfile="half.txt"/>\n' for i in range(40))
    path = tmp_path / "robot.launch"
    path.write_text("<launch>\n" + params + "</launch>\n")
    with pytest.raises(UserError, match=r"robot.launch:\d+: param.textfile: more than 16 MiB "):
        read_launch(path)


def test_only_regular_files_of_bounded_size(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.launch"
    os.mkfifo(fifo)
    with pytest.raises(UserError, match="FIFO"):
        read_launch(fifo)  # no hang waiting for a writer
    big = tmp_path / "big.launch"
    big.write_text("<launch>" + " " * (1 << 20) + "</launch>")
    with pytest.raises(UserError, match="at most 1048576 bytes"):
        read_launch(big)


def test_eval_runs_no_code(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    ctx = Context({"x": "1"}, tmp_path)
    for attack in (
        f"__import__('os').system('touch {marker}')",
        f"open('{marker}', 'w')",
        "[c for c in ().__class__.__base__.__subclasses__()]",
        "x.__class__",
        "lambda: 1",
        "9 ** 9 ** 9",
        "'a' * 100000000",
    ):
        with pytest.raises(ExprError):
            rosexpr.evaluate(attack, ctx)
    assert not marker.exists()


def test_eval_refuses_deep_unary_chains_without_a_recursion_error(tmp_path: Path) -> None:
    ctx = Context({}, tmp_path)
    for expr in ("-" * 999 + "1", "-+" * 499 + "1", "not " * 249 + "1"):
        with pytest.raises(ExprError, match="nested deeper than"):
            rosexpr.evaluate(expr, ctx)
    assert rosexpr.evaluate("--1", ctx) == 1


def test_eval_computes_what_roslaunch_computes(tmp_path: Path) -> None:
    ctx = Context({"rate": "20", "sim": "true", "robot": "arm"}, tmp_path)
    cases = {
        "rate * 2": 40, "rate / 8": 2.5, "rate // 8 + rate % 8": 6, "-rate + 1": -19,
        "sim and rate > 10": True, "not sim or robot == 'arm'": True, "1 < rate <= 20": True,
        "arg('robot') + '_1'": "arm_1", "(rate - 4) * (2 + 1)": 48, "optenv('NOPE_X', 'd')": "d",
    }  # fmt: skip
    for expr, value in cases.items():
        assert rosexpr.evaluate(expr, ctx) == value, expr
    assert rosexpr.substitute("$(eval rate * 2)", ctx) == "40"
    # roslaunch substitutes str(eval(...)): a str param or a node's argument reads "True"
    assert rosexpr.substitute("$(eval rate > 10)", ctx) == "True"
    assert rosexpr.substitute("$(eval not sim)", ctx) == "False"
    assert rosexpr.substitute("$(arg robot)/$(optenv NOPE_X a b)", ctx) == "arm/a b"


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_eval_fuzz_never_crashes(expr: str) -> None:
    ctx = Context({"a": "1", "b": "x"}, Path("/"))
    with contextlib.suppress(ExprError):
        rosexpr.evaluate(expr, ctx)


XML_ATOMS = st.sampled_from([
    "<launch>", "</launch>", "<node name='a' pkg='p' type='t'>", "</node>", "<group ns='g'>",
    "</group>", "<arg name='x' default='1'/>", "<param name='p' value='$(arg x)'/>",
    "<remap from='a' to='b'/>", "<rosparam>a: 1</rosparam>", "<!DOCTYPE x>", "&amp;", "&x;",
    "<![CDATA[x]]>", "$(eval x+1)", "<?pi x?>", "<!-- c -->", "\n", "'", '"', "<", ">",
])  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(st.lists(XML_ATOMS, max_size=30), st.text(max_size=20))
def test_xml_reader_fuzz_gives_user_errors_only(
    tmp_path_factory: pytest.TempPathFactory, atoms: list[str], noise: str
) -> None:
    path = tmp_path_factory.mktemp("fuzz") / "f.launch"
    path.write_text("".join(atoms) + noise)
    with contextlib.suppress(UserError):
        read_launch(path, find=no_package)


def test_explain_shows_the_tree_a_roslaunch_file_became(tmp_path: Path) -> None:
    path = tmp_path / "robot.launch"
    path.write_text(
        '<launch>\n  <group ns="arm">\n'
        '    <node name="driver" pkg="p" type="d" respawn="true" respawn_delay="2"/>\n'
        '    <node name="planner" pkg="p" type="q" required="true"/>\n  </group>\n'
        '  <node name="cam" pkg="p" type="c"><remap from="image" to="/cam/image"/></node>\n'
        "</launch>\n"
    )
    spec = read_launch(path).spec
    nodes = spec.children[1]
    assert isinstance(nodes, SupervisorChild) and nodes.required
    arm = nodes.children[1]
    assert isinstance(arm, SupervisorChild) and arm.supervisor == "arm"
    driver = arm.children[0]
    assert isinstance(driver, RosNodeChild) and driver.restart.value == "permanent"
    assert driver.restart_delay_s == 2 and driver.ros_name == "/arm/driver"
    assert explain(spec).splitlines() == [
        "robot  supervisor rest_for_one, at most 1 restarts in 5 s",
        "  ros: master private, 0 params",
        "  master  ros_master rosmaster port free  [permanent, shutdown 5 s]",
        "  nodes  supervisor one_for_one, at most 100 restarts in 10 s  [temporary, required: "
        "its end stops the tree]",
        "    rosout  ros_node /rosout (rosout/rosout)  [permanent, shutdown 5 s]",
        "    arm  supervisor one_for_one, at most 100 restarts in 10 s  [temporary, required: "
        "its end stops the tree]",
        "      driver  ros_node /arm/driver (p/d)  [permanent, delay 2 s, shutdown 5 s]",
        "      planner  ros_node /arm/planner (p/q)  [temporary, required: its end stops the "
        "tree, shutdown 5 s]",
        "    cam  ros_node /cam (p/c image:=/cam/image)  [temporary, shutdown 5 s]",
    ]


def test_a_node_of_a_missing_package_is_named_at_its_line(tmp_path: Path) -> None:
    from roboscale.runtime.executor import Runtime
    from roboscale.runtime.launch import build_tree

    path = tmp_path / "robot.launch"
    path.write_text('<launch>\n  <node name="a" pkg="no_such_pkg_x" type="t"/>\n</launch>\n')
    rt = Runtime()
    try:
        with pytest.raises(UserError) as info:
            build_tree(read_launch(path), rt)
    finally:
        rt.close()
    assert str(info.value).startswith(f"{path}:2: node.type: ")
    assert "no_such_pkg_x" in str(info.value)
