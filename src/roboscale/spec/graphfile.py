"""Graph files: a robot's node graph in YAML, read and validated like specs.

A graph file declares nodes (each on a host index), what each publishes (paced
streams, or a bag topic replayed at its recorded times: `roboscale.bags`), relays
(input -> work -> output), fusions (publish when all, or any, of their inputs
arrived), timers (publish at a rate with the latest of their inputs),
pure subscriptions, and the paths whose end-to-end latency is measured. A topic may
have several publishers; they must agree on its payload. Every problem is a
SpecError naming the file, the line, the field, what is allowed and, for an unknown
node or topic, the nearest known name. Refused: a topic read but never published, a
cycle of message-triggered nodes (relays, fusions) that no timer breaks, a path whose
consecutive nodes are not joined by a topic.

Driver side only (it reads YAML): agents get the typed program the workload derives.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeGuard

from roboscale.backends.base import MessageKind
from roboscale.errors import SpecError, SpecErrors, UserError
from roboscale.spec.payloads import parse_payload, payload_kind
from roboscale.yamlfile import KeyPath, LineMap, dotted, line_for, load_yaml

GRAPH_VERSION = 1
MAX_HOST = 63
MAX_RATE_HZ = 10_000.0
MAX_WORK_MS = 10_000.0
# What one clocked output sends in a trial at most: workloads/graph.MAX_MESSAGES (the spec
# lies below the workloads; tests/test_malformed_inputs.py keeps the two equal).
MAX_OUTPUT_MESSAGES = 200_000
MAX_PUBLISHERS = 63  # message ids pack the publisher in 6 bits (ids stay in ROS 1's int32)
WORK_MODES = ("sleep", "busy")
WHEN = ("all", "any")
REPLAY_FIELDS = ("bag", "topic", "rate_factor", "loop")
MAX_RATE_FACTOR = 1000.0
# Names are matched in full (`re.fullmatch`: `$` would also match before a final newline).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
# Segments joined by single slashes: no empty segment (`a//b`, a trailing `/`).
_TOPIC = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:/[A-Za-z0-9_]+)*")
MAX_TOPIC = 128
_GRAPH_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")  # as a spec's name
NAME_RULE = "a letter or _, then up to 63 letters, digits or _"
TOPIC_RULE = (
    f"up to {MAX_TOPIC} characters: a letter or _, then letters, digits or _, in segments "
    "joined by single / (no empty segment, no / at the end)"
)
NODE_FIELDS = ("host", "publish", "relay", "fusion", "timer", "subscribe")
TOP_FIELDS = ("version", "name", "description", "message_types", "nodes", "paths")
STAGE_FIELDS = {
    "publish": ("topic", "rate_hz", "payload", "replay"),
    "relay": ("input", "output", "payload", "work_ms", "work"),
    "fusion": ("inputs", "output", "when", "payload", "work_ms", "work"),
    "timer": ("rate_hz", "inputs", "output", "payload", "work_ms", "work"),
}


@dataclass(frozen=True)
class Replay:
    """A publisher that sends one topic of a bag (or of the generated Stata streams) at
    its recorded times: the recorded message bytes, sped up by `rate_factor`."""

    bag: str  # `stata` or the bag's absolute path
    topic: str  # the topic in the bag
    rate_factor: float = 1.0
    loop: bool = False  # start again at the end of the bag, until the trial ends


@dataclass(frozen=True)
class Output:
    """Something a node publishes on a topic: a paced stream (`rate_hz`, no inputs), a
    relay (one input), a fusion (inputs, `when`) or a timer (`rate_hz` and inputs).
    `work_ms` of processing per message, slept or spent busy (`work`)."""

    stage: str  # publish, relay, fusion or timer
    topic: str
    payload: str
    payload_bytes: int
    rate_hz: float = 0.0
    inputs: tuple[str, ...] = ()
    when: str = "all"
    work_ms: float = 0.0
    work: str = "sleep"
    replay: Replay | None = None  # a publish entry that replays a bag topic

    @property
    def typed(self) -> bool:
        """Whether its payload is a type of the user's (.msg), not a replayed bag topic's."""
        return not self.replay and payload_kind(self.payload) == "custom"

    @property
    def triggered(self) -> bool:
        """Whether arrivals publish it (relay, fusion), not a clock (publish, timer)."""
        return self.stage in ("relay", "fusion")


@dataclass(frozen=True)
class GraphNode:
    name: str
    host: int
    outputs: tuple[Output, ...]
    subscribes: tuple[str, ...]  # pure subscriptions (sinks)

    @property
    def inputs(self) -> tuple[str, ...]:
        """Every topic the node reads, in first-seen order."""
        seen: dict[str, None] = dict.fromkeys(self.subscribes)
        for out in self.outputs:
            seen.update(dict.fromkeys(out.inputs))
        return tuple(seen)


@dataclass(frozen=True)
class GraphPath:
    name: str
    nodes: tuple[str, ...]
    topics: tuple[str, ...]  # topics[i] joins nodes[i] to nodes[i + 1]


@dataclass(frozen=True)
class Graph:
    name: str
    file: str
    nodes: tuple[GraphNode, ...]
    paths: tuple[GraphPath, ...]
    message_types: tuple[str, ...] = ()  # .msg files and folders (absolute) payloads name

    def publishers(self) -> list[tuple[GraphNode, Output]]:
        """Every (node, output), in file order: its index is the publisher id."""
        return [(n, o) for n in self.nodes for o in n.outputs]

    def topics(self) -> dict[str, str]:
        """Every topic and its payload, in first-published order."""
        return {o.topic: o.payload for _, o in self.publishers()}

    def kinds(self) -> dict[str, MessageKind]:
        """Every topic's message kind, as backends build it (a type of the user's whole)."""
        from roboscale.msgtypes import message_kind

        def kind(o: Output) -> MessageKind:
            if o.typed:
                return message_kind(self.message_types, o.payload)
            if o.replay:  # its recorded type (roboscale.bags)
                from roboscale.bags import replay_info, replay_kinds

                names = [topic.name for topic in replay_info(o.replay.bag).topics]
                return replay_kinds(o.replay.bag)[names.index(o.replay.topic)]
            return MessageKind(payload_kind(o.payload), o.payload_bytes)

        return {o.topic: kind(o) for _, o in self.publishers()}

    @property
    def hosts(self) -> int:
        return 1 + max(n.host for n in self.nodes)


def shown(value: Any, limit: int = 60) -> str:
    """A value's repr for a message, cut to `limit` characters (a number of hundreds of
    digits, a long string, are not echoed whole)."""
    if isinstance(value, int) and value.bit_length() > 4 * limit:
        return f"a number of {len(str(abs(value)))} digits"  # repr is bounded too
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 1]}… ({len(text)} characters)"


def printable(text: str) -> str:
    """Text with its unprintable characters escaped (a key ending in a newline stays on
    its error's line)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def is_name(value: Any) -> TypeGuard[str]:
    """Whether a node or path name is valid, checked in full."""
    return isinstance(value, str) and _NAME.fullmatch(value) is not None


def is_topic(value: Any) -> TypeGuard[str]:
    """Whether a topic name is valid, checked in full."""
    return isinstance(value, str) and len(value) <= MAX_TOPIC and bool(_TOPIC.fullmatch(value))


def nearest(name: str, known: list[str]) -> str:
    """'; did you mean X?' for the closest known name, or ''."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


class GraphReader:
    """Reads one graph file, collecting every error with its line."""

    def __init__(self, file: str, lines: LineMap) -> None:
        self.file = file
        self.base = Path(file).parent  # bags are named relative to the graph file
        self.lines = lines
        self.errors: list[SpecError] = []

    def fail(self, loc: KeyPath, problem: str) -> None:
        field = printable(dotted(loc))
        self.errors.append(SpecError(self.file, line_for(loc, self.lines), field, problem))

    def mapping(self, value: Any, loc: KeyPath, allowed: tuple[str, ...], what: str) -> bool:
        if not isinstance(value, dict):
            self.fail(loc, f"{what} is a mapping with {', '.join(allowed)}; got {shown(value)}")
            return False
        for key in value:
            if key not in allowed:
                hint = nearest(str(key), list(allowed)) or ";"
                self.fail((*loc, key), f"unknown field{hint} allowed: {', '.join(allowed)}")
        return True

    def number(self, value: Any, loc: KeyPath, low: float, high: float, what: str) -> float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not low <= value <= high:
            self.fail(loc, f"{what}, a number from {low:g} to {high:g}; got {shown(value)}")
            return low
        return float(value)

    def choice(self, value: Any, loc: KeyPath, allowed: tuple[str, ...]) -> str:
        if value not in allowed:
            self.fail(loc, f"one of {', '.join(allowed)}; got {shown(value)}")
            return allowed[0]
        return str(value)

    def topic(self, value: Any, loc: KeyPath) -> str:
        if not is_topic(value):
            self.fail(loc, f"a topic name: {TOPIC_RULE}; got {shown(value)}")
            return ""
        return value

    def topic_list(self, value: Any, loc: KeyPath, least: int) -> tuple[str, ...]:
        if not isinstance(value, list) or len(value) < least:
            self.fail(loc, f"a list of at least {least} topic name(s); got {shown(value)}")
            return ()
        names = tuple(self.topic(v, (*loc, i)) for i, v in enumerate(value))
        if len(set(names)) < len(names):
            self.fail(loc, f"a topic is listed twice in {list(names)}")
        return names

    def output(self, stage: str, d: Any, loc: KeyPath) -> Output | None:
        if not self.mapping(d, loc, STAGE_FIELDS[stage], f"a {stage}"):
            return None
        if stage == "publish" and "replay" in d:
            return self.replayed(d, loc)
        optional = ("work_ms", "work", "when", "replay")
        required = [f for f in STAGE_FIELDS[stage] if f not in optional]
        missing = [f for f in required if f not in d]
        if missing:
            has = ", ".join(STAGE_FIELDS[stage])
            if stage == "publish":
                has = "topic, rate_hz and payload, or topic and replay"
            self.fail(loc, f"missing {', '.join(missing)} (a {stage} has {has})")
            return None
        try:
            payload, size = parse_payload(d["payload"])
        except ValueError as e:
            self.fail((*loc, "payload"), str(e))
            payload, size = "text", 0
        if stage == "relay":
            inputs: tuple[str, ...] = (self.topic(d["input"], (*loc, "input")),)
        else:
            inputs = self.topic_list(d.get("inputs", []), (*loc, "inputs"), 2 * (stage == "fusion"))
        rated = stage in ("publish", "timer")
        key = "topic" if stage == "publish" else "output"
        return Output(
            stage=stage,
            topic=self.topic(d[key], (*loc, key)),
            payload=payload,
            payload_bytes=size,
            rate_hz=self.number(d["rate_hz"], (*loc, "rate_hz"), 0.1, MAX_RATE_HZ,
                                "messages per second") if rated else 0.0,
            inputs=inputs,
            when=self.choice(d.get("when", "all"), (*loc, "when"), WHEN),
            work_ms=self.number(d.get("work_ms", 0), (*loc, "work_ms"), 0, MAX_WORK_MS,
                                "processing time per message in ms"),
            work=self.choice(d.get("work", "sleep"), (*loc, "work"), WORK_MODES),
        )  # fmt: skip

    def replayed(self, d: Mapping[str, object], loc: KeyPath) -> Output | None:
        """A publish entry that replays a bag topic: its rate and sizes are the bag's."""
        for key in ("rate_hz", "payload"):
            if key in d:
                self.fail((*loc, key), "a replayed publisher sends the bag's messages at their "
                          "recorded times; remove rate_hz and payload (replay.rate_factor "
                          "speeds it up)")  # fmt: skip
        if "topic" not in d:
            self.fail(loc, "missing topic (a publish has topic, rate_hz and payload, or topic "
                      "and replay)")  # fmt: skip
            return None
        topic = self.topic(d["topic"], (*loc, "topic"))
        found = self.replay(d["replay"], (*loc, "replay"))
        if found is None:
            return None
        replay, msgtype, rate, size = found
        # Its payload's name says what it sends (not a type name: it is the recorded bytes).
        payload = f"replay of {replay.topic} ({msgtype})"
        return Output("publish", topic, payload, size, rate, replay=replay)

    def replay(self, d: Any, loc: KeyPath) -> tuple[Replay, str, float, int] | None:
        """The bag (read and checked now: `roboscale.bags`), its topic, the speed-up."""
        from roboscale.bags import replay_info
        from roboscale.workloads.replay import STATA

        if not self.mapping(d, loc, REPLAY_FIELDS, "a replay"):
            return None
        missing = [f for f in ("bag", "topic") if f not in d]
        if missing:
            self.fail(loc, f"missing {', '.join(missing)} (a replay has bag: stata or a bag "
                      "file relative to the graph file, topic: one of its topics, and "
                      "rate_factor, loop)")  # fmt: skip
            return None
        bag, topic = d["bag"], d["topic"]
        if not isinstance(bag, str) or not bag or "\0" in bag:
            self.fail((*loc, "bag"), "stata (generated MIT Stata Center streams) or a bag "
                      "relative to the graph file: a ROS 1 .bag, or a rosbag2 folder (sqlite3 "
                      f"or MCAP); got {shown(bag)}")  # fmt: skip
            return None
        source = bag if bag == STATA else os.path.abspath(self.base / bag)  # links kept
        try:
            info = replay_info(source)
        except UserError as e:
            self.fail((*loc, "bag"), str(e))
            return None
        factor = self.number(d.get("rate_factor", 1.0), (*loc, "rate_factor"), 0.001,
                             MAX_RATE_FACTOR, "a speed-up of the recorded timing")  # fmt: skip
        loop = d.get("loop", False)
        if not isinstance(loop, bool):
            self.fail((*loc, "loop"), f"true or false: start the bag again at its end; "
                      f"got {shown(loop)}")  # fmt: skip
        names = [t.name for t in info.topics]
        if topic not in names:
            hint = nearest(str(topic), names) or ";"
            self.fail((*loc, "topic"), f"the bag has no topic {shown(topic)}{hint} its topics: "
                      f"{', '.join(names)}")  # fmt: skip
            return None
        k = names.index(topic)
        rate = info.topic_rate_hz(k) * factor
        if rate > MAX_RATE_HZ:
            self.fail((*loc, "rate_factor"), f"{topic} at {rate:.0f} Hz; at most "
                      f"{MAX_RATE_HZ:g} Hz per publisher")  # fmt: skip
        replay = Replay(source, topic, factor, loop is True)
        return replay, info.topics[k].msgtype, rate, info.topic_bytes[k]

    def node(self, name: Any, d: Any, loc: KeyPath) -> GraphNode | None:
        if not is_name(name):
            self.fail(loc, f"a node name: {NAME_RULE}; got {shown(name)}")
            return None
        if d is None:
            d = {}
        if not self.mapping(d, loc, NODE_FIELDS, "a node"):
            return None
        host = d.get("host", 0)
        if isinstance(host, bool) or not isinstance(host, int) or not 0 <= host <= MAX_HOST:
            self.fail((*loc, "host"), f"a host index from 0 to {MAX_HOST}; got {shown(host)}")
            host = 0
        outputs: list[Output] = []
        for stage in STAGE_FIELDS:
            items = d.get(stage, [])
            if isinstance(items, dict):
                items = [items]  # one stage may be written without the list
            if not isinstance(items, list):
                self.fail((*loc, stage), f"a list of {stage} entries; got {shown(items)}")
                continue
            for i, item in enumerate(items):
                out = self.output(stage, item, (*loc, stage, i))
                if out is not None:
                    outputs.append(out)
        subs = self.topic_list(d.get("subscribe", []), (*loc, "subscribe"), 0)
        if not any(d.get(key) for key in (*STAGE_FIELDS, "subscribe")):
            self.fail(loc, "a node publishes, relays, fuses, runs a timer or subscribes")
        return GraphNode(name, host, tuple(outputs), subs)


def read_graph(path: Path) -> Graph:
    """Load and validate a graph file; SpecErrors lists every problem found."""
    data, lines = load_yaml(path, "graph file")
    r = GraphReader(str(path), lines)
    if not r.mapping(data, (), TOP_FIELDS, "a graph file"):
        raise SpecErrors(r.errors)
    if data.get("version", GRAPH_VERSION) != GRAPH_VERSION:
        r.fail(("version",), f"this roboscale reads graph version {GRAPH_VERSION}; "
               f"got {shown(data['version'])}")  # fmt: skip
    nodes_data = data.get("nodes")
    if not isinstance(nodes_data, dict) or not nodes_data:
        r.fail(("nodes",), "a mapping of node names to their host, publish, relay, fusion, "
               "timer and subscribe entries")  # fmt: skip
        raise SpecErrors(r.errors)
    nodes = [n for k, v in nodes_data.items() if (n := r.node(k, v, ("nodes", k))) is not None]
    name = data.get("name", path.stem)
    if "name" in data and not (isinstance(name, str) and _GRAPH_NAME.fullmatch(name)):
        r.fail(("name",), f"a short name of letters, digits, '.', '_' or '-'; got {shown(name)}")
    graph = Graph(str(name), str(path), tuple(nodes), ())
    if not r.errors:
        graph = _with_types(graph, data.get("message_types", []), path, r)
    from roboscale.spec.graphcheck import check_cycles, check_topics, read_paths

    if not r.errors:
        check_topics(graph, r)
    if not r.errors:
        check_cycles(graph, r)
    paths = read_paths(graph, data.get("paths", {}), r) if not r.errors else ()
    if r.errors:
        raise SpecErrors(r.errors)
    return Graph(graph.name, graph.file, graph.nodes, paths, graph.message_types)


def _with_types(graph: Graph, given: Any, path: Path, r: GraphReader) -> Graph:
    """The graph's .msg files (relative to it; absolute) loaded, and each payload naming a
    type sized: its sample's CDR bytes (roboscale/msgtypes.py)."""
    from roboscale.msgtypes import load_cached, message_kind

    given = given if isinstance(given, list) else [given]
    sources = tuple(os.path.abspath(path.parent / str(p)) for p in given)  # links kept
    named = [(n, o) for n, o in graph.publishers() if o.typed]
    if named and not sources:
        r.fail((*out_loc(*named[0]), "payload"), "names a message type, but the graph "
               "loads none; add message_types: [.msg files or folders beside it]")  # fmt: skip
        return graph
    try:
        if sources:
            load_cached(sources)
    except UserError as e:  # it names the .msg file, its line and field
        r.fail(("message_types",), str(e))
        return graph

    def sized(node: GraphNode, o: Output) -> Output:
        if not o.typed:
            return o
        try:
            return replace(o, payload_bytes=message_kind(sources, o.payload).size)
        except UserError as e:
            r.fail((*out_loc(node, o), "payload"), str(e))
            return o

    nodes = tuple(replace(n, outputs=tuple(sized(n, o) for o in n.outputs)) for n in graph.nodes)
    return replace(graph, nodes=nodes, message_types=sources)


def out_loc(node: GraphNode, out: Output) -> KeyPath:
    """Where an output is in the graph file: nodes.NAME.STAGE[i]."""
    i = [o for o in node.outputs if o.stage == out.stage].index(out)
    return ("nodes", node.name, out.stage, i)


@functools.lru_cache(maxsize=8)
def cached_graph(path: str) -> Graph:
    """A graph the spec loader validated, read again where trials are planned."""
    return read_graph(Path(path))
