from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from roboscale.capacity import plots
from roboscale.capacity.data import Observation
from roboscale.capacity.models import fit_all
from roboscale.capacity.validate import cross_validate

Make = Callable[..., list[Observation]]


def test_figures_render(tmp_path: Path, make_trials: Make, truth: type) -> None:
    obs = make_trials(truth(), rates=(1.0, 100.0, 1000.0), runs=2)
    models = fit_all(obs, draws=5)
    figures = {
        "latency": plots.latency_vs_nodes(obs, size=4250),
        "map": plots.sustained_map(obs, models),
        "pred": plots.predicted_vs_measured(cross_validate(obs, draws=5)),
    }
    assert len(figures["map"].axes) == 3  # one panel per size
    assert figures["latency"].axes[0].get_yscale() == "log"
    for name, fig in figures.items():
        fig.savefig(tmp_path / f"{name}.png")
        assert (tmp_path / f"{name}.png").stat().st_size > 1000
