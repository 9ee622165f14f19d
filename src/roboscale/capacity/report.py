"""One self-contained HTML page of a capacity model and its validation.

`roboscale capacity validate MODEL RESULTS... --report capacity.html` writes it:
the host and backend, the verdict's thresholds, both models' parameters, the
error on configurations left out (and on results the model never saw), and the
three figures inline, so the page can be mailed or archived on its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape
from pathlib import Path

from roboscale.analysis.report import STYLE
from roboscale.analysis.tables import Table, to_html
from roboscale.capacity.data import Observation
from roboscale.capacity.modelfile import CapacityModel
from roboscale.capacity.validate import Validation
from roboscale.errors import UserError
from roboscale.records.store import read_summary
from roboscale.safewrite import write_text

MODEL_TITLES = {"cslv": "CSLV (thesis)", "two_resource": "two-resource"}
FIGURES = (
    ("Predicted against measured max N", "One point per configuration left out; the diagonal "
     "is a perfect prediction, bars are 80 % intervals.", "predicted_vs_measured"),
    ("Latency against node count", "Thesis Figure 4.4 style: mean round trip (log scale) "
     "against N, one line per rate, one standard deviation.", "latency_vs_nodes"),
    ("Sustained map", "Trials over nodes x rate per payload (o held, x did not), with the "
     "highest rate each model allows N nodes.", "sustained_map"),
)  # fmt: skip


def num(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "unbounded"
    return f"{value:.4g}"


def parameter_table(model: CapacityModel) -> Table:
    rows = []
    for name, fm in model.models.items():
        for key, value in fm.params.items():
            rows.append([MODEL_TITLES.get(name, name), key, num(value), num(fm.stderr.get(key))])
        rows.append([MODEL_TITLES.get(name, name), "misclassified trials",
                     str(fm.details.get("misclassified")), ""])  # fmt: skip
    return ["model", "parameter", "value", "std. error"], rows


def validation_table(result: Validation) -> Table:
    head = ["model", "size (B)", "rate (Hz)", "measured max N", "first failing N",
            "predicted", "80 % interval", "|error|"]  # fmt: skip
    rows = []
    for r in result.rows:
        error = "-" if r.rel_error is None else f"{r.rel_error:.0%}"
        rows.append([
            MODEL_TITLES.get(r.model, r.model), r.size_label, f"{r.rate_hz:g}",
            num(r.measured), num(r.first_unsustained), num(r.predicted),
            f"{num(r.low)} - {num(r.high)}", error if r.note is None else r.note,
        ])  # fmt: skip
    return head, rows


def medians(result: Validation) -> str:
    items = "".join(
        f"<li><b>{escape(MODEL_TITLES.get(name, name))}</b>: {escape(line)}</li>"
        for name, line in result.headline()
    )
    return f"<ul>{items}</ul>"


def thresholds(sources: Sequence[str]) -> str:
    """The verdict thresholds of the results folders (one line per distinct set)."""
    from roboscale.analysis.verdict import Thresholds

    seen: dict[str, None] = {}
    for folder in sources:
        raw = read_summary(Path(folder)).get("thresholds")
        seen[Thresholds.from_dict(raw, f"{folder}/summary.json").describe()] = None
    return "; ".join(seen) or "-"


def facts(model: CapacityModel, obs: Sequence[Observation]) -> list[tuple[str, str]]:
    host = model.host
    return [
        ("backend", model.backend),
        ("host", f"{host.get('hostname', '?')}: {host.get('cpu_model', '?')}, "
                 f"{host.get('cores', '?')} cores, CPU quota {host.get('cpu_quota', '-')}, "
                 f"link {host.get('link_profile', '?')}"),
        ("model fitted on", f"{model.trials} trials of {', '.join(model.sources)}"),
        ("validated on", f"{len(obs)} trials of {', '.join(sorted({o.source for o in obs}))}"),
        ("sustained means", thresholds(sorted({o.source for o in obs}))),
        ("N", "nodes = 2 x sender/echoer pairs, as in the thesis"),
    ]  # fmt: skip


def render(
    model: CapacityModel,
    obs: Sequence[Observation],
    left_out: Validation,
    unseen: Validation | None,
) -> str:
    from roboscale.analysis.plots import to_data_uri
    from roboscale.capacity import plots

    title = f"roboscale capacity: {model.backend} on {model.host.get('hostname', '?')}"
    dl = "".join(f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in facts(model, obs))
    parts = [
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{STYLE}</style></head><body><h1>{escape(title)}</h1><dl>{dl}</dl>",
        "<h2>Leave one configuration out</h2>",
        medians(left_out),
        to_html(validation_table(left_out)),
    ]
    if unseen is not None:
        parts += ["<h2>The model as fitted, on results it was not fitted on</h2>",
                  medians(unseen), to_html(validation_table(unseen))]  # fmt: skip
    parts += ["<h2>Fitted parameters</h2>", to_html(parameter_table(model))]
    drawn = {
        "predicted_vs_measured": lambda: plots.predicted_vs_measured(left_out),
        "latency_vs_nodes": lambda: plots.latency_vs_nodes(obs),
        "sustained_map": lambda: plots.sustained_map(obs, model.models),
    }
    import matplotlib.pyplot as plt

    for heading, caption, key in FIGURES:
        fig = drawn[key]()
        uri = to_data_uri(fig)
        plt.close(fig)
        parts.append(
            f"<h2>{escape(heading)}</h2><figure><img alt='{escape(heading)}' src='{uri}'>"
            f"<figcaption>{escape(caption)}</figcaption></figure>"
        )
    parts.append("</body></html>\n")
    return "".join(parts)


def write(
    path: Path,
    model: CapacityModel,
    obs: Sequence[Observation],
    left_out: Validation,
    unseen: Validation | None = None,
) -> None:
    page = render(model, obs, left_out, unseen)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, page)
    except OSError as e:
        raise UserError(f"{path}: cannot write the report ({e.strerror or e})") from None
