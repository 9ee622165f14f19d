"""How `roboscale report` grows with the results folder: time, peak memory and page size.

Synthetic results folders of 10, 100 and 1,000 echo trials of 10,000 records each
(four backends, five payloads, ten rates, runs of each; lognormal round trips, one
trial in seven with a queue that grows) are written through the results folder's own
writer, then `roboscale report DIR` runs on each in a fresh process: its wall time, its
peak resident memory (the child's rusage) and the size of report.html.

Goal: linear growth, shown as 1,000 trials rendering within 10x the time of 100, and the
page under 20 MB. With --quick (10 and 100 trials of 2,000 records) the 1,000-trial goal
is not judged.

    .venv/bin/python bench/report.py [--quick] [--json bench/out/report.json] [--check]
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import goals as judge
from common import finish, header, parser, table
from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.verdict import Thresholds
from roboscale.records.folder import ResultsFolder
from roboscale.records.models import RunInfo, Summary, TrialMetadata
from roboscale.records.schema import FORMAT_VERSION
from roboscale.records.store import records_table

BACKENDS = ("native", "native-proc", "zenoh", "ros1")
PAYLOADS = (("text", 11), ("laserscan", 4250), ("1KB", 1024), ("64KB", 65536),
            ("image", 307200))  # fmt: skip
RATES = (10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0, 10000.0)
MEDIAN_US = {"native": 60.0, "native-proc": 400.0, "zenoh": 250.0, "ros1": 600.0}
TIME_GOAL = 10.0  # 1,000 trials within 10x the time of 100
SIZE_GOAL_MB = 20.0


def trial_params(i: int, records: int) -> dict[str, Any]:
    backend = BACKENDS[i % len(BACKENDS)]
    payload, size = PAYLOADS[(i // len(BACKENDS)) % len(PAYLOADS)]
    per_run = len(BACKENDS) * len(PAYLOADS) * len(RATES)
    rate = RATES[(i // (len(BACKENDS) * len(PAYLOADS))) % len(RATES)]
    trial = f"t{i:04d}-{backend}-{rate:g}hz-{payload}-r{i // per_run}"
    return {
        "trial": trial, "index": i, "backend": backend, "workload": "echo", "rate_hz": rate,
        "payload": payload, "payload_bytes": size, "pairs": 1, "run": i // per_run,
        "messages": records, "warmup": 0, "ack": False, "hosts": 1, "link": "loopback",
    }  # fmt: skip


def synthetic_trial(i: int, records: int, rng: np.random.Generator) -> tuple[Any, Any]:
    """One trial's records (lognormal round trips, a growing queue in one of seven)."""
    params = trial_params(i, records)
    period = int(1e9 / params["rate_hz"])
    sent = np.arange(1, records + 1, dtype=np.int64) * period
    rtt_us = rng.lognormal(np.log(MEDIAN_US[params["backend"]]), 0.35, records)
    if i % 7 == 3:
        rtt_us += np.linspace(0, 20_000, records)
    rtt = (rtt_us * 1e3).astype(np.int64)
    lost = rng.random(records) < 0.001
    received = np.where(lost, 0, sent + rtt)
    cols = {"seq": np.arange(records, dtype=np.int64), "t_intended": sent - 5_000,
            "t_sent": sent, "t_echoed": np.where(lost, 0, sent + rtt // 2),
            "t_received": received}  # fmt: skip
    return params, records_table(params["trial"], "sender_0", "local", params["payload_bytes"],
                                 cols)  # fmt: skip


def make_folder(path: Path, trials: int, records: int) -> float:
    """A results folder of `trials` synthetic echo trials; the seconds it took."""
    t0 = time.perf_counter()
    folder = ResultsFolder(path)
    path.mkdir(parents=True)
    folder.write_run(RunInfo.model_validate({
        "format_version": FORMAT_VERSION, "spec_name": f"synthetic-{trials}",
        "spec_description": "bench/report.py: synthetic echo trials",
        "command": f"bench/report.py ({trials} trials of {records:,} records)",
        "backends": dict.fromkeys(BACKENDS, "synthetic"),
    }))  # fmt: skip
    th = Thresholds()
    rng = np.random.default_rng(trials)
    entries = []
    for i in range(trials):
        params, records_of = synthetic_trial(i, records, rng)
        meta = {"format_version": FORMAT_VERSION, "params": params, "host": {"cores": 2}}
        folder.write_trial(params["trial"], [records_of], TrialMetadata.model_validate(meta))
        entries.append(summarize_trial(records_of, params, th))
    summary = {"format_version": FORMAT_VERSION, "thresholds": th.to_dict(), "trials": []}
    folder.write_summary(Summary.model_validate(summary).model_copy(update={"trials": entries}))
    return time.perf_counter() - t0


def render(path: Path) -> dict[str, Any]:
    """`roboscale report` on `path` in a fresh process: seconds, peak RSS, page size."""
    command = [sys.executable, "-c", "from roboscale.cli import main; main()", "report",
               str(path)]  # fmt: skip
    t0 = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    error = child.stderr.read().decode() if child.stderr else ""
    if child.returncode != 0:
        raise RuntimeError(f"roboscale report failed ({child.returncode}): {error[-2000:]}")
    page = path / "report.html"
    return {"seconds": seconds, "peak_rss_mb": usage.ru_maxrss / 1024,
            "html_mb": page.stat().st_size / 1e6}  # fmt: skip


def goals(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One rendering per size: the time ratio and the page's size are single
    measurements (bench/goals.py says so on their lines)."""
    by = {r["trials"]: r for r in rows}
    time_goal, time_target = "report time, 1,000 trials / 100", judge.at_most(TIME_GOAL)
    if 100 in by and 1000 in by:
        ratio = by[1000]["seconds"] / by[100]["seconds"]
        out = [judge.single(time_goal, ratio, time_target, "one rendering of each")]
    else:
        out = [judge.line(time_goal, None, time_target, judge.NOT_JUDGED,
                          why="needs the 100- and 1,000-trial folders (the full run)")]  # fmt: skip
    largest = max(rows, key=lambda r: r["trials"])
    size_target = judge.Target(f"< {SIZE_GOAL_MB:g}", lambda mb: mb < SIZE_GOAL_MB)
    out.append(judge.single(f"report.html size, {largest['trials']:,} trials (MB)",
                            largest["html_mb"], size_target, "one page"))  # fmt: skip
    return out


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--quick", action="store_true", help="10 and 100 trials of 2,000 records")
    p.add_argument("--keep", type=Path, help="make the folders here and keep them")
    args = p.parse_args()
    report = header()
    report["load_average"] = os.getloadavg()
    print(f"load average: {report['load_average']}")
    sizes, records = ((10, 100), 2_000) if args.quick else ((10, 100, 1000), 10_000)
    where = args.keep or Path(tempfile.mkdtemp(prefix="roboscale-bench-report-"))
    rows = []
    try:
        for trials in sizes:
            folder = where / f"synthetic-{trials}"
            print(f"writing {trials:,} trials of {records:,} records ...", flush=True)
            made = make_folder(folder, trials, records)
            print(f"rendering {trials:,} trials ...", flush=True)
            row = {"trials": trials, "records_each": records, "made_s": made, **render(folder)}
            row["ms_per_trial"] = 1e3 * row["seconds"] / trials
            rows.append(row)
            print(f"  {row['seconds']:.1f} s, peak RSS {row['peak_rss_mb']:.0f} MB, "
                  f"report.html {row['html_mb']:.2f} MB", flush=True)  # fmt: skip
    finally:
        if args.keep is None:
            shutil.rmtree(where, ignore_errors=True)
    print()
    table(rows, ["trials", "records_each", "seconds", "ms_per_trial", "peak_rss_mb", "html_mb"])
    report["rows"] = rows
    finish(report, goals(rows), args)


if __name__ == "__main__":
    main()
