"""Authenticated sessions and per-topic access control for the bridge, on Zenoh's own
mechanisms (docs/security.md):

    security:
      users_file: users.txt        # who may connect: `user:password` lines (Zenoh usrpwd)
      user: robot                  # this process's own login, for the peers it connects to
      password_file: robot.pw      # its password, first line of the file
      tls:                         # tls/ endpoints (Zenoh TLS; mutual: mTLS)
        ca: ca.pem
        certificate: robot.pem
        private_key: robot.key
        mutual: true
      access:                      # Zenoh access_control, per topic and subject
        default: deny
        rules:
          - allow: [publish, subscribe]
            topics: [/cmd, /odom]
            users: [robot]
            cert_common_names: [robot]
      insecure: false              # true: beyond loopback without authentication (logged)

`security_config` validates a mapping (launch files) into `Security`, the typed object
the Python API takes. `security_settings` turns it into Zenoh session settings.
`check_reach` refuses a bridge that listens or connects beyond loopback with no
authentication configured.
"""

from __future__ import annotations

import ipaddress
import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roboscale.errors import UserError
from roboscale.runtime.names import check_name
from roboscale.runtime.zenoh_config import Settings

FIELDS = ("users_file", "user", "password_file", "tls", "access", "insecure")
TLS_FIELDS = ("ca", "certificate", "private_key", "mutual", "verify_name")
SUBJECT_FIELDS = ("users", "cert_common_names", "interfaces")
ZENOH_SUBJECT = {"users": "usernames", "cert_common_names": "cert_common_names",
                 "interfaces": "interfaces"}  # fmt: skip
PERMISSIONS = ("allow", "deny")

ACTIONS = ("publish", "subscribe", "query", "liveliness")
LIVELINESS = ("liveliness_token", "declare_liveliness_subscriber", "liveliness_query")
Grant = tuple[str, tuple[str, ...], list[str]]  # Zenoh ACL flow, messages, key expressions


@dataclass(frozen=True, slots=True)
class Tls:
    """Zenoh TLS on `tls/` endpoints; `mutual`: peers must show a certificate of `ca`."""

    ca: Path
    certificate: Path | None = None
    private_key: Path | None = None
    mutual: bool = True
    verify_name: bool = True  # the peer's certificate must name the host connected to


@dataclass(frozen=True, slots=True)
class AccessRule:
    """Allow or deny `actions` on `topics` ("**" for all) to the subjects named: a peer
    matches when it matches each kind given (user and common name and interface), any
    name within a kind. A matching deny wins over any allow (Zenoh's ACL)."""

    permission: str  # allow | deny
    actions: tuple[str, ...]
    topics: tuple[str, ...]
    users: tuple[str, ...] = ()
    cert_common_names: tuple[str, ...] = ()
    interfaces: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Security:
    users_file: Path | None = None
    user: str | None = None
    password_file: Path | None = None
    tls: Tls | None = None
    rules: tuple[AccessRule, ...] = ()
    default: str = "deny"  # for what no rule names, once there are rules
    insecure: bool = False

    def authenticates_peers_on(self, endpoint: str) -> bool:
        """Sessions coming in on `endpoint` must prove who they are: a login of the users
        file (usrpwd, any protocol), or, on tls/ and quic/ only, a certificate of the CA
        (mutual TLS protects no other protocol's links)."""
        if self.users_file is not None:
            return True
        return _is_tls(endpoint) and self.tls is not None and self.tls.mutual

    def authenticates_self_on(self, endpoint: str) -> bool:
        """Sessions going out on `endpoint` prove who we are: our login (usrpwd, any
        protocol), or, on tls/ and quic/ only, our certificate (mutual TLS)."""
        if self.user is not None:
            return True
        return _is_tls(endpoint) and self.tls is not None and self.tls.certificate is not None


TLS_PROTOCOLS = ("tls", "quic")  # the protocols Zenoh's TLS settings protect


