"""Authenticated bridges and per-topic access control, on real Zenoh sessions (loopback)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from roboscale.backends.base import free_port
from roboscale.errors import UserError
from roboscale.runtime.bridge import Bridge, BridgeConfig, bridge_config
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.security import (
    AccessRule,
    Security,
    acl,
    check_reach,
    is_loopback,
    security_config,
    security_settings,
)
from roboscale.runtime.supervisor import ChildSpec, Supervisor
from roboscale.runtime.wire import Codec, pack_header
from roboscale.runtime.zenoh_config import zenoh_config, zenoh_settings

from ..conftest import require
from .conftest import private, wait_until


def test_loopback_endpoints() -> None:
    assert is_loopback("tcp/127.0.0.1:7447") and is_loopback("tls/[::1]:7447")
    assert is_loopback("tcp/localhost:7447") and is_loopback("tcp/127.3.0.1:1")
    assert not is_loopback("tcp/10.0.0.2:7447") and not is_loopback("tcp/0.0.0.0:7447")
    assert not is_loopback("tcp/robot.local:7447")


def test_a_bridge_beyond_loopback_without_authentication_refuses_to_start() -> None:
    with pytest.raises(UserError, match=r"tcp/0\.0\.0\.0:7447 is beyond loopback.*users_file"):
        bridge_config({"listen": ["tcp/0.0.0.0:7447"]})
    with pytest.raises(UserError, match=r"beyond loopback.*user and password_file"):
        Bridge(Runtime(), BridgeConfig(connect=("tcp/10.0.0.2:7447",))).open()
    assert check_reach(("tcp/127.0.0.1:1",), (), None, "bridge") == []
    insecure = Security(insecure=True)
    assert check_reach(("tcp/0.0.0.0:1",), (), insecure, "bridge") == ["tcp/0.0.0.0:1"]


def test_with_authentication_a_bridge_may_reach_beyond_loopback(tmp_path: Path) -> None:
    users = tmp_path / "users.txt"
    private(users, "robot:secret\n")
    raw = {"listen": ["tcp/0.0.0.0:7447"], "security": {"users_file": "users.txt"}}
    config = bridge_config(raw, base=tmp_path)
    assert config.security is not None and config.security.users_file == users


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"user": "robot"}, "user and password_file go together"),
        ({"users_file": "missing.txt"}, "users_file: .*missing.txt is not a readable file"),
        ({"insecure": "yes"}, "insecure: true or false, got 'yes'"),
        ({"tls": {"certificate": "users.txt", "private_key": "users.txt"}}, "tls: ca: required"),
        ({"tls": {"ca": "users.txt"}}, "tls: mutual TLS needs this process's certificate"),
        ({"acess": {}}, "unknown field 'acess': allowed are users_file"),
        ({"access": {"default": "maybe"}}, "access: default: 'maybe' is not allowed"),
        ({"access": {"rules": [{"allow": ["write"], "topics": ["/a"], "users": ["r"]}]}},
         r"access: rules\[0\]: allow: allowed actions are publish, subscribe"),
        ({"access": {"rules": [{"allow": ["publish"], "topics": ["/a"]}]}},
         r"access: rules\[0\]: name its subjects"),
        ({"access": {"rules": [{"allow": ["publish"], "deny": ["publish"], "topics": ["/a"]}]}},
         "access: rules.0.: exactly one of allow or deny"),
        ({"access": {"rules": [{"deny": ["publish"], "topics": ["bad name"], "users": ["r"]}]}},
         "access: rules.0.: topics: invalid topic name"),
    ],
)  # fmt: skip
def test_bad_security_sections_name_the_field(
    tmp_path: Path, raw: dict[str, Any], message: str
) -> None:
    private(tmp_path / "users.txt", "robot:secret\n")
    with pytest.raises(UserError, match="^launch.yaml: security: " + message):
        security_config(raw, "launch.yaml: security", tmp_path)


def test_secrets_other_users_could_read_or_files_they_could_rewrite_are_refused(
    tmp_path: Path,
) -> None:
    users = private(tmp_path / "users.txt", "robot:secret\n")
    users.chmod(0o644)
    with pytest.raises(UserError, match=r"users_file: .* is readable by other users: chmod 600"):
        security_config({"users_file": "users.txt"}, base=tmp_path)
    ca = private(tmp_path / "ca.pem", "not checked here\n")
    ca.chmod(0o664)
    with pytest.raises(UserError, match=r"tls: ca: .* is writable by other users"):
        security_config({"tls": {"ca": "ca.pem", "mutual": False}}, base=tmp_path)
    with pytest.raises(UserError, match=r"security: users_file: .* is readable by other users"):
        security_settings(Security(users_file=users), "rs")  # the Python API: at open


def test_rules_become_zenoh_access_control_per_subject() -> None:
    rule = AccessRule("allow", ("publish",), ("/cmd",), users=("robot",))
    section = acl(Security(rules=(rule,)), "rs")
    assert section["default_permission"] == "deny"
    assert section["subjects"] == [{"id": "s0", "usernames": ["robot"]}]
    grants = [(r["flows"][0], tuple(r["messages"]), r["key_exprs"]) for r in section["rules"]]
    assert grants == [
        ("ingress", ("put", "delete"), ["rs/cmd"]),
        ("egress", ("query",), ["rs/@retain/cmd"]),  # publishing answers retention queries
        ("ingress", ("reply",), ["rs/@retain/cmd"]),
        ("egress", ("declare_subscriber",), ["rs/**"]),
        ("ingress", ("declare_queryable",), ["rs/@retain/**"]),
    ]
    deny = AccessRule("deny", ("subscribe",), ("**",), cert_common_names=("viewer",))
    (only,) = acl(Security(rules=(deny,)), "rs")["rules"]  # a deny denies the data only
    assert (only["flows"], only["key_exprs"]) == (["egress"], ["rs/**"])


# -- real sessions ------------------------------------------------------------------------------


class Relay(Node):
    """Imports /cmd (what peers may write) and exports /state (what peers may read)."""

    def on_start(self) -> None:
        self.params["node"].append(self)
        self.state = self.publisher("/state")
        self.subscribe("/cmd", self.params["got"].append)


@dataclass
class Secured:
    rt: Runtime
    bridge: Bridge
    endpoint: str
    got: list[Any]

    def publish_state(self, n: int) -> None:
        self.rt.call(lambda: self.rt.bus.topic("/state").publish(b"state %d" % n))


@pytest.fixture
def secured_runtime(zenoh: None, tmp_path: Path) -> Iterator[Secured]:
    """A runtime whose bridge wants a login (usrpwd): robot may write /cmd and read /state,
    spy may only read /public; the default is deny."""
    private(tmp_path / "users.txt", "robot:secret\nspy:spypass\n")
    security = security_config(
        {
            "users_file": "users.txt",
            "access": {
                "rules": [
                    {"allow": ["publish"], "topics": ["/cmd"], "users": ["robot"]},
                    {"allow": ["subscribe"], "topics": ["/state"], "users": ["robot"]},
                    {"allow": ["subscribe"], "topics": ["/public"], "users": ["spy"]},
                ]
            },
        },
        base=tmp_path,
    )
    endpoint = f"tcp/127.0.0.1:{free_port()}"
    rt = Runtime().start()
    got: list[Any] = []
    nodes: list[Relay] = []
    recipe = NodeRecipe("relay", Relay, {"got": got, "node": nodes})
    rt.wait(Supervisor(rt, "s", [ChildSpec(recipe)]).start_async())
    config = BridgeConfig(
        listen=(endpoint,), exports=("/state",), imports=("/cmd",), security=security
    )
    bridge = Bridge(rt, config).open()
    try:
        yield Secured(rt, bridge, endpoint, got)
    finally:
        bridge.close()
        rt.close()


def peer(endpoint: str, extra: list[tuple[str, str]], mode: str = "peer") -> Any:
    import zenoh

    settings = zenoh_settings([], [endpoint], mode=mode) + extra
    if mode == "client":  # fail the open, not retry forever, when refused
        settings += [("connect/exit_on_failure", "true"), ("connect/timeout_ms", "2000")]
    return zenoh.open(zenoh_config(settings))


def login(user: str, password: str) -> list[tuple[str, str]]:
    return [("transport/auth/usrpwd", json.dumps({"user": user, "password": password}))]


def reader(session: Any, key: str) -> Any:
    import zenoh

    return session.declare_subscriber(key, zenoh.handlers.FifoChannel(1000))


def drained(sub: Any) -> list[bytes]:
    out = []
    while (sample := sub.try_recv()) is not None:
        out.append(sample.payload.to_bytes())
    return out


@pytest.mark.zenoh
def test_only_authenticated_allowed_sessions_publish_to_or_read_from_a_secured_topic(
    secured_runtime: Secured,
) -> None:
    import zenoh

    s = secured_runtime
    # Unauthenticated: the handshake is refused, the open fails (counted: failed opens).
    failed_opens = 0
    for extra in ([], login("robot", "wrong")):
        try:
            peer(s.endpoint, extra, mode="client").close()
        except zenoh.ZError:
            failed_opens += 1
    assert failed_opens == 2
    anonymous = peer(s.endpoint, [])  # a peer keeps trying in the background: never admitted
    robot = peer(s.endpoint, login("robot", "secret"))
    spy = peer(s.endpoint, login("spy", "spypass"))  # authenticated, but /cmd and /state denied
    try:
        wait_until(lambda: s.bridge.admitted == 2, timeout_s=30.0)  # robot and spy only
        readers = [reader(x, "rs/state") for x in (robot, spy, anonymous)]
        robot_read: list[bytes] = []
        writers = {spy: b"spy", anonymous: b"anonymous", robot: b"robot"}
        rounds = iter(range(1, 1_000_000))

        def one_round() -> bool:  # the denied tries, then the allowed ones
            seq = next(rounds)
            for session, name in writers.items():
                session.put("rs/cmd", name, attachment=pack_header(Codec.RAW, 0, 7, seq))
            s.publish_state(seq)
            robot_read.extend(drained(readers[0]))
            return len(s.got) >= 20 and len(robot_read) >= 20

        wait_until(one_round, timeout_s=30.0)
        assert set(s.got) == {b"robot"}  # nothing written by spy or anonymous came in
        assert drained(readers[1]) == [] and drained(readers[2]) == []  # nor went out to them
        stats = s.bridge.stats()
        assert stats["peers"]["admitted"] == 2 and stats["malformed"] == 0
        assert list(anonymous.info.peers_zid()) == []  # its session exists, its link does not
    finally:
        for session in (anonymous, robot, spy):
            session.close()


@pytest.mark.zenoh
def test_a_bridge_whose_login_is_refused_does_not_open(
    secured_runtime: Secured, tmp_path: Path
) -> None:
    private(tmp_path / "wrong.pw", "wrong\n")
    security = Security(user="robot", password_file=tmp_path / "wrong.pw")
    config = BridgeConfig(
        mode="client", connect=(secured_runtime.endpoint,), imports=("/state",), security=security
    )
    rt = Runtime().start()
    try:
        with pytest.raises(UserError, match=r"(?s)cannot open a Zenoh session.*does it accept"):
            Bridge(rt, config).open()
    finally:
        rt.close()
    assert secured_runtime.bridge.admitted == 0


def make_certificates(folder: Path, names: tuple[str, ...]) -> None:
    """A test CA and one certificate per name (its common name), for 127.0.0.1, by openssl."""
    require(shutil.which("openssl") is not None, "openssl is missing (make test installs it)")

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], cwd=folder, check=True, capture_output=True)

    key = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes")
    openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "1",
            "-subj", "/CN=roboscale-test-ca")  # fmt: skip
    for name in names:
        (folder / f"{name}.ext").write_text(
            "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n"
        )
        openssl(
            "req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}"
        )
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-out", f"{name}.pem", "-days", "1",
                "-extfile", f"{name}.ext")  # fmt: skip
        (folder / f"{name}.key").chmod(0o600)


def tls_of(folder: Path, name: str | None) -> list[tuple[str, str]]:
    cert = {} if name is None else {"certificate": f"{name}.pem", "private_key": f"{name}.key"}
    tls = {"ca": "ca.pem", "mutual": name is not None, **cert}
    return security_settings(security_config({"tls": tls}, base=folder), "rs")


@pytest.mark.zenoh
def test_mutual_tls_admits_certificates_of_the_ca_and_rules_go_by_common_name(
    zenoh: None, tmp_path: Path
) -> None:
    import zenoh as z

    make_certificates(tmp_path, ("robot", "viewer"))
    security = security_config(
        {
            "tls": {"ca": "ca.pem", "certificate": "robot.pem", "private_key": "robot.key"},
            "access": {"rules": [
                {"allow": ["publish"], "topics": ["/cmd"], "cert_common_names": ["robot"]},
                {"deny": ["publish"], "topics": ["/cmd"], "cert_common_names": ["viewer"]},
            ]},
        },
        base=tmp_path,
    )  # fmt: skip
    endpoint = f"tls/127.0.0.1:{free_port()}"
    rt = Runtime().start()
    got: list[Any] = []
    recipe = NodeRecipe("relay", Relay, {"got": got, "node": []})
    rt.wait(Supervisor(rt, "s", [ChildSpec(recipe)]).start_async())
    config = BridgeConfig(listen=(endpoint,), imports=("/cmd",), security=security)
    with Bridge(rt, config) as bridge:
        with pytest.raises(z.ZError):  # no client certificate: the TLS handshake fails
            peer(endpoint, tls_of(tmp_path, None), mode="client").close()
        robot = peer(endpoint, tls_of(tmp_path, "robot"))
        viewer = peer(endpoint, tls_of(tmp_path, "viewer"))  # a good certificate, denied /cmd
        try:
            wait_until(lambda: bridge.admitted == 2, timeout_s=30.0)
            rounds = iter(range(1, 1_000_000))

            def one_round() -> bool:  # the denied try, then the allowed one
                seq = next(rounds)
                for session, name in ((viewer, b"viewer"), (robot, b"robot")):
                    session.put("rs/cmd", name, attachment=pack_header(Codec.RAW, 0, 7, seq))
                return len(got) >= 20

            wait_until(one_round, timeout_s=30.0)
            assert set(got) == {b"robot"}
        finally:
            robot.close()
            viewer.close()
    rt.close()
