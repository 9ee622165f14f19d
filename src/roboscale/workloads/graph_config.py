"""The graph workload's node configs, as the lab writes them and agents read them (field
by field: `jsonfields.Fields`). Stdlib only: agents import it."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import TypedDict

from roboscale.backends.base import MessageKind
from roboscale.jsonfields import Fields


class ReplayFields(TypedDict):
    """OutputPlan's replay fields."""

    replay: str
    stream_encoding: str
    stream_topic: int
    rate_factor: float
    loop: bool


NO_REPLAY = ReplayFields(replay="", stream_encoding="", stream_topic=0, rate_factor=1.0, loop=False)


@dataclass(frozen=True)
class OutputPlan:
    """One publisher of a node, as its agent runs it (topics by index and name)."""

    stage: str
    pub: int
    topic: int
    name: str
    kind: MessageKind
    rate_hz: float
    messages: int
    inputs: tuple[int, ...]
    when: str
    work_ms: float
    work: str
    # A replayed publisher: the stream agents open (`stata` or a stream file the lab
    # wrote from a bag) and its serialization (the backend's `replay_encoding`), its
    # topic there, the speed-up and whether it loops.
    replay: str = ""
    stream_encoding: str = ""
    stream_topic: int = 0
    rate_factor: float = 1.0
    loop: bool = False

    @property
    def clocked(self) -> bool:
        return self.stage in ("publish", "timer")


@dataclass(frozen=True)
class InputPlan:
    topic: int
    name: str
    kind: MessageKind


@dataclass(frozen=True, kw_only=True)
class GraphNodeConfig:
    node: str
    outputs: tuple[OutputPlan, ...]
    inputs: tuple[InputPlan, ...]
    drain_s: float
    publisher_queue: int
    subscriber_queue: int
    seed: int = 0  # of the generated Stata streams

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: object) -> GraphNodeConfig:
        f = Fields(d, "config")
        return cls(
            node=f.text("node"),
            outputs=tuple(_output(o) for o in f.nested_list("outputs")),
            inputs=tuple(
                InputPlan(i.whole("topic"), i.text("name"), MessageKind.read(i.nested("kind")))
                for i in f.nested_list("inputs")
            ),
            drain_s=f.number("drain_s"),
            publisher_queue=f.whole("publisher_queue"),
            subscriber_queue=f.whole("subscriber_queue"),
            seed=f.whole("seed", 0),
        )


def _output(o: Fields) -> OutputPlan:
    return OutputPlan(
        stage=o.text("stage"),
        pub=o.whole("pub"),
        topic=o.whole("topic"),
        name=o.text("name"),
        kind=MessageKind.read(o.nested("kind")),
        rate_hz=o.number("rate_hz"),
        messages=o.whole("messages"),
        inputs=o.wholes("inputs"),
        when=o.text("when"),
        work_ms=o.number("work_ms"),
        work=o.text("work"),
        replay=o.text("replay", ""),
        stream_encoding=o.text("stream_encoding", ""),
        stream_topic=o.whole("stream_topic", 0),
        rate_factor=o.number("rate_factor", 1.0),
        loop=o.flag("loop", False),
    )
