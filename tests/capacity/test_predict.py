from __future__ import annotations

import math
from collections.abc import Callable

from roboscale.capacity.data import Observation
from roboscale.capacity.models import fit_all
from roboscale.capacity.predict import FittedRange, predict_max_nodes, predict_max_rate

Make = Callable[..., list[Observation]]


def test_in_range_prediction_has_no_warning_and_holds_the_point(
    make_trials: Make, truth: type
) -> None:
    obs = make_trials(truth())
    models, span = fit_all(obs, draws=40), FittedRange.of(obs)
    p = predict_max_nodes(models["two_resource"], span, 4250, 20)
    assert p.warnings == () and p.low <= p.value <= p.high
    assert p.binding == "cpu"


def test_out_of_range_prediction_warns_with_a_wider_interval(
    make_trials: Make, truth: type
) -> None:
    obs = make_trials(truth())
    model = fit_all(obs, draws=40)["two_resource"]
    span = FittedRange.of(obs)
    inside = predict_max_nodes(model, span, 4250, 1000)
    outside = predict_max_nodes(model, span, 4250, 16000)  # 16x past the fastest rate
    assert outside.extrapolated
    assert any(
        "rate 1.6e+04 Hz is outside the fitted range 1-1,000 Hz" in w for w in outside.warnings
    )
    ratio_inside = inside.high / inside.low
    ratio_outside = outside.high / outside.low
    assert ratio_outside >= ratio_inside * 4 * 0.99  # widened by sqrt(16) each way


def test_max_rate_prediction(make_trials: Make, truth: type) -> None:
    t = truth()
    obs = make_trials(t)
    model = fit_all(obs, draws=20)["two_resource"]
    p = predict_max_rate(model, FittedRange.of(obs), 64, 4250)
    assert math.isfinite(p.value) and p.value > 0
    assert t.sustained(64, p.value * 0.9, 4250)
    assert not t.sustained(64, p.value * 1.1, 4250)


def test_a_payload_kind_never_fitted_is_answered_with_a_warning(
    make_trials: Make, truth: type
) -> None:
    obs = make_trials(truth())  # blocks of bytes only
    model, span = fit_all(obs, draws=10)["two_resource"], FittedRange.of(obs)
    assert predict_max_nodes(model, span, 4250, 20).warnings == ()
    scan = predict_max_nodes(model, span, 4250, 20, numeric=True)
    assert any("no trial with arrays of numbers (laserscan)" in w for w in scan.warnings)
    assert any(
        "no trial with arrays" in w for w in predict_max_rate(model, span, 8, 4250, True).warnings
    )
