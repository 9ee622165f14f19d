"""Launch files as pure data: the `LaunchSpec` tree of pydantic models that YAML launch
files and roslaunch XML both become, validated before anything runs (OTP's
`check_childspecs`), and the wording of what each field allows.

    name: robot                     # the root supervisor
    strategy: one_for_one           # one_for_one | one_for_all | rest_for_one
    intensity: 10                   # at most 10 restarts ...
    period_s: 5                     # ... within 5 s, then give up
    zygote: {preload: [zenoh]}      # optional: process children fork from a zygote
    ros: {master: private, params: {/robot/rate: 10}}   # optional: a ROS 1 master
    #   machines: {arm: {address: 10.0.0.7, user: pi, env_loader: /opt/ros/env.sh}}
    children:
      - node: camera                # an in-process node
        class: mypkg.camera:Camera  # package.module:Class (imported when built, never checked)
        params: {rate_hz: 30}
        restart: permanent          # permanent | transient | temporary
        shutdown_s: 5               # graceful stop, then kill; 0 = brutal_kill
        heartbeat_s: 1.0            # optional liveness; deadline_s: a callback deadline
      - process: detector           # a Python target in its own process (the zygote's)
        target: mypkg.detect:main
        config: {model: small}
        standby: true               # optional: restarts go to a warm standby (needs zygote;
                                    #   refused on a temporary child)
      - command: talker             # an OS process
        argv: [rosrun, pkg, talker]
        ready_line: "ready"         # optional regex on its output meaning "ready"
        restart_delay_s: 1          # wait before a restart (roslaunch's respawn_delay)
        required: true              # its end stops the whole tree (roslaunch's required)
        watchdog: {topic: /chatter, min_rate_hz: 5, window_s: 1, grace_s: 5}
      - ros_master: master          # a private rosmaster (a free port unless `port`)
      - ros_node: talker            # a ROS 1 node, run as roslaunch runs it
        pkg: demo
        type: talker.py
        machine: arm                # started there over ssh (runtime/rosremote.py)
        ns: /robot
        args: [--rate, "10"]
        remap: {chatter: /talk}
      - remote: arm                 # a node in another process or host (Zenoh liveliness)
        node_path: /arm/driver
      - supervisor: faces           # a sub-supervisor: same keys as the root
        children: [...]
    bridge: {listen: [tcp/127.0.0.1:7447], export: [/camera/image]}   # runtime/bridgeconfig.py
    cursors: {/camera/image: image.cursor}   # durable imports: where each resumes from
    security: {...}                 # the bridge's users, TLS and access rules
    chaos: {...}                    # runtime/chaos.py

`runtime/launchspec.py` reads a file into this tree (`read_launch`) and checks it whole.
Nothing here imports the user's code or needs a runtime.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    field_validator,
    model_validator,
)

from roboscale.runtime.names import NAME_RULE, is_valid_name
from roboscale.runtime.supervisor import Restart, Strategy

KINDS = ("node", "process", "command", "ros_master", "ros_node", "remote", "supervisor")
_TARGET = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")  # fullmatch: `$` allows a final newline
_LEAF = "a letter, then letters, digits or '_'"


def _importable(value: str, form: str) -> str:
    """A launch file's `module:name` to import (at build time, never from the wire)."""
    if not _TARGET.fullmatch(value):
        raise ValueError(f"{value!r} is not allowed; write {form}")
    return value


def _leaf_name(value: str) -> str:
    if not is_valid_name(value) or "/" in value:
        raise ValueError(f"invalid name {value!r}: {_LEAF}")
    return value


def _ros_name(value: str) -> str:
    if value not in ("", "/") and not is_valid_name(value.rstrip("/")):
        raise ValueError(f"invalid ROS name {value!r}: {NAME_RULE}")
    return value


def _regex(value: str | None) -> str | None:
    if value is not None:
        try:
            re.compile(value)
        except re.error as e:
            raise ValueError(f"{value!r} is not a regular expression ({e})") from None
    return value


class _Data(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=False)


# Strict: a boolean or a string is never a number; NaN and infinity are refused (a
# supervisor's default shutdown, infinity, is a default, not something written).
NonNegative = Annotated[float, Field(ge=0, strict=True, allow_inf_nan=False)]
Positive = Annotated[float, Field(gt=0, strict=True, allow_inf_nan=False)]
# Strict too: YAML's true/false (and yes/no, on/off) only; a string "yes" or a 1 is refused.
Flag = Annotated[bool, Field(strict=True)]


