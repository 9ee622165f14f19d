"""The graph-wide checks of a graph file (`spec/graphfile.py` reads each node): every
topic read has a publisher and its publishers agree on the payload, no cycle of
message-triggered stages lacks a timer, and each measured path is joined by topics
from node to node. Each problem is reported through the file's reader, by line and field.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

from roboscale.spec.graphfile import (
    MAX_PUBLISHERS,
    Graph,
    GraphNode,
    GraphPath,
    GraphReader,
    is_name,
    nearest,
    out_loc,
    shown,
)
from roboscale.yamlfile import KeyPath


def check_topics(g: Graph, r: GraphReader) -> None:
    """Every topic read is published; publishers of a topic agree on its payload."""
    pubs = g.publishers()
    if len(pubs) > MAX_PUBLISHERS:
        r.fail(("nodes",), f"at most {MAX_PUBLISHERS} publishers (publish, relay, fusion and "
               f"timer entries) in a graph; got {len(pubs)}")  # fmt: skip
    payload: dict[str, tuple[str, int]] = {}
    for node, out in pubs:
        first = payload.setdefault(out.topic, (out.payload, out.payload_bytes))
        if first != (out.payload, out.payload_bytes):
            r.fail(
                (*out_loc(node, out), "payload"),
                f"topic {out.topic!r} is published as "
                f"{first[0]} ({first[1]} B) elsewhere; its publishers share one payload",
            )
    known = list(payload)
    for node in g.nodes:
        for topic, loc in _reads(node):
            if topic not in payload:
                r.fail(loc, f"topic {topic!r} has no publisher in the graph{nearest(topic, known)}")


def _reads(node: GraphNode) -> Iterator[tuple[str, KeyPath]]:
    for i, topic in enumerate(node.subscribes):
        yield topic, ("nodes", node.name, "subscribe", i)
    for out in node.outputs:
        loc = out_loc(node, out)
        for i, topic in enumerate(out.inputs):
            yield topic, (*loc, "input") if out.stage == "relay" else (*loc, "inputs", i)


def check_cycles(g: Graph, r: GraphReader) -> None:
    """Message-triggered stages (relays, fusions) must not feed back to themselves: with no
    timer on the loop, one message would circulate for ever."""
    edges: dict[str, set[str]] = {}
    for _, out in g.publishers():
        if out.triggered:
            for topic in out.inputs:
                edges.setdefault(topic, set()).add(out.topic)
    state: dict[str, int] = {}  # 1: on the current walk, 2: done

    def walk(topic: str, trail: list[str]) -> list[str] | None:
        state[topic] = 1
        for nxt in sorted(edges.get(topic, ())):
            if state.get(nxt) == 1:
                return [*trail[trail.index(nxt) :], nxt] if nxt in trail else [topic, nxt]
            if nxt not in state and (loop := walk(nxt, [*trail, nxt])):
                return loop
        state[topic] = 2
        return None

    for topic in list(edges):
        if topic not in state and (loop := walk(topic, [topic])):
            r.fail(("nodes",), "a cycle of relays/fusions with no timer: "
                   f"{' -> '.join(loop)}; a timer must break it (it publishes at its rate "
                   "with the latest input)")  # fmt: skip
            return


def read_paths(g: Graph, data: Any, r: GraphReader) -> tuple[GraphPath, ...]:
    if not isinstance(data, dict):
        r.fail(("paths",), f"a mapping of path names to lists of node names; got {shown(data)}")
        return ()
    by_name = {n.name: n for n in g.nodes}
    out = []
    for name, steps in data.items():
        loc: KeyPath = ("paths", name)
        if not is_name(name):
            r.fail(loc, f"a path name: a letter or _, then letters, digits or _; got {shown(name)}")
            continue
        if not isinstance(steps, list) or len(steps) < 2:
            r.fail(loc, f"a list of at least 2 node names, source to sink; got {shown(steps)}")
            continue
        # A step is a node's name: a list or mapping there is no name (and no dict key).
        bad = [i for i, s in enumerate(steps) if not isinstance(s, str) or s not in by_name]
        for i in bad:
            if isinstance(steps[i], str):
                hint = nearest(steps[i], list(by_name))
                r.fail((*loc, i), f"unknown node {shown(steps[i])}{hint}")
            else:
                r.fail((*loc, i), f"a step is a node's name; got {shown(steps[i])}")
        if bad:
            continue
        topics = _join(by_name, steps, loc, r)
        if topics is not None:
            out.append(GraphPath(str(name), tuple(steps), topics))
    return tuple(out)


def _join(
    by_name: dict[str, GraphNode], steps: list[str], loc: KeyPath, r: GraphReader
) -> tuple[str, ...] | None:
    """The topic that joins each step to the next: one the first publishes and the next
    reads; the first node must publish a clocked stream or timer, not only relay."""
    topics = []
    for i, (a, b) in enumerate(itertools.pairwise(steps)):
        reads = set(by_name[b].inputs)
        joined = [o.topic for o in by_name[a].outputs if o.topic in reads]
        if not joined:
            published = sorted({o.topic for o in by_name[a].outputs}) or ["nothing"]
            r.fail((*loc, i + 1), f"no such path: {b!r} reads no topic that {a!r} publishes "
                   f"({a!r} publishes {', '.join(published)})")  # fmt: skip
            return None
        topics.append(joined[0])
    return tuple(topics)
