"""The durable resequencer, fuzzed (#23 item 8): any interleaving of live samples, backlog
replies (of their owner or not), queries and restarts from a cursor keeps its promises:
each (publisher, seq) out at most once and in order, nothing out of an id its owner never
showed, no replay across a restart, bounded state. A fixed, small budget for CI."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from roboscale.runtime.durable import MAX_UNCONFIRMED, Resequencer

FUZZ = settings(max_examples=300, deadline=None)
WINDOW = 50
TOP = 2**64 - 1

seqs = st.one_of(
    st.integers(min_value=1, max_value=120),
    st.integers(min_value=1, max_value=TOP),
    st.just(TOP),
)
publishers = st.integers(min_value=1, max_value=40)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("live"), publishers, seqs),
        st.tuples(st.just("owned"), publishers, seqs),
        st.tuples(st.just("sync"), st.just(0), st.just(0)),
        st.tuples(st.just("done"), st.just(0), st.just(0)),
        st.tuples(st.just("restart"), st.just(0), st.just(0)),
    ),
    max_size=200,
)


@dataclass
class World:
    """A resequencer, its deliveries and the cursor it would have saved."""

    out: list[tuple[int, int]] = field(default_factory=list)
    cursor: dict[int, int] = field(default_factory=dict)
    owned: set[int] = field(default_factory=set)  # ids some owner's backlog showed

    def make(self, fresh: bool) -> Resequencer:
        return Resequencer(
            dict(self.cursor), fresh=fresh, deliver=self.deliver, gap=lambda *_: None,
            max_pending=300, window=WINDOW,
        )  # fmt: skip

    def deliver(self, publisher: int, seq: int, msg: Any) -> None:
        assert msg == (publisher, seq)
        self.out.append((publisher, seq))
        self.cursor[publisher] = seq  # handed over: committed


@FUZZ
@given(ops)
def test_any_interleaving_delivers_each_message_once_in_order(script: list[Any]) -> None:
    world = World()
    r = world.make(fresh=True)
    for kind, publisher, seq in script:
        if kind == "live":
            r.offer(publisher, seq, (publisher, seq))
        elif kind == "owned":
            world.owned.add(publisher)
            r.offer(publisher, seq, (publisher, seq), owned=True)
        elif kind == "sync":
            r.begin_sync()
        elif kind == "done":
            r.backlog_done()
        else:  # a restart: a new resequencer from what was handed over
            r = world.make(fresh=not world.cursor)
        unconfirmed = [s for s in r.streams.values() if not s.confirmed]
        assert len(unconfirmed) <= MAX_UNCONFIRMED
        assert all(len(s.pending) <= 1024 for s in unconfirmed)
    last: dict[int, int] = {}
    for publisher, seq in world.out:  # in order, once, across restarts too
        assert seq > last.get(publisher, 0), (publisher, seq)
        last[publisher] = seq
        assert publisher in world.owned  # only ids an owner's backlog showed


@FUZZ
@given(st.lists(st.tuples(publishers, seqs), max_size=300))
def test_live_samples_alone_never_skip_a_hole_of_a_confirmed_stream(
    live: list[tuple[int, int]],
) -> None:
    world = World(cursor={7: 10}, owned={7})
    r = world.make(fresh=False)
    r.backlog_done()
    for publisher, seq in live:
        r.offer(publisher, seq, (publisher, seq))
        if not r.syncing:  # the queries it asks for are answered with nothing
            r.begin_sync()
            r.backlog_done()
    assert all(p == 7 for p, _ in world.out)  # nothing of ids no owner showed
    # No hole skipped without its owner's word: 11, 12, 13... however far a seq jumped.
    assert [seq for _, seq in world.out] == list(range(11, 11 + len(world.out)))