class Watchdog(_Data):
    """Liveness beyond exit: a child alive but failing one of these is restarted (`hung`)."""

    heartbeat_file: str | None = None  # a file the child must touch ...
    heartbeat_s: Positive | None = None  # ... at least this often
    topic: str | None = None  # a ROS 1 topic the child publishes
    min_rate_hz: Positive | None = None  # at least this rate over window_s
    window_s: Positive = 1.0
    max_silence_s: Positive | None = None  # no gap between messages longer than this
    grace_s: NonNegative = 5.0  # after each start, before the first check

    @model_validator(mode="after")
    def _complete(self) -> Watchdog:
        if (self.heartbeat_file is None) != (self.heartbeat_s is None):
            raise ValueError("heartbeat_file and heartbeat_s go together")
        on_topic = self.min_rate_hz is not None or self.max_silence_s is not None
        if on_topic != (self.topic is not None):
            raise ValueError("topic needs min_rate_hz or max_silence_s, and they need topic")
        if self.heartbeat_file is None and self.topic is None:
            raise ValueError("give heartbeat_file and heartbeat_s, or topic with a limit")
        if self.topic is not None:
            _ros_name(self.topic)
        return self


class _Child(_Data):
    restart: Restart = Restart.PERMANENT
    shutdown_s: NonNegative | None = 5.0  # None: as long as it takes (OTP's infinity)
    restart_delay_s: NonNegative = 0.0  # roslaunch's respawn_delay
    required: Flag = False  # its end stops the whole tree (roslaunch's required)


class NodeChild(_Child):
    node: str
    class_: str = Field(alias="class")
    params: dict[str, object] = {}  # any YAML values, handed to the node as given
    heartbeat_s: Positive | None = None
    deadline_s: Positive | None = None

    _n = field_validator("node")(_leaf_name)

    _t = field_validator("class_")(lambda value: _importable(value, "package.module:Class"))


class ProcessChild(_Child):
    process: str
    target: str
    config: dict[str, object] = {}
    env: dict[str, str] = {}
    ready_timeout_s: Positive = 10.0
    watchdog: Watchdog | None = None
    standby: Flag = False  # restarts handed to the zygote's warm standby of its target

    _n = field_validator("process")(_leaf_name)

    _t = field_validator("target")(lambda value: _importable(value, "package.module:function"))


class CommandChild(_Child):
    command: str
    argv: list[str] = Field(min_length=1)
    env: dict[str, str] = {}
    cwd: str | None = None
    ready_line: str | None = None
    ready_timeout_s: Positive = 10.0
    watchdog: Watchdog | None = None

    _n = field_validator("command")(_leaf_name)
    _r = field_validator("ready_line")(_regex)


class RosMasterChild(_Child):
    ros_master: str
    port: int = Field(
        0, ge=0, le=65535, strict=True
    )  # 0: a free port, chosen when the tree is built

    _n = field_validator("ros_master")(_leaf_name)


class RosNodeChild(_Child):
    ros_node: str
    pkg: str
    type: str
    ns: str = "/"
    args: list[str] = []
    remap: dict[str, str] = {}
    env: dict[str, str] = {}
    machine: str | None = None
    ready_timeout_s: Positive = 30.0
    watchdog: Watchdog | None = None

    _n = field_validator("ros_node")(_leaf_name)
    _ns = field_validator("ns")(_ros_name)

    @property
    def ros_name(self) -> str:
        return f"{self.ns.rstrip('/')}/{self.ros_node}"


class RemoteChild(_Child):
    remote: str
    node_path: str
    ready_timeout_s: Positive = 10.0

    _n = field_validator("remote")(_leaf_name)


class _Supervisor(_Data):
    strategy: Strategy = Strategy.ONE_FOR_ONE
    intensity: int = Field(1, ge=0, strict=True)
    period_s: Positive = 5.0
    children: list[Child] = Field(min_length=1)


class SupervisorChild(_Supervisor, _Child):
    supervisor: str
    shutdown_s: NonNegative | None = None  # None: as long as it takes (OTP's infinity)

    _n = field_validator("supervisor")(_leaf_name)


def child_kind(data: object) -> str | None:
    if isinstance(data, BaseModel):
        return next((k for k in KINDS if k in type(data).model_fields), None)
    kinds = [k for k in KINDS if isinstance(data, dict) and k in data]
    return kinds[0] if len(kinds) == 1 else None


Child = Annotated[
    Annotated[NodeChild, Tag("node")]
    | Annotated[ProcessChild, Tag("process")]
    | Annotated[CommandChild, Tag("command")]
    | Annotated[RosMasterChild, Tag("ros_master")]
    | Annotated[RosNodeChild, Tag("ros_node")]
    | Annotated[RemoteChild, Tag("remote")]
    | Annotated[SupervisorChild, Tag("supervisor")],
    Discriminator(
        child_kind,
        custom_error_type="child_kind",
        custom_error_message=f"each child has exactly one of: {', '.join(KINDS)}",
    ),
]


