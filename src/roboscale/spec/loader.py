"""Load a YAML spec with line numbers and turn every problem into file:line: field: message."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from roboscale.backends import qos
from roboscale.errors import SpecError, SpecErrors, UserError
from roboscale.spec.facetrackcheck import check_facetrack
from roboscale.spec.graphfile import nearest
from roboscale.spec.schema import (
    ALLOWED,
    LOOPBACK,
    QUICK_RUNS,
    WORKLOADS,
    Spec,
    Sweep,
    either,
)
from roboscale.spec.specgraphs import with_graphs
from roboscale.validation import to_spec_errors as spec_errors
from roboscale.workloads.base import get_workload
from roboscale.workloads.replay import STATA
from roboscale.yamlfile import KeyPath, LineMap, line_for, load_yaml

Path_ = KeyPath


def _allowed_for(loc: Path_) -> str:
    key = ".".join(str(p) for p in loc if not isinstance(p, int))
    return ALLOWED.get(key, "")


def to_spec_errors(
    e: ValidationError, file: str, lines: LineMap, model: type[BaseModel], quick: bool = False
) -> SpecErrors:
    """One SpecError per problem, in file order (roboscale.validation). In a quick variant,
    a problem that lies inside the quick section is named by its full path there."""

    def shown_as(loc: Path_) -> tuple[Path_, LineMap]:
        if quick and any(("quick", *loc[:n]) in lines for n in range(1, len(loc) + 1)):
            return ("quick", *loc), lines
        return loc, _quick_lines(lines)

    return spec_errors(e, file, lines, model, allowed=_allowed_for, shown_as=shown_as)


def _merge(base: Mapping[str, object], over: Mapping[str, object]) -> dict[str, object]:
    out = dict(base)
    for key, value in over.items():
        current = out.get(key)
        if isinstance(value, dict) and isinstance(current, dict):
            out[key] = _merge(current, value)
        else:
            out[key] = value
    return out


def _quick_lines(lines: LineMap) -> LineMap:
    """Lines of the merged quick spec: the quick section's own lines win."""
    merged = {k: v for k, v in lines.items() if not (k and k[0] == "quick")}
    merged.update({k[1:]: v for k, v in lines.items() if k and k[0] == "quick"})
    return merged


def validate(data: Any, file: str, lines: LineMap, quick: bool = False) -> Spec:
    if not isinstance(data, dict):
        raise SpecError(file, 1, "", "a spec must be a mapping with at least name and sweep")
    try:
        return Spec.model_validate(data)
    except ValidationError as e:
        raise to_spec_errors(e, file, lines, Spec, quick) from None


def load_spec(path: Path, *, quick: bool = False, backends: list[str] | None = None) -> Spec:
    """Load and validate a spec; `quick: {...}` holds overrides applied with --quick.

    Both the full spec and its quick variant are validated, so a broken quick
    section is reported even when it is not used. `backends` (--backend) replace the
    spec's in the checks of what each backend can honour. A quick variant runs each
    trial once unless the spec or its quick section sets `trial.runs`.
    """
    data, lines = load_yaml(path)
    file = str(path)
    base = dict(data) if isinstance(data, dict) else data
    overrides = base.pop("quick", None) if isinstance(base, dict) else None
    if overrides is not None and not isinstance(overrides, dict):
        raise SpecError(file, lines.get(("quick",)), "quick", "must be a mapping of overrides")
    spec = check_replay(validate(base, file, lines), path, lines)
    check_workloads(spec, file, lines)
    check_facetrack(spec, file, lines)
    check_env(spec, path, lines)
    spec = with_graphs(spec, path, lines)
    spec = with_message_types(spec, path, lines)
    check_qos(spec, file, lines, backends)
    spec = with_inventory(spec, path, lines)
    if overrides is None:
        return quick_runs(spec) if quick else spec
    quick_lines = _quick_lines(lines)
    quick_spec = check_replay(
        validate(_merge(base, overrides), file, lines, quick=True), path, quick_lines
    )
    check_workloads(quick_spec, file, _quick_lines(lines))
    check_facetrack(quick_spec, file, _quick_lines(lines))
    check_env(quick_spec, path, _quick_lines(lines))
    quick_spec = with_graphs(quick_spec, path, _quick_lines(lines))
    quick_spec = with_message_types(quick_spec, path, _quick_lines(lines))
    check_qos(quick_spec, file, _quick_lines(lines), backends)
    quick_spec = with_inventory(quick_spec, path, _quick_lines(lines))
    return quick_runs(quick_spec) if quick else spec


