"""Node configs read field by field: a field of another type or a missing one is an error
naming it, and whatever JSON an agent is handed is read or refused that way."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from roboscale.backends.base import MessageKind
from roboscale.jsonfields import FieldError, Fields
from roboscale.workloads.echo import EchoConfig

STREAM = {
    "kind": {"kind": "text", "size": 11}, "rate_hz": 100, "messages": 10, "warmup": 2,
    "drain_s": 1.0, "publisher_queue": 10, "subscriber_queue": 10, "wait_for_match": True,
    "match_timeout_s": 5.0,
}  # fmt: skip
ECHO = {**STREAM, "pair": 0, "topic_out": "a", "topic_back": "b"}


def test_a_config_reads_back_as_written() -> None:
    cfg = EchoConfig.from_dict(ECHO)
    assert cfg.kind == MessageKind("text", 11) and cfg.rate_hz == 100.0 and cfg.seed == 0
    assert EchoConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"pair": "0"}, r"config.pair: '0' is not a whole number"),
        ({"rate_hz": True}, r"config.rate_hz: True is not a number"),
        ({"kind": {"kind": "text", "size": 1.5}}, r"config.kind.size: 1.5 is not a whole"),
        ({"kind": ["text"]}, r"config.kind: must be a JSON object"),
        ({"stream_topics": ["a", 1]}, r"config.stream_topics: .* is not a list of strings"),
        ({"stream_kinds": [{"kind": "text"}]}, r"config.stream_kinds\[0\].size: missing"),
    ],
)
def test_a_wrong_field_is_named(change: dict[str, object], message: str) -> None:
    with pytest.raises(FieldError, match=message):
        EchoConfig.from_dict({**ECHO, **change})


def test_a_missing_field_is_named() -> None:
    with pytest.raises(FieldError, match=r"config.topic_back: missing"):
        EchoConfig.from_dict({k: v for k, v in ECHO.items() if k != "topic_back"})
    assert Fields({}, "x").text("replay", "") == ""


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(sorted(ECHO)), JSON, max_size=6))
def test_fuzzed_configs_are_read_or_refused_clearly(change: dict[str, object]) -> None:
    try:
        EchoConfig.from_dict({**ECHO, **change})
    except FieldError as e:
        assert str(e).startswith("config")
