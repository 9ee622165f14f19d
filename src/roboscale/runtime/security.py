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

    @property
    def authenticates_peers(self) -> bool:
        """Incoming sessions must prove who they are (usrpwd dictionary or mTLS)."""
        return self.users_file is not None or (self.tls is not None and self.tls.mutual)

    @property
    def authenticates_self(self) -> bool:
        """Outgoing sessions prove who we are and who the peer is (login or TLS)."""
        return self.user is not None or (self.tls is not None and self.tls.certificate is not None)


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
    return Security(
        users_file=_file(mapping, "users_file", where, base),
        user=user,
        password_file=_file(mapping, "password_file", where, base),
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
    """Refuse a file other users could rewrite (to let themselves in) or, for a secret,
    read: the ssh rule for keys."""
    try:
        mode = path.stat().st_mode
    except OSError as e:
        raise UserError(f"{where}: cannot read {path}: {e.strerror}") from None
    if mode & 0o022:
        raise UserError(f"{where}: {path} is writable by other users: chmod go-w it")
    if secret and mode & 0o044:
        raise UserError(f"{where}: {path} is readable by other users: chmod 600 it")


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
    settings: Settings = []
    usrpwd: dict[str, str] = {}
    if security.users_file is not None:
        usrpwd["dictionary_file"] = str(security.users_file)
    if security.user is not None and security.password_file is not None:
        usrpwd["user"] = security.user
        usrpwd["password"] = _password(security.password_file)
    if usrpwd:
        settings.append(("transport/auth/usrpwd", json.dumps(usrpwd)))
    if security.tls is not None:
        settings.append(("transport/link/tls", json.dumps(_tls_settings(security.tls))))
    if security.rules:
        settings.append(("access_control", json.dumps(acl(security, prefix))))
    return settings


def _password(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"security: password_file: cannot read {path}: {e}") from None
    if not lines or not lines[0]:
        raise UserError(f"security: password_file: {path} is empty: the password is its line 1")
    return lines[0]


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
    and a writer only sends to peers whose subscription it saw. Deny rules deny the data."""
    every = f"{prefix}/**"
    if action == "liveliness":
        keys = [f"{prefix}/@alive/**"]
        return [("ingress", LIVELINESS, keys), ("egress", LIVELINESS, keys)]
    if action == "query":
        keys = [
            f"{prefix}/@retain/**" if t == "**" else f"{prefix}/@retain{t}" for t in rule.topics
        ]
        data: list[Grant] = [(flow, ("query", "reply"), keys) for flow in ("ingress", "egress")]
        declare: list[Grant] = [
            (flow, ("declare_queryable",), [f"{prefix}/@retain/**"])
            for flow in ("ingress", "egress")
        ]
    else:
        keys = [every if t == "**" else f"{prefix}{t}" for t in rule.topics]
        writes = action == "publish"
        data = [("ingress" if writes else "egress", ("put", "delete"), keys)]
        declare = [("egress" if writes else "ingress", ("declare_subscriber",), [every])]
    return data + declare if rule.permission == "allow" else data


def check_reach(
    listen: tuple[str, ...], connect: tuple[str, ...], security: Security | None, where: str
) -> list[str]:
    """Refuse endpoints beyond loopback with no authentication; with `insecure`, return
    them (the bridge logs and reports them when it opens)."""
    beyond = [e for e in (*listen, *connect) if not is_loopback(e)]
    if not beyond or (security is not None and security.insecure):
        return beyond
    missing = []
    if any(e in listen for e in beyond) and not (security and security.authenticates_peers):
        missing.append("users_file or mutual tls (who may connect)")
    if any(e in connect for e in beyond) and not (security and security.authenticates_self):
        missing.append("user and password_file, or tls (who we are)")
    if missing:
        raise UserError(
            f"{where}: {beyond[0]} is beyond loopback and the bridge has no authentication: "
            f"set security: {'; '.join(missing)}, or insecure: true to run unprotected",
            hint="docs/security.md shows the setup step by step",
        )
    return []


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
