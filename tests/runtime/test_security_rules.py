"""Access rules that mean what they say, authentication judged per endpoint, and security
files refused when they would let anyone in (#23 items 2-4, #22). Real Zenoh sessions on
loopback with usrpwd and access control."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roboscale.backends.base import free_port
from roboscale.errors import UserError
from roboscale.runtime.bridge import Bridge, BridgeConfig, bridge_config
from roboscale.runtime.durable import publisher_of
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.security import (
    AccessRule,
    Security,
    acl,
    check_users,
    read_password,
    security_config,
)
from roboscale.runtime.supervisor import ChildSpec, Supervisor
from roboscale.runtime.wire import Codec, pack_header

from .conftest import private, wait_until
from .test_security import login, make_certificates, peer


class DurableSink(Node):
    def on_start(self) -> None:
        self.subscribe("/cmd", self.params["got"].append, durable=True)


@dataclass
class Robot:
    bridge: Bridge
    endpoint: str
    got: list[Any]


@pytest.fixture
def robot(zenoh: None, tmp_path: Path) -> Iterator[Robot]:
    """A bridge importing durable /cmd, with usrpwd: the operator may publish /cmd, the
    viewer may subscribe to it and query its retention; the default is deny."""
    private(tmp_path / "users.txt", "operator:op-secret\nviewer:view-secret\n")
    security = security_config(
        {
            "users_file": "users.txt",
            "access": {
                "rules": [
                    {"allow": ["publish"], "topics": ["/cmd"], "users": ["operator"]},
                    {"allow": ["subscribe", "query"], "topics": ["/cmd"], "users": ["viewer"]},
                ]
            },
        },
        base=tmp_path,
    )
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    rt = Runtime().start()
    got: list[Any] = []
    recipe = NodeRecipe("sink", DurableSink, {"got": got})
    rt.wait(Supervisor(rt, "s", [ChildSpec(recipe)]).start_async())
    config = BridgeConfig(
        listen=(endpoint,), imports=("/cmd",), durable=("/cmd",), security=security
    )
    bridge = Bridge(rt, config, cursors={"/cmd": tmp_path / "cursor"}, query_timeout_s=1.0)
    bridge.open()
    try:
        yield Robot(bridge, endpoint, got)
    finally:
        bridge.close()
        rt.close()


@pytest.mark.zenoh
def test_a_viewer_allowed_subscribe_and_query_cannot_write_into_a_durable_import(
    robot: Robot, tmp_path: Path
) -> None:
    """The review's attack: the viewer declares rs/@retain/** and answers the robot's
    backlog queries with forged commands (under its own session's publisher id, so that
    only the access rules stand in the way). The operator's bridge publishes for real;
    a second operator session puts with holes in its sequence, each of which makes the
    robot query the backlog. None of the viewer's replies may reach the callback."""
    operator_rt = Runtime().start()
    private(tmp_path / "operator.pw", "op-secret\n")
    security = Security(user="operator", password_file=tmp_path / "operator.pw")
    config = BridgeConfig(
        connect=(robot.endpoint,), exports=("/cmd",), durable=("/cmd",), security=security
    )
    operator = Bridge(operator_rt, config).open()
    trigger = peer(robot.endpoint, login("operator", "op-secret"))
    viewer = peer(robot.endpoint, login("viewer", "view-secret"))
    forged_id = publisher_of(str(viewer.zid()))
    answered: list[int] = []

    def forge(query: Any) -> None:
        answered.append(1)
        for seq in range(1, 4):
            attachment = pack_header(Codec.RAW, 0, forged_id, seq)
            query.reply("rs/@retain/cmd", b"forged", attachment=attachment)

    queryable = viewer.declare_queryable("rs/@retain/**", forge)
    try:
        wait_until(lambda: robot.bridge.admitted == 3, timeout_s=30.0)
        rounds = iter(range(1, 1_000_000))

        def one_round() -> bool:
            n = next(rounds)
            operator_rt.call(lambda: operator_rt.bus.topic("/cmd").publish(b"op %d" % n))
            hole = pack_header(Codec.RAW, 0, 1000, 2 * n)  # every other seq: holes
            trigger.put("rs/cmd", b"trigger", attachment=hole)
            viewer.put("rs/cmd", b"forged put", attachment=pack_header(Codec.RAW, 0, forged_id, n))
            stats = robot.bridge.stats()["durable"]["/cmd"]
            return stats["queries"] >= 10 and len(robot.got) >= 10

        wait_until(one_round, timeout_s=60.0)
        assert all(m.startswith(b"op ") for m in robot.got), set(robot.got)
        assert answered == []  # the robot never even asked the viewer
    finally:
        queryable.undeclare()
        trigger.close()
        viewer.close()
        operator.close()
        operator_rt.close()


def test_query_grants_no_reply_and_a_deny_of_publish_denies_replies() -> None:
    viewer = AccessRule("allow", ("query",), ("/cmd",), users=("viewer",))
    rules = acl(Security(rules=(viewer,)), "rs")["rules"]
    ingress = {m for r in rules if r["flows"] == ["ingress"] for m in r["messages"]}
    assert ingress == {"query"}  # no declare_queryable, no reply from the viewer
    deny = AccessRule("deny", ("publish",), ("/cmd",), interfaces=("wlan0",))
    denied = acl(Security(rules=(deny,)), "rs")["rules"]
    replies = [r for r in denied if "reply" in r["messages"]]
    assert [(r["flows"], r["key_exprs"]) for r in replies] == [(["ingress"], ["rs/@retain/cmd"])]
    assert all(r["permission"] == "deny" for r in denied)


