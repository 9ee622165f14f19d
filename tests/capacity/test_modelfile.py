from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from roboscale.capacity import data, modelfile
from roboscale.capacity.data import Observation
from roboscale.errors import UserError

Make = Callable[..., list[Observation]]


@pytest.fixture
def model_path(
    tmp_path: Path, make_trials: Make, truth: type, results_folder: Callable[..., Path]
) -> Path:
    folder = results_folder(tmp_path / "r", make_trials(truth()))
    model = modelfile.build(data.load([folder]), [folder], draws=15, seed=1)
    path = tmp_path / "model.json"
    modelfile.save(model, path)
    return path


def test_round_trip_keeps_parameters_draws_and_facts(model_path: Path) -> None:
    raw = json.loads(model_path.read_text())  # strict JSON: no Infinity tokens
    assert raw["format_version"] == 2 and raw["backend"] == "native"
    assert raw["models"]["two_resource"]["params"]["link_budget_bytes_s"] == "inf"
    m = modelfile.load(model_path)
    assert m.host["hostname"] == "a" and m.fitted_range.nodes == (2.0, 256.0)
    two = m.models["two_resource"]
    assert math.isinf(two.params["link_budget_bytes_s"])
    assert two.draws.shape[1] == 6 and two.draws.shape[0] > 5
    assert np.isfinite(two.draws[:, 4]).all()  # the CPU budget


def test_unknown_version_is_refused(model_path: Path) -> None:
    raw = json.loads(model_path.read_text())
    raw["format_version"] = 99
    model_path.write_text(json.dumps(raw))
    with pytest.raises(UserError, match=r"format_version: 99 is not supported .*\(supported: 2\)"):
        modelfile.load(model_path)


def test_a_version_1_model_asks_for_a_refit(model_path: Path) -> None:
    raw = json.loads(model_path.read_text())
    raw["format_version"] = 1  # before numeric arrays had their own byte cost
    model_path.write_text(json.dumps(raw))
    with pytest.raises(UserError, match=r"format_version: 1 is not supported") as e:
        modelfile.load(model_path)
    assert "roboscale capacity fit" in (e.value.hint or "")


def test_other_json_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"format_version": 1}')
    with pytest.raises(UserError, match="not a roboscale capacity model"):
        modelfile.load(path)


def test_damaged_model_names_the_field(model_path: Path) -> None:
    raw = json.loads(model_path.read_text())
    del raw["models"]["cslv"]["params"]["cslv_bytes_s"]
    model_path.write_text(json.dumps(raw))
    with pytest.raises(UserError, match=r"models.cslv.params: field 'cslv_bytes_s' is missing"):
        modelfile.load(model_path)