def _is_tls(endpoint: str) -> bool:
    return endpoint.split("/", 1)[0].lower() in TLS_PROTOCOLS


def security_config(raw: Any, where: str = "security", base: Path | None = None) -> Security:
    """Validate a security section; relative paths are taken from `base` (the launch file's
    folder); errors name `where`, the field and what is allowed."""
    mapping = _mapping(raw, where, FIELDS)
    user, password_file = mapping.get("user"), mapping.get("password_file")
    if (user is None) != (password_file is None):
        raise UserError(f"{where}: user and password_file go together: give both or neither")
    if user is not None and (not isinstance(user, str) or not user or ":" in user):
        raise UserError(f"{where}: user: a login name without ':', got {user!r}")
    insecure = mapping.get("insecure", False)
    if not isinstance(insecure, bool):
        raise UserError(f"{where}: insecure: true or false, got {insecure!r}")
    default, rules = _access(mapping.get("access"), f"{where}: access")
    users_file = _file(mapping, "users_file", where, base)
    if users_file is not None:
        check_users(users_file, f"{where}: users_file")
    password_file = _file(mapping, "password_file", where, base)
    if password_file is not None:
        read_password(password_file, f"{where}: password_file")
    return Security(
        users_file=users_file,
        user=user,
        password_file=password_file,
        tls=_tls(mapping.get("tls"), f"{where}: tls", base),
        rules=rules,
        default=default,
        insecure=insecure,
    )


