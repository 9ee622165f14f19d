"""A host inventory: the user's real machines, reached by OpenSSH.

In the spirit of roslaunch's `<machine>` tags and of Ansible inventories:

```yaml
hosts:
  robot:                       # the name specs use
    address: 192.168.1.20      # or an alias of ~/.ssh/config
    user: pi                   # default: ssh's (config, then the local user)
    port: 22
    identity_file: ~/.ssh/id_ed25519   # default: ssh's (agent, config)
    ssh_config: ~/.ssh/config  # default: ssh's own
    workdir: .roboscale        # remote working directory, relative to the remote home
    python: python3            # the remote interpreter that makes roboscale's venv
    roles: [sender, roscore]   # what this host may run; empty: anything
    peer_address: 10.0.0.20    # what other hosts reach it at (default: address)
  laptop:
    address: laptop.local
```

Everything is validated before anything connects: an unknown field, a malformed
address or port, an unknown role, or a duplicate name is an error naming file,
line and field.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roboscale.errors import SpecError, SpecErrors
from roboscale.yamlfile import LineMap, load_yaml

ROLES = ("sender", "echoer", "router", "roscore", "dds")
FIELDS = (
    "address",
    "user",
    "port",
    "identity_file",
    "ssh_config",
    "known_hosts",
    "workdir",
    "python",
    "roles",
    "peer_address",
)
# Every rule is matched in full (`re.fullmatch`): `$` would also match before a final
# newline, and a user or workdir ending in one would reach ssh and the remote shell.
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,62}")
# A hostname, an IPv4 address, a bracket-free IPv6 address or an ssh_config alias.
_ADDRESS = re.compile(r"[A-Za-z0-9_.:%-]{1,253}")
_USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}", re.IGNORECASE)
# A remote path goes into a shell command (quoted there too): only plain path characters.
_REMOTE_PATH = re.compile(r"[A-Za-z0-9_./~+-]{1,200}")


@dataclass(frozen=True)
class InventoryHost:
    name: str
    address: str
    user: str | None = None
    port: int | None = None
    identity_file: Path | None = None
    ssh_config: Path | None = None
    known_hosts: Path | None = None
    workdir: str = ".roboscale"
    python: str = "python3"
    roles: tuple[str, ...] = ()
    # The address other hosts reach this one at (ROS_IP, Zenoh endpoints), when
    # `address` is an ssh_config alias or a jump host stands between.
    peer_address: str | None = None

    @property
    def data_address(self) -> str:
        return self.peer_address or self.address

    def may_run(self, role: str) -> bool:
        return not self.roles or role in self.roles


@dataclass(frozen=True)
class Inventory:
    path: Path
    hosts: dict[str, InventoryHost] = field(default_factory=dict)

    def host(self, name: str) -> InventoryHost:
        if name not in self.hosts:
            close = difflib.get_close_matches(name, list(self.hosts), n=1)
            guess = f"; did you mean {close[0]!r}?" if close else ""
            raise SpecError(
                str(self.path),
                None,
                "hosts",
                f"no host {name!r} in the inventory{guess} hosts: {', '.join(self.hosts)}",
            )
        return self.hosts[name]


def load_inventory(path: Path) -> Inventory:
    data, lines = load_yaml(path, "host inventory")
    file = str(path)
    if not isinstance(data, dict) or set(data) != {"hosts"} or not isinstance(data["hosts"], dict):
        raise SpecError(file, 1, "hosts", "expected a mapping 'hosts: {name: {address: ...}}'")
    if not data["hosts"]:
        raise SpecError(file, lines.get(("hosts",)), "hosts", "the inventory names no host")
    errors: list[SpecError] = []
    hosts: dict[str, InventoryHost] = {}
    for name, entry in data["hosts"].items():
        try:
            hosts[str(name)] = _host(name, entry, file, lines, path.parent)
        except SpecErrors as e:
            errors += e.errors
    if errors:
        raise SpecErrors(errors) if len(errors) > 1 else errors[0]
    return Inventory(path, hosts)


def _host(name: Any, entry: Any, file: str, lines: LineMap, base: Path) -> InventoryHost:
    where = ("hosts", name)
    errors: list[SpecError] = []

    def fail(key: str, problem: str) -> None:
        line = lines.get((*where, key), lines.get(where))
        errors.append(
            SpecError(file, line, f"hosts.{name}.{key}" if key else f"hosts.{name}", problem)
        )

    if not isinstance(name, str) or not _NAME.fullmatch(name):
        fail("", "a host name is a letter, then letters, digits, '.', '_' or '-' (up to 63)")
    if not isinstance(entry, dict):
        fail("", "a host is a mapping with at least 'address'")
        raise SpecErrors(errors)
    for key in entry:
        if key not in FIELDS:
            close = difflib.get_close_matches(str(key), FIELDS, n=1)
            guess = f"; did you mean '{close[0]}'?" if close else ""
            fail(str(key), f"unknown field{guess} allowed fields: {', '.join(FIELDS)}")
    values = _checked_values(entry, fail, base)
    if "address" not in entry:
        fail("address", "required: the host's name, IP address or ssh_config alias")
    if errors:
        raise SpecErrors(errors)
    return InventoryHost(name=str(name), **values)


def _checked_values(entry: dict[str, Any], fail: Any, base: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    text_rules = {
        "address": (_ADDRESS, "a hostname, IP address or ssh_config alias"),
        "peer_address": (_ADDRESS, "the hostname or IP address other hosts reach it at"),
        "user": (_USER, "a user name (letters, digits, '_', '.', '-')"),
        "workdir": (_REMOTE_PATH, "a path of letters, digits and '_./~+-', relative to home"),
        "python": (_REMOTE_PATH, "an interpreter name or path, such as python3"),
    }
    for key, (rule, allowed) in text_rules.items():
        if key in entry:
            value = entry[key]
            if not isinstance(value, str) or not rule.fullmatch(value) or value.startswith("-"):
                fail(key, f"expected {allowed} (got {value!r})")
            elif key == "workdir" and value.startswith("~") and value[:2] not in ("~", "~/"):
                fail(key, f"expected {allowed}, or under ~/ (another user's ~name is not "
                     f"allowed; got {value!r})")  # fmt: skip
            else:
                out[key] = value
    if "port" in entry:
        port = entry["port"]
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            fail("port", f"expected a TCP port, 1 to 65535 (got {port!r})")
        else:
            out["port"] = port
    for key in ("identity_file", "ssh_config", "known_hosts"):
        if key in entry:
            value = entry[key]
            if not isinstance(value, str) or not value:
                fail(key, f"expected a path to a local file (got {value!r})")
                continue
            if "\0" in value:
                fail(key, f"expected a path to a local file (got {value!r})")
                continue
            try:
                path = Path(value).expanduser()
            except RuntimeError:  # ~name of no user
                fail(key, f"expected a path to a local file; no home directory for {value!r}")
                continue
            path = path if path.is_absolute() else base / path
            problem = _local_file_problem(key, path)
            if problem:
                fail(key, problem)
            else:
                out[key] = path
    if "roles" in entry:
        roles = entry["roles"]
        if not isinstance(roles, list) or any(r not in ROLES for r in roles):
            fail("roles", f"expected a list of roles out of {', '.join(ROLES)} (got {roles!r})")
        else:
            out["roles"] = tuple(roles)
    return out


def _local_file_problem(key: str, path: Path) -> str:
    """Why ssh must not be given this file, or '': it is a regular file, and a private key
    is the user's alone (ssh itself refuses a key others can read, with a warning that
    comes too late: in the middle of a sweep), a config or known_hosts no one else can
    change."""
    try:
        st = path.stat()
    except OSError as e:
        return f"no such file: {path}" if isinstance(e, FileNotFoundError) else f"{path}: {e}"
    if not stat.S_ISREG(st.st_mode):
        return f"{path} is not a regular file; expected a local file"
    mode = stat.S_IMODE(st.st_mode)
    if key == "identity_file" and mode & 0o077:
        return (f"the private key {path} is readable by others (mode {mode:04o}); "
                f"allowed: readable by you alone: chmod 600 {path}")  # fmt: skip
    if key == "identity_file" and st.st_uid != os.getuid():
        return f"the private key {path} belongs to another user (uid {st.st_uid}); use your own"
    if mode & 0o022:
        return (f"{path} can be changed by others (mode {mode:04o}); allowed: writable by "
                f"you alone: chmod go-w {path}")  # fmt: skip
    return ""