# -- authentication per endpoint --------------------------------------------------------------


def test_tls_on_a_tcp_endpoint_beyond_loopback_refuses_to_start(tmp_path: Path) -> None:
    """Mutual TLS protects only tls/ and quic/ links: tcp/ beyond loopback needs usrpwd."""
    make_certificates(tmp_path, ("robot",))
    tls = {"ca": "ca.pem", "certificate": "robot.pem", "private_key": "robot.key"}
    for side in ("listen", "connect"):
        raw = {side: ["tcp/0.0.0.0:7447"], "security": {"tls": tls}}
        with pytest.raises(UserError, match=rf"{side}: tcp/0\.0\.0\.0:7447 is beyond loopback"):
            bridge_config(raw, base=tmp_path)
        tls_raw = {side: ["tls/0.0.0.0:7447"], "security": {"tls": tls}}
        assert bridge_config(tls_raw, base=tmp_path).security is not None  # tls/ is protected
    with pytest.raises(UserError, match=r"listen: quic/10\.0\.0\.1:1 is beyond loopback"):
        bridge_config({"listen": ["quic/10.0.0.1:1"]})  # no security at all, any protocol
    security = security_config({"tls": tls}, base=tmp_path)
    rt = Runtime()  # the Python API is judged the same way, at open
    with pytest.raises(UserError, match="TLS protects only tls/ and quic/"):
        Bridge(rt, BridgeConfig(listen=("tcp/0.0.0.0:7447",), security=security)).open()


@pytest.mark.parametrize("text", ["", "\n", "\n\n"])
def test_an_empty_users_file_refuses_to_start(tmp_path: Path, text: str) -> None:
    private(tmp_path / "users.txt", text)
    raw = {"listen": ["tcp/0.0.0.0:7447"], "security": {"users_file": "users.txt"}}
    with pytest.raises(UserError, match="has no `user:password` line: an empty users file"):
        bridge_config(raw, base=tmp_path)


@pytest.mark.parametrize(
    ("text", "line"),
    [("robot\n", 1), ("robot:secret\n:nouser\n", 2), ("robot:\n", 1), ("a:b\x00c\n", 1)],
)
def test_a_users_file_line_that_is_no_login_is_named(tmp_path: Path, text: str, line: int) -> None:
    private(tmp_path / "users.txt", text)
    with pytest.raises(UserError, match=rf"users\.txt:{line}: not a `user:password` line"):
        security_config({"users_file": "users.txt"}, base=tmp_path)


def test_a_users_file_in_a_folder_anyone_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    private(shared / "users.txt", "robot:secret\n")
    shared.chmod(0o777)
    with pytest.raises(UserError, match="a folder other users can write"):
        security_config({"users_file": "shared/users.txt"}, base=tmp_path)
    shared.chmod(0o1777)  # sticky or not: whoever can write it could have made the file
    with pytest.raises(UserError, match="a folder other users can write"):
        security_config({"users_file": "shared/users.txt"}, base=tmp_path)


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to make a file of another user")
def test_a_users_file_of_another_user_is_refused(tmp_path: Path) -> None:
    users = private(tmp_path / "users.txt", "robot:secret\n")
    os.chown(users, 65534, 65534)
    with pytest.raises(UserError, match="belongs to another user"):
        security_config({"users_file": "users.txt"}, base=tmp_path)


def test_a_password_files_problem_is_reported_with_the_launch_file_line_and_field(
    tmp_path: Path,
) -> None:
    from roboscale.errors import SpecErrors
    from roboscale.runtime.launch import load_launch_file

    private(tmp_path / "robot.pw", "\nsecret\n")  # line 1 empty
    launch = tmp_path / "robot.yaml"
    launch.write_text(
        "name: robot\n"
        "children:\n"
        "  - node: n\n"
        "    class: roboscale.runtime.node:Node\n"
        "bridge:\n"
        "  connect: [tcp/127.0.0.1:7447]\n"
        "security:\n"
        "  user: robot\n"
        "  password_file: robot.pw\n"
    )
    with pytest.raises(SpecErrors) as caught:
        load_launch_file(launch, Runtime())
    text = str(caught.value)
    assert "robot.yaml:9: security.password_file:" in text and "line 1" in text, text
    assert len(caught.value.errors) == 1, text


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_any_users_or_password_file_is_read_or_refused_with_its_file(data: bytes) -> None:
    """Fuzzed security files: a count of logins or a password, or a UserError naming the
    file; never a traceback, never an empty dictionary accepted."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "secret.txt"
        path.write_bytes(data)
        path.chmod(0o600)
        try:
            logins = check_users(path, "users_file")
        except UserError as e:
            assert "secret.txt" in str(e)
        else:
            lines = [x.removesuffix(b"\r") for x in data.split(b"\n")]
            assert logins == sum(1 for x in lines if x) >= 1
        try:
            password = read_password(path, "password_file")
        except UserError as e:
            assert "secret.txt" in str(e)
        else:
            assert password and "\n" not in password and "\r" not in password