def _mapping(raw: Any, where: str, allowed: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise UserError(f"{where}: a mapping with fields {', '.join(allowed)}")
    unknown = sorted(str(k) for k in set(raw) - set(allowed))
    if unknown:
        raise UserError(f"{where}: unknown field {unknown[0]!r}: allowed are {', '.join(allowed)}")
    return raw


def _file(mapping: Mapping[str, Any], name: str, where: str, base: Path | None) -> Path | None:
    value = mapping.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise UserError(f"{where}: {name}: a file path, got {value!r}")
    path = Path(value) if base is None or Path(value).is_absolute() else base / value
    if not path.is_file():
        raise UserError(f"{where}: {name}: {path} is not a readable file")
    check_private(path, f"{where}: {name}", secret=name in SECRETS)
    return path


SECRETS = ("users_file", "password_file", "private_key")  # hold passwords or keys


def check_private(path: Path, where: str, *, secret: bool) -> None:
    """Refuse a file other users could rewrite (to let themselves in), or replace (it is
    theirs, or its folder is writable by others), or, for a secret, read: the ssh rule."""
    try:
        real = path.resolve(strict=True)
        info, folder = real.stat(), real.parent.stat()
    except (OSError, RuntimeError) as e:
        raise UserError(f"{where}: cannot read {path}: {getattr(e, 'strerror', e)}") from None
    if not stat.S_ISREG(info.st_mode):
        raise UserError(f"{where}: {path} is not a regular file")
    if info.st_uid not in (os.getuid(), 0):
        raise UserError(f"{where}: {path} belongs to another user (uid {info.st_uid})")
    if info.st_mode & 0o022:
        raise UserError(f"{where}: {path} is writable by other users: chmod go-w it")
    if folder.st_mode & 0o022:
        raise UserError(
            f"{where}: {path} is in {real.parent}, a folder other users can write (they could "
            "replace the file): keep it in a folder only you can write (chmod go-w the folder)"
        )
    if secret and info.st_mode & 0o044:
        raise UserError(f"{where}: {path} is readable by other users: chmod 600 it")


MAX_SECRET_BYTES = 1024 * 1024  # a users file of thousands of logins is still far below


def _read_secret(path: Path, where: str) -> list[str]:
    """The lines of a security file (split on \n only), bounded and without blocking."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise UserError(f"{where}: {path} is not a regular file")
            data = f.read(MAX_SECRET_BYTES + 1)
    except OSError as e:
        raise UserError(f"{where}: cannot read {path}: {e.strerror}") from None
    if len(data) > MAX_SECRET_BYTES:
        raise UserError(f"{where}: {path} is over {MAX_SECRET_BYTES} bytes")
    try:
        return data.decode("utf-8").split("\n")
    except UnicodeDecodeError as e:
        raise UserError(f"{where}: {path} is not UTF-8 text (byte {e.start})") from None


def _bad_character(text: str) -> bool:
    return any(ord(c) < 0x20 or ord(c) == 0x7F for c in text)


def check_users(path: Path, where: str) -> int:
    """The number of `user:password` lines of a users file; UserError naming the line of
    any other line, or if there is none (Zenoh turns usrpwd off for an empty dictionary:
    an empty file would let anyone in)."""
    logins = 0
    for n, line in enumerate(_read_secret(path, where), 1):
        line = line.removesuffix("\r")
        if not line:
            continue
        user, colon, password = line.partition(":")
        if not colon or not user or not password or _bad_character(line):
            raise UserError(
                f"{where}: {path}:{n}: not a `user:password` line (a name, ':', a password, "
                "no control characters)"
            )
        logins += 1
    if not logins:
        raise UserError(
            f"{where}: {path} has no `user:password` line: an empty users file lets anyone "
            "in (Zenoh turns authentication off), so the bridge refuses it"
        )
    return logins


def read_password(path: Path, where: str) -> str:
    """The password of a password file: its first line, not empty, no control characters."""
    lines = _read_secret(path, where)
    password = lines[0].removesuffix("\r")
    if not password:
        raise UserError(f"{where}: {path}:1: empty: the password is the file's line 1")
    if _bad_character(password):
        raise UserError(f"{where}: {path}:1: the password holds a control character")
    return password


def _tls(raw: Any, where: str, base: Path | None) -> Tls | None:
    if raw is None:
        return None
    mapping = _mapping(raw, where, TLS_FIELDS)
    flags = {k: mapping.get(k, True) for k in ("mutual", "verify_name")}
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise UserError(f"{where}: {name}: true or false, got {value!r}")
    ca = _file(mapping, "ca", where, base)
    if ca is None:
        raise UserError(f"{where}: ca: required, the CA certificate that signs the peers'")
    cert, key = (
        _file(mapping, "certificate", where, base),
        _file(mapping, "private_key", where, base),
    )
    if (cert is None) != (key is None):
        raise UserError(f"{where}: certificate and private_key go together")
    if flags["mutual"] and cert is None:
        raise UserError(f"{where}: mutual TLS needs this process's certificate and private_key")
    return Tls(ca, cert, key, mutual=flags["mutual"], verify_name=flags["verify_name"])


def _access(raw: Any, where: str) -> tuple[str, tuple[AccessRule, ...]]:
    if raw is None:
        return "deny", ()
    mapping = _mapping(raw, where, ("default", "rules"))
    default = mapping.get("default", "deny")
    if default not in PERMISSIONS:
        raise UserError(f"{where}: default: {default!r} is not allowed: allowed are allow, deny")
    rules = mapping.get("rules", [])
    if not isinstance(rules, list):
        raise UserError(f"{where}: rules: a list of rules")
    return default, tuple(_rule(r, f"{where}: rules[{i}]") for i, r in enumerate(rules))


def _rule(raw: Any, where: str) -> AccessRule:
    mapping = _mapping(raw, where, (*PERMISSIONS, "topics", *SUBJECT_FIELDS))
    given = [p for p in PERMISSIONS if p in mapping]
    if len(given) != 1:
        raise UserError(f"{where}: exactly one of allow or deny, with a list of actions")
    actions = _strings(mapping, given[0], where)
    bad = [a for a in actions if a not in ACTIONS]
    if bad or not actions:
        raise UserError(f"{where}: {given[0]}: allowed actions are {', '.join(ACTIONS)}")
    topics = _strings(mapping, "topics", where)
    if not topics:
        raise UserError(f"{where}: topics: a list of topic names, or ['**'] for all")
    try:
        topics = tuple(t if t == "**" else check_name(t) for t in topics)
    except UserError as e:
        raise UserError(f"{where}: topics: {e}") from None
    subjects = {k: _strings(mapping, k, where) for k in SUBJECT_FIELDS}
    if not any(subjects.values()):
        raise UserError(f"{where}: name its subjects: {', '.join(SUBJECT_FIELDS)}")
    return AccessRule(given[0], actions, topics, **subjects)


def _strings(mapping: Mapping[str, Any], name: str, where: str) -> tuple[str, ...]:
    value = mapping.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise UserError(f"{where}: {name}: a list of names")
    return tuple(value)


def security_settings(security: Security, prefix: str) -> Settings:
    """The Zenoh session settings of `security` for a bridge on key prefix `prefix`."""
    files = {
        "users_file": security.users_file,
        "password_file": security.password_file,
        "tls.ca": security.tls.ca if security.tls else None,
        "tls.certificate": security.tls.certificate if security.tls else None,
        "tls.private_key": security.tls.private_key if security.tls else None,
    }
    for name, path in files.items():
        if path is not None:
            check_private(path, f"security: {name}", secret=name.split(".")[-1] in SECRETS)
    if security.users_file is not None:
        check_users(security.users_file, "security: users_file")
    settings: Settings = []
    usrpwd: dict[str, str] = {}
    if security.users_file is not None:
        usrpwd["dictionary_file"] = str(security.users_file)
    if security.user is not None and security.password_file is not None:
        usrpwd["user"] = security.user
        usrpwd["password"] = read_password(security.password_file, "security: password_file")
    if usrpwd:
        settings.append(("transport/auth/usrpwd", json.dumps(usrpwd)))
    if security.tls is not None:
        settings.append(("transport/link/tls", json.dumps(_tls_settings(security.tls))))
    if security.rules:
        settings.append(("access_control", json.dumps(acl(security, prefix))))
    return settings


def _tls_settings(tls: Tls) -> dict[str, Any]:
    out: dict[str, Any] = {
        "root_ca_certificate": str(tls.ca),
        "enable_mtls": tls.mutual,
        "verify_name_on_connect": tls.verify_name,
    }
    if tls.certificate is not None and tls.private_key is not None:
        for side in ("listen", "connect"):
            out[f"{side}_certificate"] = str(tls.certificate)
            out[f"{side}_private_key"] = str(tls.private_key)
    return out


def acl(security: Security, prefix: str) -> dict[str, Any]:
    """Zenoh's access_control section: one subject per AccessRule and its Zenoh rules."""
    rules: list[dict[str, Any]] = []
    subjects: list[dict[str, Any]] = []
    policies: list[dict[str, Any]] = []
    for n, rule in enumerate(security.rules):
        ids: list[str] = []
        grants = [g for a in rule.actions for g in grants_of(a, rule, prefix)]
        for flow, messages, keys in grants:
            ids.append(f"r{n}-{len(ids)}")
            rules.append(
                {"id": ids[-1], "messages": list(messages), "flows": [flow],
                 "permission": rule.permission, "key_exprs": keys}
            )  # fmt: skip
        subject: dict[str, Any] = {"id": f"s{n}"}
        for field in SUBJECT_FIELDS:
            if getattr(rule, field):
                subject[ZENOH_SUBJECT[field]] = list(getattr(rule, field))
        subjects.append(subject)
        policies.append({"rules": ids, "subjects": [f"s{n}"]})
    return {
        "enabled": True,
        "default_permission": security.default,
        "rules": rules,
        "subjects": subjects,
        "policies": policies,
    }


def grants_of(action: str, rule: AccessRule, prefix: str) -> list[Grant]:
    """What an action means in Zenoh ACL messages (ingress: from the subject to this bridge,
    egress: from this bridge to it). Data is checked per topic key. Declarations are allowed
    on the whole prefix (they carry no data): a bridge subscribes to `<prefix>/**` once,
    and a writer only sends to peers whose subscription it saw. Deny rules deny the data.

    - publish: the subject puts on the topic, and answers this bridge's retention queries
      of it (a backlog reply is a message of the topic, placed in its durable importers);
    - subscribe: this bridge puts to the subject;
    - query: the subject queries this bridge's retention and gets its replies, nothing
      more: it never answers a retention query, so it places nothing in an importer;
    - liveliness: tokens and their subscriptions under `<prefix>/@alive/`.
    """
    every = f"{prefix}/**"
    if action == "liveliness":
        keys = [f"{prefix}/@alive/**"]
        return [("ingress", LIVELINESS, keys), ("egress", LIVELINESS, keys)]
    topics = [every if t == "**" else f"{prefix}{t}" for t in rule.topics]
    retained = [
        f"{prefix}/@retain/**" if t == "**" else f"{prefix}/@retain{t}" for t in rule.topics
    ]
    data: list[Grant]
    declare: list[Grant]
    if action == "query":  # it asks, we answer
        data = [("ingress", ("query",), retained), ("egress", ("reply",), retained)]
        declare = [("egress", ("declare_queryable",), [f"{prefix}/@retain/**"])]
    elif action == "publish":  # it puts, and answers what we ask of its retention
        data = [
            ("ingress", ("put", "delete"), topics),
            ("egress", ("query",), retained),
            ("ingress", ("reply",), retained),
        ]
        declare = [
            ("egress", ("declare_subscriber",), [every]),
            ("ingress", ("declare_queryable",), [f"{prefix}/@retain/**"]),
        ]
    else:  # subscribe: we put to it
        data = [("egress", ("put", "delete"), topics)]
        declare = [("ingress", ("declare_subscriber",), [every])]
    return data + declare if rule.permission == "allow" else data


def check_reach(
    listen: tuple[str, ...], connect: tuple[str, ...], security: Security | None, where: str
) -> list[str]:
    """Refuse an endpoint beyond loopback that is not authenticated, each judged on its own
    protocol; with `insecure`, return them (the bridge logs and reports them when it opens)."""
    beyond = [e for e in (*listen, *connect) if not is_loopback(e)]
    if not beyond or (security is not None and security.insecure):
        return beyond
    for endpoint in listen:
        if endpoint in beyond and not (security and security.authenticates_peers_on(endpoint)):
            need = "users_file or mutual tls" if _is_tls(endpoint) else "users_file"
            _unprotected(where, "listen", endpoint, f"{need} (who may connect)")
    for endpoint in connect:
        if endpoint in beyond and not (security and security.authenticates_self_on(endpoint)):
            need = "user and password_file" + (", or tls with a certificate" * _is_tls(endpoint))
            _unprotected(where, "connect", endpoint, f"{need} (who we are)")
    return []


def _unprotected(where: str, side: str, endpoint: str, need: str) -> None:
    tls_note = "" if _is_tls(endpoint) else " (TLS protects only tls/ and quic/ endpoints)"
    raise UserError(
        f"{where}: {side}: {endpoint} is beyond loopback and the bridge does not authenticate "
        f"its sessions{tls_note}: set security: {need}, or insecure: true to run unprotected",
        hint="docs/security.md shows the setup step by step",
    )


def is_loopback(endpoint: str) -> bool:
    """tcp/127.0.0.1:7447, tls/[::1]:7447, tcp/localhost:7447 are loopback."""
    address = endpoint.split("/", 1)[-1].split("#", 1)[0]
    host = address.rsplit(":", 1)[0].strip("[]")
    if host == "localhost" or endpoint.startswith("unixsock-stream/"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve anywhere
