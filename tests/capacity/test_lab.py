from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
from rich.console import Console

from roboscale.capacity import cli, data


@pytest.mark.zenoh
def test_search_runs_real_trials_and_records_them(tmp_path: Path, zenoh: None) -> None:
    spec = tmp_path / "cap.yaml"
    spec.write_text(
        "name: capsmoke\nsweep:\n  backend: zenoh\n  rate_hz: [200]\n  payload: [text]\n"
        "trial:\n  runs: 1\n  messages: 100\n  warmup: 10\n  drain_s: 0.5\n"
    )
    parser = argparse.ArgumentParser()
    cli.add_parser(parser.add_subparsers(dest="command"))
    out = tmp_path / "res"
    args = parser.parse_args(
        [
            "capacity",
            "search",
            str(spec),
            "--out",
            str(out),
            "--max-nodes",
            "4",
            "--budget-s",
            "120",
        ]
    )
    assert cli.main(args, Console(record=True)) == 0
    (found,) = json.loads((out / "capacity-search.json").read_text())["searches"]
    probes = [p["value"] for p in found["probes"]]
    assert probes[0] == 2 and set(probes) <= {2, 4}
    obs = data.load([out])
    assert [o.nodes for o in obs] == probes  # every probe is a recorded trial
    assert all(o.backend == "zenoh" and o.cpu_s is not None for o in obs)
