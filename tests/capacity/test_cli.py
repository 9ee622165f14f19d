from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from roboscale.capacity import cli
from roboscale.capacity.data import Observation
from roboscale.errors import UserError

Make = Callable[..., list[Observation]]


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="roboscale")
    cli.add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["capacity", *argv])


def run(argv: list[str]) -> tuple[int, str]:
    console = Console(record=True, width=200)
    code = cli.main(parse(argv), console)
    return code, console.export_text()


@pytest.fixture
def fitted(
    tmp_path: Path, make_trials: Make, truth: type, results_folder: Callable[..., Path]
) -> tuple[Path, Path]:
    folder = results_folder(tmp_path / "r", make_trials(truth()))
    model = tmp_path / "m.json"
    code, out = run(["fit", str(folder), "-o", str(model), "--bootstrap", "20"])
    assert code == 0 and "cpu_budget_cores" in out
    return folder, model


def test_fit_predict_nodes_and_rate(fitted: tuple[Path, Path]) -> None:
    _, model = fitted
    code, out = run(["predict", str(model), "--size", "4250", "--rate", "20"])
    assert code == 0 and "max nodes for 4250 B messages at 20 Hz" in out
    assert "two_resource" in out and "cslv" in out
    code, out = run(["predict", str(model), "--nodes", "64", "--size", "laserscan"])
    assert code == 0 and "max rate per sender for 64 nodes" in out


def test_predict_out_of_range_warns(fitted: tuple[Path, Path]) -> None:
    _, model = fitted
    code, out = run(["predict", str(model), "--size", "4MB", "--rate", "20"])
    assert code == 0 and "outside the fitted range" in out and "widened" in out


def test_predict_needs_exactly_one_question(fitted: tuple[Path, Path]) -> None:
    with pytest.raises(UserError, match="either --rate"):
        run(["predict", str(fitted[1]), "--size", "11"])
    with pytest.raises(UserError, match="--size: 'huge' is not a payload"):
        run(["predict", str(fitted[1]), "--size", "huge", "--rate", "1"])


def test_validate_writes_table_and_figures(tmp_path: Path, fitted: tuple[Path, Path]) -> None:
    folder, model = fitted
    out_json = tmp_path / "v.json"
    code, out = run(
        [
            "validate",
            str(model),
            str(folder),
            "--json",
            str(out_json),
            "--plots",
            str(tmp_path / "fig"),
        ]
    )
    assert code == 0 and "median |relative error|" in out
    table = json.loads(out_json.read_text())["cross_validation"]
    assert set(table["median_abs_rel_error"]) == {"cslv", "two_resource"}
    assert (tmp_path / "fig" / "predicted-vs-measured.png").exists()


def test_validate_writes_a_self_contained_report(tmp_path: Path, fitted: tuple[Path, Path]) -> None:
    folder, model = fitted
    page = tmp_path / "out" / "capacity.html"
    code, out = run(["validate", str(model), str(folder), "--report", str(page)])
    html = page.read_text()
    assert code == 0 and f"report: {page}" in out.replace("\n", "")
    assert html.count("<img") == 3 and "src='data:image/png;base64," in html
    assert "Leave one configuration out" in html and "cpu_s_per_numeric_byte" in html
    assert "median |relative error|" in html and "<script" not in html
    assert re.search(r"(src|href)=['\"](?!data:)", html) is None  # nothing fetched


def test_validate_refuses_another_host(
    tmp_path: Path,
    fitted: tuple[Path, Path],
    make_trials: Make,
    truth: type,
    results_folder: Callable[..., Path],
) -> None:
    other = results_folder(tmp_path / "o", make_trials(truth()), host={"hostname": "b"})
    with pytest.raises(UserError, match="fitted on host setup hostname=a"):
        run(["validate", str(fitted[1]), str(other)])


def test_search_runs_each_configuration_of_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: cap\nsweep:\n  backend: zenoh\n  rate_hz: [10, 1000]\n  payload: [text, laserscan]\n"
    )
    calls: list[tuple[str, str, float, int]] = []

    @contextmanager
    def fake_lab(spec_obj: Any, out: Path, text: str, console: Console) -> Iterator[Any]:
        out.mkdir(parents=True)

        def trial(backend: str, payload: tuple[str, int], rate: float, pairs: int) -> bool:
            calls.append((backend, payload[0], rate, pairs))
            return 2 * pairs * rate * (1 + payload[1] / 1000) <= 20_000

        yield trial

    args = parse(["search", str(spec), "--out", str(tmp_path / "res"), "--max-nodes", "64"])
    code = cli.run_search(args, Console(record=True), fake_lab)
    assert code == 0
    found = json.loads((tmp_path / "res" / "capacity-search.json").read_text())["searches"]
    assert [(s["payload"], s["rate_hz"]) for s in found] == [
        ("text", 10.0),
        ("text", 1000.0),
        ("laserscan", 10.0),
        ("laserscan", 1000.0),
    ]
    text_10 = found[0]
    assert text_10["stop"] == "cap" and text_10["sustained"] == 64
    assert (found[1]["sustained"], found[1]["unsustained"]) == (18, 20)
    assert found[2]["stop"] == "cap"
    assert (found[3]["sustained"], found[3]["unsustained"]) == (2, 4)
    assert all(pairs >= 1 for *_, pairs in calls)
