import json

import pytest

from roboscale.facetrack.aggregator import Aggregator
from roboscale.facetrack.config import ConfigError, KillPlan, TrackerConfig
from roboscale.facetrack.dispatch import Dispatcher
from roboscale.facetrack.stack import get_stack, pick_victims


def test_json_round_trip() -> None:
    cfg = TrackerConfig(workers=7, kills=KillPlan(10, "sigterm", 5))
    assert TrackerConfig.from_json(cfg.to_json()) == cfg


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"deque_len": 0}, "deque_len"),
        ({"workers": 0}, "workers"),
        ({"dispatch": "broadcast"}, "dispatch"),
        ({"fps": -1}, "fps"),
        ({"blur": 4}, "blur"),
        ({"kills": {"count": 3, "method": "nuke"}}, "kills.method"),
        ({"kills": {"cout": 3}}, "kills.cout"),
        ({"wrokers": 3}, "wrokers"),
        ({"version": 2}, "version"),
    ],
)
def test_bad_settings_name_the_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        TrackerConfig.from_dict(raw, where="spec.yaml")
    assert info.value.field == field
    assert str(info.value).startswith(f"spec.yaml: {field}: ")


def test_parts_refuse_bad_values_naming_the_field() -> None:
    with pytest.raises(ConfigError, match="deque_len"):
        Aggregator(0)
    with pytest.raises(ConfigError, match="workers"):
        Dispatcher("random", 0)


def test_unknown_stack_names_the_field_and_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="stack: 'ros3' is not a known stack; known: "):
        get_stack("ros3")


def test_victims_are_distinct_while_workers_last() -> None:
    cfg = TrackerConfig(workers=10, kills=KillPlan(count=25))
    victims = pick_victims(cfg)
    assert len(victims) == 25
    assert sorted(victims[:10]) == list(range(10)) and sorted(victims[10:20]) == list(range(10))
    assert victims == pick_victims(cfg)


def test_config_is_plain_json() -> None:
    assert json.loads(TrackerConfig().to_json())["kills"] == {
        "count": 0,
        "method": "sigkill",
        "at_frame": 0,
        "target": "worker",
        "interval_ms": 0.0,
    }


def test_kill_interval_is_bounded_and_named() -> None:
    from roboscale.facetrack.config import ConfigError, KillPlan

    assert KillPlan(count=3, interval_ms=5.0).interval_ms == 5.0
    for bad in (-1.0, 1000.5, "5", True):
        with pytest.raises(ConfigError, match=r"kills\.interval_ms: must be"):
            KillPlan(count=3, interval_ms=bad)  # type: ignore[arg-type]


def test_a_main_process_target_is_killed_once_and_only_where_the_stack_can() -> None:
    from roboscale.facetrack.config import ConfigError, KillPlan, TrackerConfig
    from roboscale.facetrack.stack import check_kills, get_stack

    with pytest.raises(ConfigError, match=r"kills\.count: a aggregator is one process"):
        KillPlan(count=2, target="aggregator")
    with pytest.raises(ConfigError, match=r"kills\.target"):
        KillPlan(count=1, target="camera")
    cfg = TrackerConfig(kills=KillPlan(count=1, target="face_supervisor"))
    with pytest.raises(ConfigError, match="stack ros1 cannot kill its face_supervisor"):
        check_kills(get_stack("ros1"), cfg)
    with pytest.raises(ConfigError, match="it can kill: worker"):
        check_kills(get_stack("runtime"), cfg)
    check_kills(get_stack("erlang"), cfg)
    by_term = TrackerConfig(kills=KillPlan(count=1, method="sigterm", target="face_supervisor"))
    with pytest.raises(ConfigError, match="traps exits and outlives 'sigterm'"):
        check_kills(get_stack("erlang"), by_term)