def quick_runs(spec: Spec) -> Spec:
    """`spec` with QUICK_RUNS runs per trial, unless it sets `trial.runs` itself."""
    if "runs" in spec.trial.model_fields_set:
        return spec
    return spec.model_copy(update={"trial": spec.trial.model_copy(update={"runs": QUICK_RUNS})})


def check_replay(spec: Spec, path: Path, lines: LineMap) -> Spec:
    """A replay's source is read (a bag converted) before anything runs; its recorded rate
    scaled by each `sweep.rate_factor` becomes the sweep's rates, its mean size the payload.
    Without a replay, `sweep.rate_hz` is required and `rate_factor` has no meaning."""
    sw, file = spec.sweep, str(path)

    def error(field: str, problem: str) -> SpecError:
        key = tuple(field.split("."))
        return SpecError(file, line_for(key, lines) or lines.get(key[:1]), field, problem)

    if spec.replay in (None, STATA) and spec.replay_topics is not None:
        raise error("replay_topics", "chooses topics of a bag given as replay: (stata "
                    "replays both its streams); remove it or replay a bag")  # fmt: skip
    if spec.replay is None:
        if not sw.rate_hz:
            raise error("sweep.rate_hz", f"required field is missing; expected "
                        f"{ALLOWED['sweep.rate_hz']} (or a stream to replay: replay)")  # fmt: skip
        if sw.rate_factor != [1.0]:
            raise error("sweep.rate_factor", "applies with replay only; add replay: or remove it")
        return spec
    if sw.rate_hz:
        raise error("sweep.rate_hz", "a replay keeps its recorded timing; speed it up or slow "
                    "it down with sweep.rate_factor instead")  # fmt: skip
    if sw.payload != Sweep.model_fields["payload"].default:
        raise error("sweep.payload", "a replay sends its recorded messages; remove sweep.payload")
    if not all(get_workload(w).replays for w in sw.workload):
        able = [w for w in WORKLOADS if get_workload(w).replays]
        raise error("replay", f"workloads that replay a stream: {either(able)}; "
                    f"sweep.workload is [{', '.join(sw.workload)}]")  # fmt: skip
    from roboscale.bagread import UnknownTopics
    from roboscale.bags import replay_info

    # absolute, links not followed: a link loop or a link to a device is reported as such
    source = spec.replay if spec.replay == STATA else os.path.abspath(path.parent / spec.replay)
    chosen = _chosen_topics(spec.replay_topics or [], file, lines)
    try:
        info = replay_info(source, chosen)
    except UnknownTopics as e:
        k = chosen.index(e.missing[0])
        hint = nearest(e.missing[0], e.names) or ";"
        raise SpecError(file, line_for(("replay_topics", k), lines), f"replay_topics[{k}]",
                        f"the bag has no topic {e.missing[0]!r}{hint} its topics: "
                        f"{', '.join(e.names)}") from None  # fmt: skip
    except UserError as e:
        raise error("replay", str(e)) from None
    # A burst is sent back to back: one trial, whatever the factors (bags.ReplayInfo.burst).
    rates = [info.rate_hz] if info.burst else [info.rate_hz * f for f in sw.rate_factor]
    sweep = sw.model_copy(update={"rate_hz": rates, "payload": [(info.label, info.mean_bytes)]})
    return spec.model_copy(update={"sweep": sweep, "replay": source})


def _chosen_topics(names: list[str], file: str, lines: LineMap) -> tuple[str, ...]:
    """`replay_topics`, each a ROS topic name in full (no trailing newline or space) and
    named once."""
    from roboscale.bagread import TOPIC_NAME

    for k, name in enumerate(names):
        where = (file, line_for(("replay_topics", k), lines), f"replay_topics[{k}]")
        if not TOPIC_NAME.fullmatch(name):
            raise SpecError(*where, f"{name!r} is not a topic name; {ALLOWED['replay_topics']}")
        if name in names[:k]:
            raise SpecError(*where, f"{name} is named twice; name each topic once")
    return tuple(names)