# What a child entry is once validated (the union `Child` validates into).
ChildModel = (
    NodeChild | ProcessChild | CommandChild | RosMasterChild | RosNodeChild | RemoteChild
    | SupervisorChild
)  # fmt: skip


def machine_problem(machine: str, machines: Mapping[str, object]) -> str:
    """Why a ROS node cannot run on `machine`; empty when it is declared. A machine at a
    local address runs its nodes here, any other over ssh (runtime/rosremote.py)."""
    if machine in machines:
        return ""
    return f"unknown machine {machine!r}; declared: {', '.join(sorted(machines)) or 'none'}"


def child_name(child: ChildModel) -> str:
    return str(getattr(child, child_kind(child) or "", ""))


# Each value reaches ssh's command line or the host's shell (quoted there too): plain
# characters only, and never a leading '-' that ssh would take for an option.
_ADDRESS = re.compile(r"[A-Za-z0-9_.:%][A-Za-z0-9_.:%-]{0,252}")
_USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}", re.IGNORECASE)
_REMOTE_FILE = re.compile(r"/[A-Za-z0-9_./+-]{0,250}")


def _matches(rule: re.Pattern[str], allowed: str) -> Callable[[str | None], str | None]:
    def check(value: str | None) -> str | None:
        if value is not None and not rule.fullmatch(value):
            raise ValueError(f"{value!r} is not allowed; allowed: {allowed}")
        return value

    return check


class Machine(_Data):
    """A host a ROS node may run on (roslaunch's <machine>); here if its address is local,
    else started over ssh (runtime/rosremote.py). A plain string is its address."""

    address: str
    user: str | None = None
    port: int | None = Field(None, ge=1, le=65535, strict=True)  # ssh's port (ssh-port)
    env_loader: str | None = None  # a script on the host: sets up ROS, then exec "$@"
    timeout_s: Positive = 10.0  # to connect (roslaunch's timeout)

    _a = field_validator("address")(_matches(_ADDRESS, "a host name, IP address or ssh alias"))
    _u = field_validator("user")(_matches(_USER, "a user name"))
    _e = field_validator("env_loader")(_matches(_REMOTE_FILE, "an absolute path on the host"))

    @model_validator(mode="before")
    @classmethod
    def _address_only(cls, data: object) -> object:
        return {"address": data} if isinstance(data, str) else data


class Ros(_Data):
    master: str = "private"  # private, or the URI of a running master (http://host:11311/)
    params: dict[str, object] = {}  # global names -> values, set before any node starts
    machines: dict[str, Machine] = {}  # roslaunch machine name -> where it is

    @field_validator("master")
    @classmethod
    def _master(cls, value: str) -> str:
        if value != "private" and not re.fullmatch(r"http://[\w.\-]+:\d{1,5}/?", value):
            raise ValueError(f"{value!r} is not allowed; allowed: private | http://host:port/")
        return value


class Zygote(_Data):
    preload: list[str] = ["zenoh"]


class LaunchSpec(_Supervisor):
    version: Literal[1] = 1
    name: str
    ros: Ros | None = None
    zygote: Zygote | None = None
    bridge: dict[str, object] | None = None  # runtime/bridgeconfig.py validates it
    cursors: dict[str, str] = {}  # durable import -> its cursor file (beside the launch file)
    security: dict[str, object] | None = None
    chaos: dict[str, object] | None = None  # runtime/chaos.py validates it

    _n = field_validator("name")(_leaf_name)


SupervisorChild.model_rebuild()
LaunchSpec.model_rebuild()

STANDBY = "true or false, on a process child of a launch file with a zygote: section"
ALLOWED = {
    "strategy": " | ".join(s.value for s in Strategy),
    "restart": " | ".join(r.value for r in Restart),
    "intensity": "a whole number >= 0",
    "children": f"a list of {', '.join(KINDS)} entries",
    "argv": "a non-empty list of strings (program, arguments)",
    "class": "package.module:Class",
    "ready_line": "a Python regular expression matched against each line of output",
    "env": "a mapping of variable names to strings",
    "params": "a mapping of parameter names to values",
    "config": "a mapping of names to values",
    "bridge": "a mapping: listen, connect, export, import, durable, ...",
    "name": f"a name: {_LEAF}",
    "required": "true or false",
    "standby": STANDBY,
}


def allowed_for(loc: tuple[str | int, ...]) -> str:
    """What the field at `loc` allows, for a validation error's message."""
    key = next((p for p in reversed(loc) if isinstance(p, str)), "")
    if key.endswith("_s") and key not in ALLOWED:
        return "a number of seconds"
    return ALLOWED.get(key, "")
