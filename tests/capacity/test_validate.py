from __future__ import annotations

from collections.abc import Callable, Sequence

from roboscale.capacity.data import Observation
from roboscale.capacity.models import fit_cslv
from roboscale.capacity.validate import (
    FittedModel,
    cross_validate,
    folds,
    measured_max_nodes,
)

Make = Callable[..., list[Observation]]


def test_folds_hold_out_whole_configurations(make_trials: Make, truth: type) -> None:
    obs = make_trials(truth(), runs=2)
    all_folds = folds(obs)
    assert len(all_folds) == 12
    for fold in all_folds:
        assert {o.config for o in fold.test} == {fold.config}
        assert all(o.config != fold.config for o in fold.train)
        assert len(fold.train) + len(fold.test) == len(obs)
        assert len(fold.test) == 8 * 2  # every N and every run of it


def test_validation_never_fits_on_held_out_trials(make_trials: Make, truth: type) -> None:
    obs = make_trials(truth(), runs=2)
    seen: list[tuple[str, set[str]]] = []

    def spy(name: str, train: Sequence[Observation]) -> FittedModel:
        seen.append((name, {o.trial for o in train}))
        return fit_cslv(train, draws=5)

    result = cross_validate(obs, models=("cslv",), fit=spy)
    assert len(seen) == 12
    for row, (_, trained_on) in zip(result.rows, seen, strict=True):
        held = {o.trial for o in obs if o.config == (row.payload_bytes, row.rate_hz, row.numeric)}
        assert not held & trained_on


def test_measured_max_nodes_is_below_the_first_failure(make_trials: Make, truth: type) -> None:
    base = make_trials(truth(), sizes=(11,), rates=(10.0,), nodes=(2, 4, 8, 16))
    flip = {4: True, 8: False, 16: True}  # noisy: 16 held once, but 8 failed first
    obs = [o if o.nodes not in flip else _with(o, flip[o.nodes]) for o in base]
    m = measured_max_nodes(obs)
    assert (m.max_nodes, m.first_unsustained, m.note) == (4, 8, None)
    assert measured_max_nodes(base).note == "censored: every N was sustained"


def _with(o: Observation, ok: bool) -> Observation:
    from dataclasses import replace

    return replace(o, sustained=ok)


def test_two_resource_beats_cslv_on_held_out_configurations(make_trials: Make, truth: type) -> None:
    nodes = (2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
    obs = make_trials(truth(), rates=(1.0, 10.0, 100.0, 1000.0), nodes=nodes)
    result = cross_validate(obs, draws=10)
    two, cslv = result.median_error("two_resource"), result.median_error("cslv")
    assert two is not None and cslv is not None
    assert two <= 0.2 < cslv
    assert result.scored("two_resource") >= 8
