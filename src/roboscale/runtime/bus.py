"""The in-process bus: topics, bounded inboxes and durable subscriptions.

Delivery is direct: a published object is appended, as is, to the inbox of
every subscription of its topic, and the subscriber's callback receives that
same object (no serialization, no copy; publishers must not mutate a message
after publishing it). An inbox that received a message is drained in a later
loop turn (the bus's one drain callback per turn serves every inbox waiting), so
a publish never runs a subscriber's callback inside the publisher's own call
stack (an echo pair cannot recurse) and per-subscription order holds.
The bridge, which injects from a loop callback with no publisher on its stack,
collects the inboxes instead (`ready`) and drains them in the same loop turn
(plain imports; a durable import's resequenced messages drain a turn later); a message
for the only inbox of its topic, idle and inline, it hands over at once (`hand_now`):
the same delivery as that drain, with fewer steps of Python per message, which is what
a round trip between processes pays most for (docs/runtime.md, "Issue 26's echo goal").

A durable inbox is keyed by its subscriber's stable path, not by a node
instance: it stays subscribed while the node is down, buffers what arrives,
and hands it to the next instance in order. Every message on a topic carries a
sequence number; a durable inbox remembers the last one it handed over and
drops anything at or below it (duplicates, e.g. a bridge resending).
"""

from __future__ import annotations

import asyncio
import enum
from collections import deque
from collections.abc import Callable
from typing import Any

from roboscale.errors import UserError
from roboscale.runtime.callee import Callee, Mode
from roboscale.runtime.events import SupervisionEvent
from roboscale.runtime.names import check_name


class Overflow(enum.Enum):
    """What a full inbox does with one more message; every drop is counted."""

    DROP_OLDEST = "drop_oldest"  # keep the newest (ROS queue_size semantics)
    DROP_NEWEST = "drop_newest"  # keep what is queued, refuse the new message


# At most this many messages are handed over per drain before yielding the loop,
# so one busy subscription cannot starve the others.
DRAIN_BATCH = 64

# Every inbox's queue before its first message; never appended to (`Inbox.offer` swaps
# in a deque of the inbox's own first).
_NOTHING_QUEUED: deque[Any] = deque()