def with_message_types(spec: Spec, path: Path, lines: LineMap) -> Spec:
    """Load the spec's .msg files (relative to it; absolute once loaded) and check that each
    payload naming a type finds it and can be sized: its bytes become its sample's CDR
    size. Every backend carries them (docs/usage.md, "Your own message types")."""
    from roboscale.spec.payloads import payload_kind

    sw, file = spec.sweep, str(path)
    named = [(i, p) for i, (p, _) in enumerate(sw.payload) if payload_kind(p) == "custom"]
    sources = [os.path.abspath(path.parent / p) for p in spec.message_types]  # links kept
    if named and not sources:
        raise SpecError(file, line_for(("sweep", "payload"), lines), "sweep.payload",
                        f"payload {named[0][1]!r} names a message type, but the spec loads "
                        "none; add message_types: [.msg files or folders]")  # fmt: skip
    if not sources:
        return spec
    from roboscale.msgtypes import load_cached, message_kind

    try:  # even when no payload names them: a broken file is reported at once
        load_cached(tuple(sources))
    except UserError as e:  # it names the .msg file, its line and field
        raise SpecError(file, line_for(("message_types",), lines), "message_types",
                        str(e)) from None  # fmt: skip
    payloads = list(sw.payload)
    for i, name in named:
        try:
            payloads[i] = (name, message_kind(tuple(sources), name).size)
        except UserError as e:
            line = line_for(("sweep", "payload", i), lines)
            raise SpecError(file, line, "sweep.payload", str(e)) from None
    sweep = sw.model_copy(update={"payload": payloads})
    return spec.model_copy(update={"sweep": sweep, "message_types": sources})


def check_qos(spec: Spec, file: str, lines: LineMap, backends: list[str] | None) -> None:
    """Every QoS setting the sweep asks for must be one that every chosen backend honours
    (its `qos` capability): a backend never silently runs with other QoS than asked."""
    from roboscale.backends.base import get_backend, known_backends

    chosen = backends or spec.sweep.backend
    for axis in qos.AXES:
        for value in getattr(spec.sweep, axis):
            if value is None:
                continue
            kind = qos.kind_of(axis, value)
            for name in chosen:
                honoured = get_backend(name).qos.get(axis, frozenset())
                if kind in honoured:
                    continue
                able = [b for b in known_backends() if kind in get_backend(b).qos.get(axis, ())]
                own = ", ".join(sorted(honoured)) or "no setting of it (only its own behaviour)"
                raise SpecError(
                    file,
                    line_for(("sweep", axis), lines),
                    f"sweep.{axis}",
                    f"backend {name!r} cannot honour {axis} {value}: it honours {own}; "
                    f"backends that honour {kind}: {', '.join(able) or 'none'}",
                )


def check_workloads(spec: Spec, file: str, lines: LineMap) -> None:
    """Axes that only some workloads use must be used by one of the listed workloads, so a
    sweep never silently ignores what was asked."""
    sw = spec.sweep
    named = ", ".join(sw.workload)
    users_of: dict[str, list[str]] = {}
    for name in WORKLOADS:
        for axis in get_workload(name).axes:
            users_of.setdefault(axis, []).append(name)
    for field, users in users_of.items():
        default = Sweep.model_fields[field].default
        if getattr(sw, field) != default and not set(users) & set(sw.workload):
            allowed = either(users)
            raise SpecError(
                file,
                line_for(("sweep", field), lines),
                f"sweep.{field}",
                f"applies to workload {allowed} only, but sweep.workload is [{named}]; "
                f"add {allowed} to sweep.workload or remove sweep.{field}",
            )


def profiles_path(spec: Spec, spec_path: Path) -> Path | None:
    """The spec's custom link profiles file, relative to the spec's own folder."""
    if spec.env.profiles is None:
        return None
    return (spec_path.parent / spec.env.profiles).resolve()


