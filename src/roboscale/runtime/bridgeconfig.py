"""A bridge's configuration: the typed object the Python API takes and the validation of
a launch file's `bridge:` section, and the Zenoh session settings made of it."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roboscale.errors import UserError
from roboscale.runtime.names import check_name
from roboscale.runtime.security import Security, check_reach, security_config, security_settings
from roboscale.runtime.wire import DEFAULT_MAX_PAYLOAD, MAX_PAYLOAD_LIMIT
from roboscale.runtime.zenoh_config import (
    LOWLATENCY_MAX_PAYLOAD,
    TRANSPORTS,
    Settings,
    zenoh_config,
    zenoh_settings,
)

MODES = ("peer", "client")
DELIVERIES = ("at_most_once", "at_least_once")
FIELDS = (
    "mode", "listen", "connect", "export", "import", "durable", "retain", "prefix",
    "shared_memory", "express", "security", "delivery", "max_payload", "transport",
)  # fmt: skip
# What a durable topic's backlog puts on the wire, measured on the lowlatency transport
# (zenoh 1.10.2, loopback, raw sessions): each retained message is one reply, and a reply
# carries its key in full (`<prefix>/@retain<topic>`: a reply's key is not declared, as a
# publisher's is); it arrives while payload + 22 B header + key <= 49,118 B (keys of 21,
# 511 and 2,011 B), and a larger one is dropped and closes the link. A reply key of up to
# REPLY_KEY_ALLOWANCE bytes fits in the margin LOWLATENCY_MAX_PAYLOAD leaves (96 B left at
# 1,000); each byte of key beyond it takes one byte off what the durable export sends.
REPLY_KEY_ALLOWANCE = 1_000
# The backlog query's payload is 16 B per publisher cursor (backlog.pack_cursors); a query
# arrived with up to 49,135 B of payload (keys up to 2,011 B). At most this many cursors.
QUERY_CURSORS = LOWLATENCY_MAX_PAYLOAD // 16


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    mode: str = "peer"
    listen: tuple[str, ...] = ()
    connect: tuple[str, ...] = ()
    exports: tuple[str, ...] = ()
    imports: tuple[str, ...] = ()
    durable: tuple[str, ...] = ()  # exported: retained; imported: resumed from a cursor
    retain: int = 10_000
    prefix: str = "rs"
    shared_memory: bool = True  # off between emulated hosts: they share one kernel
    # Express: each message leaves at once instead of waiting in Zenoh's batch timer, as
    # rospy's tcp_nodelay; off trades latency for fewer packets at high rates.
    express: bool = True
    # Authentication and access control (runtime/security.py); None: none, loopback only.
    security: Security | None = None
    # Durable imports: the cursor moves when a message is handed to its callback
    # (at_most_once: a SIGKILL in between loses it) or when the callback returned
    # (at_least_once: it comes again to the next instance; nodes dedupe by sequence).
    delivery: str = "at_most_once"
    # The largest payload an imported topic takes (bytes); larger samples are malformed.
    max_payload: int = DEFAULT_MAX_PAYLOAD
    topic_max_payload: tuple[tuple[str, int], ...] = ()  # per imported topic, over the above
    # Zenoh's transport: "queued" (its default: a tx queue and batches, any size) or
    # "lowlatency" (the put writes the socket itself: about a fifth off a small message's
    # round trip; no fragmentation, so payloads are capped at LOWLATENCY_MAX_PAYLOAD, sent
    # and taken). Both peers of a link must ask for it: with a peer on the queued one,
    # zenoh 1.10 falls back to the queued transport (measured: nothing lost, no gain), and
    # this side keeps its cap.
    transport: str = "queued"

    def send_limit(self, reply_key: str | None = None) -> int | None:
        """The largest payload this bridge publishes, or None: no limit of its own.
        `reply_key`: a durable export's, whose messages are also sent as backlog replies
        that carry that key (REPLY_KEY_ALLOWANCE)."""
        if self.transport != "lowlatency":
            return None
        over = len(reply_key.encode()) - REPLY_KEY_ALLOWANCE if reply_key is not None else 0
        return LOWLATENCY_MAX_PAYLOAD - max(0, over)

    def query_cursors(self) -> int | None:
        """The most publisher cursors one backlog query carries, or None: no limit."""
        return QUERY_CURSORS if self.transport == "lowlatency" else None

    def payload_limits(self) -> dict[str, int]:
        """The largest payload of each imported topic."""
        limits = dict.fromkeys(self.imports, self.max_payload)
        limits.update(self.topic_max_payload)
        return limits


def bridge_config(
    raw: Mapping[str, Any], where: str = "bridge", base: Path | None = None
) -> BridgeConfig:
    """Validate a bridge section (launch file or dict); errors name `where` and the field.
    Relative paths of its `security` are taken from `base` (the launch file's folder)."""
    unknown = [key for key in raw if key not in FIELDS]
    if unknown:
        named = ", ".join(unknown_field(key) for key in unknown)
        raise UserError(f"{where}: unknown field {named}: allowed are {', '.join(FIELDS)}")
    mode = raw.get("mode", "peer")
    if mode not in MODES:
        raise UserError(f"{where}: mode: {mode!r} is not allowed: allowed are {', '.join(MODES)}")
    retain = raw.get("retain", 10_000)
    if not isinstance(retain, int) or isinstance(retain, bool) or retain < 1:
        raise UserError(f"{where}: retain: must be an integer >= 1, got {retain!r}")
    flags = {name: raw.get(name, True) for name in ("shared_memory", "express")}
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise UserError(f"{where}: {name}: true or false, got {value!r}")
    delivery = raw.get("delivery", "at_most_once")
    if delivery not in DELIVERIES:
        allowed = ", ".join(DELIVERIES)
        raise UserError(f"{where}: delivery: {delivery!r} is not allowed: allowed are {allowed}")
    prefix = raw.get("prefix", "rs")
    if not isinstance(prefix, str) or not prefix or "*" in prefix or prefix.strip("/") != prefix:
        raise UserError(f"{where}: prefix: a Zenoh key without '*' or outer '/', got {prefix!r}")
    transport = raw.get("transport", "queued")
    if transport not in TRANSPORTS:
        allowed = ", ".join(TRANSPORTS)
        raise UserError(f"{where}: transport: {transport!r} is not allowed: allowed are {allowed}")
    imports = _topics(raw, "import", where)
    most = LOWLATENCY_MAX_PAYLOAD if transport == "lowlatency" else MAX_PAYLOAD_LIMIT
    max_payload, topic_max_payload = _max_payload(raw.get("max_payload"), imports, where, most)
    config = BridgeConfig(
        mode=mode,
        listen=_endpoints(raw, "listen", where),
        connect=_endpoints(raw, "connect", where),
        exports=_topics(raw, "export", where),
        imports=imports,
        durable=_topics(raw, "durable", where),
        retain=retain,
        prefix=prefix,
        shared_memory=flags["shared_memory"],
        express=flags["express"],
        delivery=delivery,
        max_payload=max_payload,
        topic_max_payload=topic_max_payload,
        transport=transport,
        security=(
            security_config(raw["security"], f"{where}: security", base)
            if "security" in raw
            else None
        ),
    )
    check_reach(config.listen, config.connect, config.security, where)
    stray = set(config.durable) - set(config.exports) - set(config.imports)
    if stray:
        raise UserError(f"{where}: durable: {sorted(stray)[0]} is neither exported nor imported")
    return config


def nearest_field(key: object) -> str | None:
    """The bridge field an unknown `key` may have meant to be."""
    close = difflib.get_close_matches(str(key), FIELDS, n=1)
    return close[0] if close else None


def unknown_field(key: object) -> str:
    """`'key'`, and the field it may have meant to be: `'key' (did you mean 'field'?)`."""
    close = nearest_field(key)
    return f"{key!r} (did you mean {close!r}?)" if close else repr(key)


def _max_payload(
    raw: Any, imports: tuple[str, ...], where: str, most: int = MAX_PAYLOAD_LIMIT
) -> tuple[int, tuple[tuple[str, int], ...]]:
    """`max_payload: N` (bytes, every imported topic) or `{/topic: N, ...}` (those
    topics; the others keep the default), each at most `most` (the transport's cap)."""
    default = min(DEFAULT_MAX_PAYLOAD, most)
    if raw is None:
        return default, ()
    size = None if isinstance(raw, Mapping) else _payload_size(raw, f"{where}: max_payload", most)
    if not imports:  # it bounds what a bridge takes in; set here, it would bound nothing
        raise UserError(
            f"{where}: max_payload: bounds imported topics' payloads, but this bridge imports "
            "none: add them under import, or remove max_payload"
        )
    if size is not None:
        return size, ()
    limits = []
    for topic, size in raw.items():
        if topic not in imports:
            raise UserError(
                f"{where}: max_payload: {topic!r} is not an imported topic; "
                f"imported: {', '.join(imports)}"
            )
        limits.append((topic, _payload_size(size, f"{where}: max_payload: {topic}", most)))
    return default, tuple(limits)


def _payload_size(value: Any, where: str, most: int = MAX_PAYLOAD_LIMIT) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        why = (
            " with transport: lowlatency (Zenoh does not fragment it)"
            if most < MAX_PAYLOAD_LIMIT
            else ""
        )
        raise UserError(
            f"{where}: a number of bytes from 1 to {most}{why}, got {value!r} "
            "(or a mapping of imported topics to such numbers)"
        )
    return value


def _endpoints(raw: Mapping[str, Any], name: str, where: str) -> tuple[str, ...]:
    value = raw.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and "/" in v for v in value):
        raise UserError(f"{where}: {name}: a list of endpoints like tcp/127.0.0.1:7447")
    return tuple(value)


def _topics(raw: Mapping[str, Any], name: str, where: str) -> tuple[str, ...]:
    value = raw.get(name, [])
    if not isinstance(value, list):
        raise UserError(f"{where}: {name}: a list of topic names")
    try:
        return tuple(check_name(v) for v in value)
    except UserError as e:
        raise UserError(f"{where}: {name}: {e}") from None


def bridge_settings(config: BridgeConfig) -> Settings:
    """The session settings of a bridge (runtime.zenoh_config.zenoh_settings), with its
    authentication and access control."""
    settings = zenoh_settings(
        config.listen,
        config.connect,
        mode=config.mode,
        shared_memory=config.shared_memory,
        transport=config.transport,
    )
    if config.security is not None:
        settings += security_settings(config.security, config.prefix)
    return settings


def session_config(config: BridgeConfig) -> Any:
    """The zenoh.Config of a bridge's session."""
    return zenoh_config(bridge_settings(config))
