"""A ROS 1 topic mirrored into a durable runtime topic: the relay (runtime/rosrelay.py) as a
bridge from ROS 1 into the runtime's Zenoh durable topics.

    talker --/seq--> relay --(Zenoh, durable /seq)--> runtime nodes, a second relay, ...

Each message the relay takes in is published, as it came (its serialized bytes, the wire's
RAW codec), on a topic of a runtime of the relay's own; a bridge exports that topic as a
durable one: numbered, retained (the last `retain` messages) and replayed to any importer
from its cursor (runtime/durable.py, runtime/bridge.py). An importer that was down gets
what it missed, as with any durable topic of the runtime: a runtime node, or a relay of
another host that serves it to ROS subscribers there.

The relay's thread hands each message to the runtime's loop in order (one FIFO); nothing
from the wire is decoded here: ROS bodies stay bytes, and the importer types them.
"""

from __future__ import annotations

from collections.abc import Sequence

from roboscale.runtime.bridge import Bridge, bridge_config
from roboscale.runtime.executor import Runtime


class DurableMirror:
    """Publishes each relayed message on a durable runtime topic exported over Zenoh."""

    def __init__(
        self, topic: str, listen: Sequence[str], connect: Sequence[str], retain: int
    ) -> None:
        raw: dict[str, object] = {"export": [topic], "durable": [topic], "retain": retain}
        if listen:
            raw["listen"] = list(listen)
        if connect:
            raw["connect"] = list(connect)
        config = bridge_config(raw, "--durable")  # a bad endpoint or topic: a UserError
        self.mirrored = 0
        self.runtime = Runtime().start()
        try:
            self.topic = self.runtime.call(self.runtime.bus.topic, topic)
            self.bridge = Bridge(self.runtime, config).open()
        except BaseException:
            self.runtime.close()
            raise

    def __call__(self, body: bytes) -> None:
        """On the relay's thread: hand one message to the loop, in order."""
        self.mirrored += 1
        self.runtime.loop.call_soon_threadsafe(self.topic.publish, body)

    def close(self) -> None:
        self.bridge.close()
        self.runtime.close()
