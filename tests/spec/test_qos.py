"""QoS axes: what a spec may ask, which backend honours it, and the refusal, naming file,
line and field, of a setting a chosen backend cannot honour, before anything runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.spec.test_loader import messages, write

from roboscale.backends import qos
from roboscale.backends.base import get_backend, known_backends
from roboscale.errors import SpecError
from roboscale.spec.loader import load_spec
from roboscale.spec.planner import count_trials, plan

SPEC = """\
name: q
sweep:
  backend: {backend}
  rate_hz: 10
  {axis}: {value}
"""


def test_dds_honours_every_setting(tmp_path: Path) -> None:
    text = SPEC.format(backend="dds", axis="reliability", value="[reliable, best_effort]")
    text += "  history: [keep_all, keep_last, keep_last 5]\n"
    text += "  durability: [volatile, transient_local]\ntrial:\n  runs: 1\n"
    spec = load_spec(write(tmp_path, text))
    trials = plan(spec)
    assert len(trials) == count_trials(spec) == 2 * 3 * 2
    first, last = trials[0], trials[-1]
    assert (first.reliability, first.history, first.durability) == (
        "reliable",
        "keep_all",
        "volatile",
    )
    assert last.trial.endswith("-best_effort-keep_last5-transient_local-r0")


def test_unset_axes_leave_the_backend_alone(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, "name: q\nsweep:\n  backend: [zenoh, ros1]\n  rate_hz: 1\n"))
    t = plan(spec)[0]
    assert (t.reliability, t.history, t.durability) == (None, None, None)
    assert t.trial == "t0000-zenoh-1hz-text-p1-r0"


def test_best_effort_on_zenoh_is_refused(tmp_path: Path) -> None:
    text = SPEC.format(backend="[dds, zenoh]", axis="reliability", value="best_effort")
    assert messages(tmp_path, text) == [
        "F:5: sweep.reliability: backend 'zenoh' cannot honour reliability best_effort: "
        "it honours reliable; backends that honour best_effort: dds"
    ]


def test_history_on_ros1_is_refused(tmp_path: Path) -> None:
    text = SPEC.format(backend="ros1", axis="history", value="keep_last 10")
    assert messages(tmp_path, text) == [
        "F:5: sweep.history: backend 'ros1' cannot honour history keep_last 10: it honours "
        "no setting of it (only its own behaviour); backends that honour keep_last: dds"
    ]


def test_a_backend_given_on_the_command_line_is_checked_too(tmp_path: Path) -> None:
    path = write(tmp_path, SPEC.format(backend="dds", axis="durability", value="transient_local"))
    load_spec(path)  # dds honours it
    with pytest.raises(SpecError) as err:
        load_spec(path, backends=["native"])
    assert err.value.line == 5 and err.value.field == "sweep.durability"
    assert "backend 'native' cannot honour durability transient_local" in err.value.problem


def test_a_quick_section_is_checked(tmp_path: Path) -> None:
    text = SPEC.format(backend="zenoh", axis="reliability", value="reliable")
    text += "quick:\n  sweep:\n    reliability: best_effort\n"
    assert messages(tmp_path, text)[0].startswith(
        "F:8: sweep.reliability: backend 'zenoh' cannot honour reliability best_effort"
    )


@pytest.mark.parametrize(
    ("axis", "value", "problem"),
    [
        ("reliability", "sometimes", "reliability 'sometimes': allowed reliable or best_effort"),
        ("history", "keep_last 0", "history 'keep_last 0': allowed keep_all, keep_last"),
        ("history", "keep_some", "history 'keep_some': allowed keep_all, keep_last"),
        ("durability", "persistent", "durability 'persistent': allowed volatile or"),
    ],
)
def test_unknown_settings_say_what_is_allowed(
    tmp_path: Path, axis: str, value: str, problem: str
) -> None:
    (message,) = messages(tmp_path, SPEC.format(backend="dds", axis=axis, value=value))
    assert message.startswith(f"F:5: sweep.{axis}: {problem}")


def test_every_backend_declares_what_it_honours() -> None:
    for name in known_backends():
        capability = get_backend(name).qos
        assert set(capability) <= set(qos.AXES)
        for axis, kinds in capability.items():
            assert kinds <= set(qos.AXES[axis])
    assert get_backend("dds").qos == qos.EVERY_SETTING


def test_split_history() -> None:
    assert qos.split_history("keep_all") == ("keep_all", 0)
    assert qos.split_history("keep_last") == ("keep_last", 0)
    assert qos.split_history("keep_last  25") == ("keep_last", 25)
    with pytest.raises(ValueError, match="keep_last N with N from 1"):
        qos.split_history("keep_last many")