class Inbox:
    """The queue between a topic and one subscription's callback."""

    __slots__ = (
        "busy",
        "busy_seq",
        "deadline_s",
        "delivered",
        "dropped",
        "duplicates",
        "durable_key",
        "fn",
        "items",
        "last_seq",
        "limit",
        "loop",
        "mode",
        "node",
        "on_done",
        "on_handover",
        "overflow",
        "scheduled",
        "topic",
    )

    def __init__(
        self,
        topic: Topic,
        limit: int,
        overflow: Overflow,
        durable_key: str | None,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        if limit < 1:
            raise UserError(f"queue size of {topic.name} must be at least 1, got {limit}")
        self.topic = topic
        # The shared empty queue until the first message: an empty deque costs 760
        # bytes, and most of 100,000 idle subscriptions never queue anything.
        self.items: deque[tuple[int, Any]] = _NOTHING_QUEUED
        self.limit = limit
        self.overflow = overflow
        self.durable_key = durable_key
        self.loop = loop
        self.node: Callee | None = None
        self.fn: Callable[[Any], Any] | None = None
        self.mode = Mode.INLINE
        self.deadline_s: float | None = None
        self.scheduled = False
        self.busy: object = None  # the future of a callback still running, if any
        self.last_seq = 0
        # Called with the seq of each message handed over (the bridge commits remote cursors).
        self.on_handover: Callable[[int], None] | None = None
        # Called instead with the seq of each message whose callback returned (at-least-once
        # imports commit there: a message whose callback failed or was cut off comes again).
        self.on_done: Callable[[int], None] | None = None
        self.busy_seq = 0
        self.delivered = 0
        self.dropped = 0
        self.duplicates = 0

    def attach(
        self, node: Callee, fn: Callable[[Any], Any], mode: Mode, deadline_s: float | None
    ) -> None:
        self.node, self.fn, self.mode, self.deadline_s = node, fn, mode, deadline_s
        self.busy = None
        self._schedule()

    def detach(self) -> None:
        self.node = None
        self.fn = None
        self.busy = None

    def offer(self, seq: int, msg: Any, ready: list[Inbox] | None = None) -> None:
        """Queue one message; a sequence number at or below the last handed over is a duplicate.

        The inbox drains in a later loop turn, or, when `ready` is given, the caller (a loop
        callback with no publisher on its stack) drains the inboxes it collects there.
        """
        if seq <= self.last_seq and self.durable_key is not None:
            self.duplicates += 1
            return
        if ready is not None and self.hand_now(seq, msg):
            return
        items = self.items
        if items is _NOTHING_QUEUED:
            items = self.items = deque()
        if len(items) >= self.limit:
            self.dropped += 1
            self.topic.bus.note_overflow(self)
            if self.overflow is Overflow.DROP_NEWEST:
                return
            items.popleft()
        items.append((seq, msg))
        if not self.scheduled and self.node is not None and self.busy is None:
            self.scheduled = True
            if ready is None:
                self.topic.bus.schedule(self)
            else:
                ready.append(self)

    def hand_now(self, seq: int, msg: Any) -> bool:
        """Hand `msg` to the callback at once, as `drain` would in this loop turn, when
        nothing waits before it: this inbox is its topic's only one (another's callback
        could publish on the topic before that inbox is offered this message), holds
        nothing, is not due to drain, and its node takes inline callbacks now. False:
        the caller queues it."""
        node, fn = self.node, self.fn
        if (
            self.items
            or node is None
            or fn is None
            or self.busy is not None
            or self.scheduled
            or self.mode is not Mode.INLINE
            or len(self.topic.inboxes) != 1
        ):
            return False
        self.last_seq = seq
        self.delivered += 1
        if self.on_handover is not None:
            self.on_handover(seq)
        if node.deliver(fn, msg, self.deadline_s) and self.on_done is not None:
            self.on_done(seq)
        return True

    def _schedule(self) -> None:
        if self.items and not self.scheduled and self.node is not None and self.busy is None:
            self.scheduled = True
            self.topic.bus.schedule(self)

    def drain(self) -> None:
        """Hand queued messages to the callback, in order, while the node stays alive."""
        self.scheduled = False
        items = self.items
        for _ in range(DRAIN_BATCH):
            node = self.node
            if not items or node is None or self.busy is not None or self.fn is None:
                return
            seq, msg = items.popleft()
            # Handed over = delivered: the cursor moves before the callback runs, so a
            # message whose callback crashes its node is not handed to the next one.
            self.last_seq = seq
            self.delivered += 1
            if self.on_handover is not None:
                self.on_handover(seq)
            if self.mode is Mode.INLINE:
                if node.deliver(self.fn, msg, self.deadline_s) and self.on_done is not None:
                    self.on_done(seq)
                continue
            pending = node.run_callback(self.fn, self.mode, self.deadline_s, (msg,), "subscription")
            if pending is not None:
                self.busy, self.busy_seq = pending, seq
                pending.add_done_callback(self._callback_done)
        self._schedule()

    def _callback_done(self, fut: asyncio.Future[Any]) -> None:
        if self.busy is fut:  # not when the node failed meanwhile: it detached this inbox
            self.busy = None
            if self.on_done is not None and not fut.cancelled() and fut.exception() is None:
                self.on_done(self.busy_seq)
            self._schedule()


class Topic:
    """One named topic: its type and its inboxes."""

    __slots__ = ("bus", "inboxes", "msg_type", "name", "published", "seq", "taps")

    def __init__(self, bus: Bus, name: str) -> None:
        self.bus = bus
        self.name = name
        self.msg_type: type = object
        self.inboxes: list[Inbox] = []
        self.seq = 0
        self.published = 0
        # Called with each message published here (not injected): the bridge's exports.
        self.taps: list[Callable[[Any], None]] = []

    def declare_type(self, msg_type: type) -> None:
        if msg_type is object:
            return
        if self.msg_type is object:
            self.msg_type = msg_type
        elif self.msg_type is not msg_type:
            raise UserError(
                f"topic {self.name} carries {self.msg_type.__name__}, "
                f"not {msg_type.__name__}: use one message type per topic"
            )

    def publish(self, msg: Any) -> int:
        """Hand `msg` to every inbox and tap; return its sequence number on this topic."""
        seq = self.inject(msg)
        for tap in self.taps:
            tap(msg)
        return seq

    def inject(self, msg: Any, ready: list[Inbox] | None = None) -> int:
        """Hand `msg` to the local inboxes only (a message that came in over the bridge)."""
        self.seq += 1
        self.published += 1
        seq = self.seq
        for inbox in self.inboxes:
            inbox.offer(seq, msg, ready)
        return seq


class Bus:
    """All topics, durable inboxes and services of one runtime (one process)."""

    def __init__(
        self, loop: asyncio.AbstractEventLoop, emit: Callable[[SupervisionEvent], None]
    ) -> None:
        self.loop = loop
        self.emit = emit
        self.topics: dict[str, Topic] = {}
        self.durable: dict[str, Inbox] = {}
        self.services: dict[str, tuple[Callee, Callable[[Any], Any], Mode, float | None]] = {}
        # Inboxes to drain in the next loop turn, served by one loop callback per turn
        # (not one per message: at 100,000 messages a second, each is an allocation).
        self._ready: deque[Inbox] = deque()
        self._drain_scheduled = False

    def topic(self, name: str) -> Topic:
        topic = self.topics.get(name)
        if topic is None:
            name = check_name(name)
            topic = self.topics.get(name)
            if topic is None:
                topic = self.topics[name] = Topic(self, name)
        return topic

    def schedule(self, inbox: Inbox) -> None:
        """Drain `inbox` in a later loop turn, after those already waiting."""
        self._ready.append(inbox)
        if not self._drain_scheduled:
            self._drain_scheduled = True
            self.loop.call_soon(self._drain_ready)

    def _drain_ready(self) -> None:
        self._drain_scheduled = False
        ready = self._ready
        # Only those waiting now: an inbox a callback fills meanwhile drains next turn,
        # so a publish never runs a subscriber inside the publisher's own call stack.
        for _ in range(len(ready)):
            inbox = ready.popleft()
            try:
                inbox.drain()
            except BaseException:
                # An exception no callback guard stops (a late CallbackHung): the others
                # still drain, in a later turn.
                if ready and not self._drain_scheduled:
                    self._drain_scheduled = True
                    self.loop.call_soon(self._drain_ready)
                raise

    def inbox(self, topic: Topic, limit: int, overflow: Overflow, durable_key: str | None) -> Inbox:
        """A new inbox on `topic`, or the surviving durable inbox of `durable_key`."""
        if durable_key is not None:
            existing = self.durable.get(durable_key)
            if existing is not None:
                existing.limit, existing.overflow = limit, overflow
                return existing
        inbox = Inbox(topic, limit, overflow, durable_key, self.loop)
        topic.inboxes.append(inbox)
        if durable_key is not None:
            self.durable[durable_key] = inbox
        return inbox

    def remove_inbox(self, inbox: Inbox) -> None:
        inbox.detach()
        if inbox in inbox.topic.inboxes:
            inbox.topic.inboxes.remove(inbox)
        if inbox.durable_key is not None:
            self.durable.pop(inbox.durable_key, None)

    def note_overflow(self, inbox: Inbox) -> None:
        # An event on the 1st, 2nd, 4th, 8th... drop: visible without flooding subscribers.
        n = inbox.dropped
        if n & (n - 1) == 0:
            self.emit(
                SupervisionEvent(
                    kind="overflow",
                    supervisor="",
                    child=inbox.durable_key or (inbox.node.name if inbox.node else ""),
                    detail=f"{inbox.topic.name}: {n} dropped ({inbox.overflow.value}, "
                    f"limit {inbox.limit})",
                )
            )