def with_inventory(spec: Spec, path: Path, lines: LineMap) -> Spec:
    """Check a spec's real machines before anything connects: the inventory loads, every
    machine is in it, and the sweep asks nothing of them that only emulated hosts do.
    The inventory's path becomes absolute."""
    env, sw, file = spec.env, spec.sweep, str(path)

    def fail(field: str, problem: str) -> SpecError:
        key = tuple(field.split("."))
        return SpecError(file, line_for(key, lines), field, problem)

    if env.inventory is None:
        if env.machines:
            raise fail("env.machines", "needs env.inventory, the file that describes them")
        return spec
    from roboscale.env.inventory import load_inventory
    from roboscale.yamlfile import check_regular

    inventory_path = (path.parent / env.inventory).resolve()
    if not inventory_path.exists():
        raise fail("env.inventory", f"{inventory_path}: no such file; allowed: a host inventory")
    try:  # a FIFO, a directory or a device is named as such, and never read
        check_regular(inventory_path, "host inventory")
    except UserError as e:
        raise fail("env.inventory", str(e)) from None
    inventory = load_inventory(inventory_path)
    if not env.machines:
        raise fail("env.machines", f"name the hosts of {env.inventory} the trials run on")
    for i, name in enumerate(env.machines):
        if name not in inventory.hosts:
            close = difflib.get_close_matches(name, list(inventory.hosts), n=1)
            guess = f"did you mean '{close[0]}'? " if close else ""
            raise SpecError(
                file,
                line_for(("env", "machines", i), lines),
                "env.machines",
                f"no host {name!r} in {env.inventory}; {guess}allowed: "
                f"{', '.join(inventory.hosts)}",
            )
    if max(sw.hosts) > len(env.machines):
        raise fail(
            "sweep.hosts",
            f"{max(sw.hosts)} hosts, but env.machines names {len(env.machines)}; allowed: "
            f"at most {len(env.machines)}",
        )
    emulated_only = [
        ("sweep.link", sw.link != [LOOPBACK], "the link is the real one"),
        ("sweep.cpu", sw.cpu != [None], "CPU quotas are for emulated hosts"),
        ("env.load_cpu", env.load_cpu > 0, "background load runs on emulated hosts"),
        ("env.load_net_mbit", env.load_net_mbit > 0, "background load runs on emulated hosts"),
    ]
    for field, asked, why in emulated_only:
        if asked:
            raise fail(field, f"not with real machines (env.inventory): {why}; remove it")
    resolved = env.model_copy(update={"inventory": str(inventory_path)})
    return spec.model_copy(update={"env": resolved})


def check_env(spec: Spec, path: Path, lines: LineMap) -> None:
    """Link names, the profiles file and the subnet's room, checked before anything runs."""
    if spec.env.load_net_mbit and min(spec.sweep.hosts) < 2:
        raise SpecError(
            str(path),
            line_for(("env", "load_net_mbit"), lines),
            "env.load_net_mbit",
            "a network load runs between two emulated hosts; allowed with sweep.hosts of 2 "
            "or more, or 0",
        )
    if spec.sweep.link == ["loopback"] and spec.sweep.hosts == [1] and spec.sweep.cpu == [None]:
        return
    if spec.env.inventory is not None:
        return  # real machines: with_inventory checks them
    from roboscale.env.hosts import host_addresses
    from roboscale.env.links import BUILTIN, load_profiles

    file = str(path)
    extra = profiles_path(spec, path)
    if extra is not None and not extra.exists():
        raise SpecError(
            file, lines.get(("env", "profiles")), "env.profiles", f"{extra}: no such file"
        )
    known = load_profiles(extra) if extra is not None else dict(BUILTIN)
    for i, name in enumerate(spec.sweep.link):
        if name != "loopback" and name not in known:
            close = difflib.get_close_matches(name, list(known), n=1)
            guess = f"did you mean '{close[0]}'? " if close else ""
            line = line_for(("sweep", "link", i), lines)
            allowed = ", ".join(["loopback", *known])
            raise SpecError(
                file,
                line,
                "sweep.link",
                f"unknown link profile {name!r}; {guess}allowed: {allowed}",
            )
    try:
        host_addresses(spec.env.subnet, max(spec.sweep.hosts))
    except UserError as e:
        raise SpecError(file, line_for(("sweep", "hosts"), lines), "sweep.hosts", str(e)) from None
