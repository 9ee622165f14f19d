"""100,000 in-process nodes start and stop under one supervisor (counts only, no timing);
and what makes an idle node small: its queue and timer lists exist only once used."""

from __future__ import annotations

import pytest

from roboscale.runtime.bus import Inbox
from roboscale.runtime.executor import Runtime
from roboscale.runtime.node import Node, NodeRecipe
from roboscale.runtime.supervisor import ChildSpec, Supervisor

MANY = 100_000


class Counts:
    started = 0
    stopped = 0


class Idle(Node):
    def on_start(self) -> None:
        Counts.started += 1
        self.subscribe(f"/{self.name}/in", _ignore)

    def on_shutdown(self) -> None:
        Counts.stopped += 1


def _ignore(_msg: object) -> None:
    return None


async def start_and_stop(runtime: Runtime, n: int) -> tuple[int, int, int, int, int]:
    sup = Supervisor(runtime, "many", [ChildSpec(NodeRecipe(f"n{i}", Idle)) for i in range(n)])
    await sup.start_async()
    handles = [handle for _, handle in sup.which_children()]
    alive = sum(1 for h in handles if h.alive())
    rows = len(sup.status())
    await sup.stop_async()
    subscribed = sum(len(t.inboxes) for t in runtime.bus.topics.values())
    return alive, rows, sum(1 for h in handles if h.alive()), subscribed, len(runtime.bus.topics)


@pytest.mark.slow
def test_a_hundred_thousand_nodes_all_start_and_all_stop() -> None:
    Counts.started = Counts.stopped = 0
    runtime = Runtime()
    try:
        alive, rows, alive_after, subscribed, topics = runtime.run(start_and_stop(runtime, MANY))
    finally:
        runtime.close()
    assert Counts.started == MANY and alive == MANY
    assert rows >= MANY  # a status row for every child
    assert Counts.stopped == MANY and alive_after == 0
    assert subscribed == 0 and topics == MANY  # every subscription went with its node


def test_an_idle_node_has_no_queue_of_its_own_until_a_message_comes() -> None:
    runtime = Runtime()
    try:

        async def scenario() -> tuple[bool, bool, int, bool]:
            sup = Supervisor(runtime, "one_sup", [ChildSpec(NodeRecipe("one", Idle))])
            await sup.start_async()
            node = sup.child("one").node
            assert node is not None
            inbox: Inbox = node._inboxes[0]
            other = runtime.bus.inbox(runtime.bus.topic("/other"), 10, inbox.overflow, None)
            shared = inbox.items is other.items  # one empty queue for all idle inboxes
            no_lists = node._timers is None and node._services is None
            runtime.bus.topic("/one/in").publish("hello")
            queued = len(inbox.items)
            separate = inbox.items is not other.items and len(other.items) == 0
            await sup.stop_async()
            return shared, no_lists, queued, separate

        shared, no_lists, queued, separate = runtime.run(scenario())
    finally:
        runtime.close()
    assert shared and no_lists
    assert queued == 1 and separate  # the first message got a queue of the inbox's own
