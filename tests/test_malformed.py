"""The malformed-input corpus: every bad input gives exit code 2, one `error:` naming the file
(and its line and field where it has them) and what is wrong, no traceback, and no hang.

Text inputs are files under tests/data/malformed/<kind>/, each stating on its first line
what the message must hold (`# expect: A && B`); the kind says the command:
spec (`bench FILE --dry-run`), sweep (`bench FILE`: refused before anything runs), launch
(`launch FILE`), chaos (`chaos FILE`) and profiles (`bench` of a spec naming the file).
Results folders, model files, special files (FIFO, directory, device, oversize), output
folders and command-line arguments are made here from tables, by damaging valid ones.
Commands run in-process through `roboscale.cli.main`; an alarm turns a hang into a failure.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.conftest import trial_params

from roboscale import safewrite
from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.verdict import Thresholds
from roboscale.cli import main
from roboscale.records import store
from roboscale.records.folder import ResultsFolder
from roboscale.records.models import RunInfo, TrialMetadata

DATA = Path(__file__).parent / "data" / "malformed"
BOUND_S = 60.0  # per input: a hang is caught; a loaded 2-core machine (load 14) stays far below
GOOD_SPEC = "name: good\ntrial:\n  runs: 1\nsweep:\n  rate_hz: [10, 20]\n"
GOOD_LAUNCH = (
    "name: robot\nchildren:\n  - node: camera\n    class: roboscale.runtime.chaos:FrameSource\n"
)


class Hang(Exception):
    pass


def _alarm(signum: int, frame: Any) -> None:
    raise Hang


def run(argv: list[str]) -> tuple[int, str]:
    """Exit code and stderr of `roboscale ARGV`, in this process."""
    err, out = io.StringIO(), io.StringIO()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, BOUND_S)
    start = time.monotonic()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            main(argv)
        code: Any = 0
    except SystemExit as e:
        code = e.code
    except Hang:
        pytest.fail(f"roboscale {argv} did not finish within {BOUND_S} s")
    except Exception:
        pytest.fail(f"roboscale {argv} raised:\n{traceback.format_exc()}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.monotonic() - start < BOUND_S
    return int(code or 0), err.getvalue()


def check(argv: list[str], *fragments: str) -> None:
    code, err = run(argv)
    assert code == 2, f"exit code {code} for {argv}; stderr:\n{err}"
    assert "Traceback" not in err, err
    one_line = " ".join(err.split())
    for fragment in fragments:
        assert " ".join(fragment.split()) in one_line, f"{fragment!r} not in:\n{err}"


# -- text files: specs, sweeps, launch files, chaos sections, link profiles -----------------
def expectations(path: Path) -> list[str]:
    first = path.read_bytes().split(b"\n", 1)[0].decode()
    assert first.startswith("# expect: "), f"{path}: the first line must say what to expect"
    return first.removeprefix("# expect: ").split(" && ")


FILES = sorted(DATA.glob("*/*.yaml"))


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_text_file(path: Path, tmp_path: Path) -> None:
    kind = path.parent.name
    named = str(path)
    if kind == "profiles":
        spec = tmp_path / "spec.yaml"
        spec.write_text(f"{GOOD_SPEC}  hosts: 2\n  link: lab\nenv:\n  profiles: {path}\n")
        argv = ["bench", str(spec), "--dry-run"]
    else:
        argv = {
            "spec": ["bench", named, "--dry-run"],
            "sweep": ["bench", named, "--out", str(tmp_path / "out")],
            "launch": ["launch", named],
            "chaos": ["chaos", named],
        }[kind]
    fragments = expectations(path)
    first = fragments[0]
    # The file's own name leads the message; with a line, file:line.
    check(argv, named + first if first.startswith(":") else named, *fragments)


def test_the_corpus_is_large() -> None:
    assert len(FILES) + len(SPECIAL) + len(RESULTS) + len(MODELS) + len(ARGS) >= 150


# -- special files where a file was expected ------------------------------------------------
def fifo(tmp: Path) -> Path:
    os.mkfifo(tmp / "fifo")
    return tmp / "fifo"


def big(tmp: Path) -> Path:
    path = tmp / "big.yaml"
    path.write_text(GOOD_SPEC + "#" * (2 << 20))
    return path


def directory(tmp: Path) -> Path:
    (tmp / "dir").mkdir()
    return tmp / "dir"


MakePath = Callable[[Path], Path]
SPECIAL: list[tuple[str, MakePath, list[str], str]] = [
    (f"{cmd}-{name}", make, argv, expected)
    for cmd, argv in (
        ("bench", ["bench", "{}", "--dry-run"]),
        ("launch", ["launch", "{}"]),
        ("chaos", ["chaos", "{}"]),
        ("predict", ["capacity", "predict", "{}", "--size", "10", "--rate", "1"]),
    )
    for name, make, expected in (
        ("fifo", fifo, "is a FIFO (named pipe)"),
        ("directory", directory, "is a directory"),
        ("device", lambda tmp: Path("/dev/zero"), "is a character device"),
        ("oversize", big, "bytes; a"),
        ("missing", lambda tmp: tmp / "nope.yaml", ": no such"),
    )
    if not (cmd == "predict" and name == "oversize")  # JSON files may be large
] + [
    (f"{cmd}-empty-path", lambda tmp: Path(""), argv, "an empty path")
    for cmd, argv in (
        ("bench", ["bench", "", "--dry-run"]),
        ("launch", ["launch", ""]),
        ("report", ["report", ""]),
        ("predict", ["capacity", "predict", "", "--size", "10", "--rate", "1"]),
    )
]


@pytest.mark.parametrize(("make", "argv", "expected"), [c[1:] for c in SPECIAL],
                         ids=[c[0] for c in SPECIAL])  # fmt: skip
def test_special_file(tmp_path: Path, make: MakePath, argv: list[str], expected: str) -> None:
    path = make(tmp_path)
    named = [str(path)] if str(path) != "." else []  # an empty path has no name to show
    check([a.format(path) for a in argv], expected, *named)


def test_a_fifo_spec_through_the_real_command(tmp_path: Path) -> None:
    """End to end in a process of its own: nothing blocks on the FIFO's missing writer."""
    code = "from roboscale.cli import main; main()"
    argv = [sys.executable, "-c", code, "bench", str(fifo(tmp_path)), "--dry-run"]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=2 * BOUND_S, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{tmp_path / 'fifo'}: is a FIFO (named pipe)" in proc.stderr


# -- results folders ----------------------------------------------------------------------------
TH = Thresholds()


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid results folder of one trial, as the lab writes it."""
    run_dir = tmp_path_factory.mktemp("results") / "run"
    run_dir.mkdir()
    folder = ResultsFolder(run_dir)
    run = {"format_version": 2, "spec_name": "good", "spec": GOOD_SPEC, "command": "x"}
    folder.write_run(RunInfo.model_validate({**run, "host": {"cores": 2}, "backends": {}}))
    params = trial_params(trial="t0000")
    n = 20
    sent = np.arange(1, n + 1, dtype=np.int64) * 100_000_000
    cols = {"seq": np.arange(n), "t_intended": sent, "t_sent": sent,
            "t_echoed": sent + 1000, "t_received": sent + 2000}  # fmt: skip
    table = store.records_table("t0000", "sender_0", "local", 11, cols)
    meta = {"format_version": 2, "params": params, "host": {"cores": 2}}
    folder.write_trial("t0000", [table], TrialMetadata.model_validate(meta))
    folder.add_entry(summarize_trial(table, params, TH), TH.to_dict())
    assert folder.summary().trials and folder.records("t0000")
    return run_dir


def _json(name: str, change: Callable[[Any], Any]) -> Callable[[Path], None]:
    def apply(run_dir: Path) -> None:
        path = run_dir / name
        path.write_text(json.dumps(change(json.loads(path.read_text()))))

    return apply


def _write(name: str, data: bytes) -> Callable[[Path], None]:
    return lambda run_dir: (run_dir / name).write_bytes(data)


def _replace(name: str, make: Callable[[Path], None]) -> Callable[[Path], None]:
    def apply(run_dir: Path) -> None:
        (run_dir / name).unlink()
        make(run_dir / name)

    return apply


def _entry(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def edit(summary: dict[str, Any]) -> dict[str, Any]:
        change(summary["trials"][0])
        return summary

    return _json("summary.json", edit)


def _meta(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    """The trial's metadata damaged, and its summary entry gone: the report recovers the
    trial from its files and reads the metadata."""

    def edit(meta: dict[str, Any]) -> dict[str, Any]:
        change(meta)
        return meta

    def apply(run_dir: Path) -> None:
        _json("trials/t0000/metadata.json", edit)(run_dir)
        _json("summary.json", lambda s: {**s, "trials": []})(run_dir)

    return apply


def _parquet(table: pa.Table) -> Callable[[Path], None]:
    return lambda run_dir: pq.write_table(table, run_dir / "trials/t0000/records.parquet")


RECORDS = "trials/t0000/records.parquet"
RESULTS: list[tuple[str, Callable[[Path], None], str, str]] = [
    ("run-missing", lambda d: (d / "run.json").unlink(), "run.json", "missing; "),
    ("run-not-json", _write("run.json", b"{oops"), "run.json", ":1: not valid JSON"),
    ("run-empty", _write("run.json", b""), "run.json", ":1: not valid JSON"),
    ("run-binary", _write("run.json", b"\x00\x01"), "run.json", "a binary file"),
    ("run-latin1", _write("run.json", b'{"a": "\xe9"}'), "run.json", "is not UTF-8"),
    ("run-a-list", _write("run.json", b"[1, 2]"), "run.json", "must be a JSON object, got list"),
    ("run-deep", _write("run.json", b"[" * 100_000), "run.json", "not valid JSON"),
    ("run-huge-number", _write("run.json", b'{"format_version": ' + b"9" * 5000 + b"}"),
     "run.json", "not valid JSON"),
    ("run-version", _json("run.json", lambda r: {**r, "format_version": 99}), "run.json",
     "format_version: 99 is not supported"),
    ("run-name-number", _json("run.json", lambda r: {**r, "spec_name": 5}), "run.json",
     "spec_name: Input should be a valid string"),
    ("run-host-list", _json("run.json", lambda r: {**r, "host": []}), "run.json",
     "host: Input should be a valid dictionary"),
    ("run-directory", _replace("run.json", Path.mkdir), "run.json", "is a directory"),
    ("run-fifo", _replace("run.json", os.mkfifo), "run.json", "is a FIFO"),
    ("summary-not-json", _write("summary.json", b"{"), "summary.json", "not valid JSON"),
    ("summary-trials-mapping", _json("summary.json", lambda s: {**s, "trials": {}}),
     "summary.json", "trials: Input should be a valid list"),
    ("summary-no-trials", _json("summary.json", lambda s: {"format_version": 1}),
     "summary.json", "trials: required field is missing"),
    ("summary-version", _json("summary.json", lambda s: {**s, "format_version": "1"}),
     "summary.json", "format_version: '1' is not supported"),
    ("summary-entry-text", _json("summary.json", lambda s: {**s, "trials": ["t0"]}),
     "summary.json", "trials[0]: Input should be a valid dictionary"),
    ("entry-no-rate", _entry(lambda e: e.pop("rate_hz")), "summary.json",
     "trials[0].rate_hz: required field is missing"),
    ("entry-rate-text", _entry(lambda e: e.update(rate_hz="fast")), "summary.json",
     "trials[0].rate_hz: Input should be a valid number"),
    ("entry-rate-bool", _entry(lambda e: e.update(rate_hz=True)), "summary.json",
     "trials[0].rate_hz: Input should be a valid number"),
    ("entry-no-p50", _entry(lambda e: e["rtt_us"].pop("p50")), "summary.json",
     "trials[0].rtt_us.p50: required field is missing"),
    ("entry-sent-negative", _entry(lambda e: e.update(sent=-1)), "summary.json",
     "trials[0].sent: Input should be greater than or equal to 0"),
    ("entry-loss-above-one", _entry(lambda e: e.update(loss=3)), "summary.json",
     "trials[0].loss: Input should be less than or equal to 1"),
    ("entry-error-number", _entry(lambda e: e.update(error=5)), "summary.json",
     "trials[0].error: Input should be a valid string"),
    ("entry-workload-missing", _entry(lambda e: e.pop("workload")), "summary.json",
     "trials[0].workload: required field is missing"),
    ("entry-workload-unknown", _entry(lambda e: e.update(workload="telepathy")), "summary.json",
     "trials[0].workload: 'telepathy' is not a workload of this roboscale"),
    ("entry-backend-number", _entry(lambda e: e.update(backend=7)), "summary.json",
     "trials[0].backend: Input should be a valid string"),
    ("entry-per-node-text", _entry(lambda e: e.update(per_node="all")), "summary.json",
     "trials[0]: Value error, 'per_node' is not a field of workload 'echo'"),
    ("thresholds-bad", _json("summary.json", lambda s: {**s, "thresholds": {"max_loss": 5}}),
     "summary.json", "thresholds.max_loss"),
    ("records-truncated", lambda d: (d / RECORDS).write_bytes((d / RECORDS).read_bytes()[:300]),
     "records.parquet", "not a readable Parquet file"),
    ("records-empty", _write(RECORDS, b""), "records.parquet", "not a readable Parquet file"),
    ("records-text", _write(RECORDS, b"seq,t_sent\n1,2\n"), "records.parquet",
     "not a readable Parquet file"),
    ("records-other-columns", _parquet(pa.table({"a": [1]})), "records.parquet",
     "column 'trial' is missing"),
    ("records-other-types", _parquet(pa.table({c: ["x"] for c in store.RECORD_SCHEMA.names})),
     "records.parquet", "column 'seq' is string, allowed: int64"),
    ("records-directory", _replace(RECORDS, Path.mkdir), "records.parquet", "is a directory"),
    ("records-fifo", _replace(RECORDS, os.mkfifo), "records.parquet", "is a FIFO"),
    ("metadata-no-params", _meta(lambda m: m.pop("params")), "metadata.json",
     "params: required field is missing"),
    ("metadata-params-rate-text", _meta(lambda m: m["params"].update(rate_hz="x")),
     "metadata.json", "params.rate_hz: Input should be a valid number"),
    ("metadata-a-list", lambda d: (_write("trials/t0000/metadata.json", b"[]")(d),
                                   _json("summary.json", lambda s: {**s, "trials": []})(d)),
     "metadata.json", "must be a JSON object"),
]  # fmt: skip


@pytest.mark.parametrize(("damage", "file", "expected"), [c[1:] for c in RESULTS],
                         ids=[c[0] for c in RESULTS])  # fmt: skip
def test_results_folder(
    results: Path, tmp_path: Path, damage: Callable[[Path], None], file: str, expected: str
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(results, run_dir)
    damage(run_dir)
    check(["report", str(run_dir)], file, expected)


@pytest.mark.parametrize("name", ["entry-rate-text", "entry-no-p50", "run-fifo", "run-version"])
def test_results_folder_given_to_capacity_fit(results: Path, tmp_path: Path, name: str) -> None:
    _, damage, file, expected = next(c for c in RESULTS if c[0] == name)
    run_dir = tmp_path / "run"
    shutil.copytree(results, run_dir)
    damage(run_dir)
    check(["capacity", "fit", str(run_dir), "-o", str(tmp_path / "m.json")], file, expected)


def test_trial_metadata_given_to_capacity_fit(results: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(results, run_dir)
    _json("trials/t0000/metadata.json", lambda m: {**m, "host": ["a"]})(run_dir)
    argv = ["capacity", "fit", str(run_dir), "-o", str(tmp_path / "m.json")]
    check(argv, "t0000/metadata.json: host: Input should be a valid dictionary")


def test_results_path_is_a_file_or_missing(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    check(["report", str(tmp_path / "f")], f"{tmp_path / 'f'}: is a file")
    check(["report", str(tmp_path / "nope")], f"{tmp_path / 'nope'}: no such results directory")


def test_results_trial_folder_missing_or_trials_a_file(results: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(results, run_dir)
    shutil.rmtree(run_dir / "trials" / "t0000")
    check(["report", str(run_dir)], "trials/t0000: missing; summary.json lists trial 't0000'")
    shutil.rmtree(run_dir / "trials")
    (run_dir / "trials").write_text("x")
    check(["report", str(run_dir)], "/trials: is not a folder")
    check(["export", str(run_dir)], "/trials: is not a folder")


# Graph and face-tracker results folders: each entry is read by its workload's own model.
GRAPH_NODES = ("path|scan_to_base", "topic|scan|lidar|filter", "topic|points|filter|base")


def _graph_trial(run_dir: Path) -> None:
    params = trial_params(trial="t0000", workload="graph", graph="/x/robot.yaml",
                          subject="robot")  # fmt: skip
    tables = []
    for node in GRAPH_NODES:
        sent = np.arange(1, 41, dtype=np.int64) * 50_000_000
        cols = {"seq": np.arange(40), "t_intended": sent, "t_sent": sent,
                "t_echoed": sent + 300_000, "t_received": np.zeros(40, np.int64)}  # fmt: skip
        tables.append(store.records_table("t0000", node, "local", 64, cols))
    table = pa.concat_tables(tables)
    _write_one(run_dir, params, table, summarize_trial(table, params, TH))


def _facetrack_trial(run_dir: Path) -> None:
    from roboscale.records.models import NodeHeader

    params = trial_params(trial="t0000", workload="facetrack", stack="runtime", workers=2,
                          deque_len=5, dispatch="random")  # fmt: skip
    sent = np.arange(1, 31, dtype=np.int64) * 100_000_000
    cols = {"seq": np.arange(30), "t_intended": sent, "t_sent": sent,
            "t_echoed": sent + 1_000_000, "t_received": sent + 2_000_000}  # fmt: skip
    table = store.records_table("t0000", "tracker_runtime_t0000", "local", 76_812, cols)
    figures = {"frames": 30, "frames_lost": 0, "frames_late": 0, "mean_jaccard": 0.6,
               "latency_p50_ms": 2.0, "latency_p99_ms": 2.0, "latency_mean_ms": 2.0,
               "pss_total_mb": 40.0, "pss_per_worker_mb": 20.0, "alive_workers": 2}  # fmt: skip
    tracker = {"stack": "runtime", "summary": figures, "kills": [], "processes": [],
               "counters": {}, "kill_at": 15, "jaccard": [0.6] * 30,
               "tracking_error": [1.0] * 30, "worker": [0, 1] * 15}  # fmt: skip
    times = {"cpu_user_s": 0.1, "cpu_sys_s": 0.1, "max_rss_kb": 1000}
    node = NodeHeader.model_validate({"node": "tracker_runtime_t0000", "pid": 1, "usage": times,
                                      "usage_ready": times, "facetrack": tracker})  # fmt: skip
    _write_one(run_dir, params, table, summarize_trial(table, params, TH, [node]))


def _write_one(run_dir: Path, params: dict[str, Any], table: pa.Table, entry: Any) -> None:
    folder = ResultsFolder(run_dir)
    run = {"format_version": 2, "spec_name": "w", "spec": "", "command": "x"}
    folder.write_run(RunInfo.model_validate(run))
    meta = {"format_version": 2, "params": params, "host": {"cores": 2}}
    folder.write_trial("t0000", [table], TrialMetadata.model_validate(meta))
    folder.add_entry(entry, TH.to_dict())


def _graph_path(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    return _entry(lambda e: change(e["paths"][0]))


WORKLOAD_RESULTS: list[tuple[str, Callable[[Path], None], Callable[[Path], None], str]] = [
    ("graph-no-paths", _graph_trial, _entry(lambda e: e.pop("paths")),
     "trials[0].paths: required field is missing"),
    ("graph-topics-mapping", _graph_trial, _entry(lambda e: e.update(topics={})),
     "trials[0].topics: Input should be a valid list"),
    ("graph-path-step-list", _graph_trial, _graph_path(lambda p: p.update(path=["a", "b"])),
     "trials[0].paths[0].path: Input should be a valid string"),
    ("graph-followed-negative", _graph_trial, _graph_path(lambda p: p.update(followed=-3)),
     "trials[0].paths[0].followed: Input should be greater than or equal to 0"),
    ("graph-e2e-text", _graph_trial, _entry(lambda e: e["e2e_us"].update(p50="fast")),
     "trials[0].e2e_us.p50: Input should be a valid number"),
    ("graph-topic-rate-text", _graph_trial,
     _entry(lambda e: e["topics"][0].update(rate_hz="10 Hz")),
     "trials[0].topics[0].rate_hz: Input should be a valid number"),
    ("facetrack-missing", _facetrack_trial, _entry(lambda e: e.pop("facetrack")),
     "trials[0].facetrack: required field is missing"),
    ("facetrack-summary-list", _facetrack_trial,
     _entry(lambda e: e["facetrack"].update(summary=[1])),
     "trials[0].facetrack.summary: Input should be a valid dictionary"),
    ("facetrack-lost-text", _facetrack_trial,
     _entry(lambda e: e["facetrack"]["summary"].update(frames_lost="none")),
     "trials[0].facetrack.summary.frames_lost: Input should be a valid integer"),
    ("facetrack-kills-mapping", _facetrack_trial,
     _entry(lambda e: e["facetrack"].update(kills={"worker": 1})),
     "trials[0].facetrack.kills: Input should be a valid list"),
    ("facetrack-jaccard-text", _facetrack_trial,
     _entry(lambda e: e["facetrack"].update(jaccard=["good"])),
     "trials[0].facetrack.jaccard[0]: Input should be a valid number"),
    ("facetrack-in-an-echo-entry", _facetrack_trial, _entry(lambda e: e.update(workload="echo")),
     "trials[0]: Value error, 'facetrack' is not a field of workload 'echo'"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "damage", "expected"), [c[1:] for c in WORKLOAD_RESULTS],
                         ids=[c[0] for c in WORKLOAD_RESULTS])  # fmt: skip
def test_workload_results_folder(
    tmp_path: Path,
    make: Callable[[Path], None],
    damage: Callable[[Path], None],
    expected: str,
) -> None:
    run_dir = tmp_path / "run"
    make(run_dir)
    code, err = run(["report", str(run_dir)])
    assert code == 0, err  # undamaged, it renders
    damage(run_dir)
    check(["report", str(run_dir)], "summary.json", expected)
    check(["export", str(run_dir)], "summary.json", expected)


# -- capacity model files -------------------------------------------------------------------
BASE_MODEL = DATA / "model-base.json"


def _model(change: Callable[[dict[str, Any]], Any]) -> Callable[[Path], None]:
    def apply(path: Path) -> None:
        data = json.loads(BASE_MODEL.read_text())
        change(data)
        path.write_text(json.dumps(data))

    return apply


def _params(model: str, **values: Any) -> Callable[[Path], None]:
    return _model(lambda m: m["models"][model]["params"].update(values))


TWO = "two_resource"
MODELS: list[tuple[str, Callable[[Path], None], str]] = [
    ("budget-negative", _params("cslv", cslv_bytes_s=-5),
     "models.cslv.params.cslv_bytes_s: -5 is not allowed; a budget above 0"),
    ("cpu-budget-zero", _params(TWO, cpu_budget_cores=0), "cpu_budget_cores: 0 is not allowed"),
    ("link-budget-minus-inf", _params(TWO, link_budget_bytes_s="-inf"),
     "link_budget_bytes_s: '-inf' is not allowed"),
    ("cost-nan", _params(TWO, cpu_s_per_message="nan"), "cpu_s_per_message: 'nan' is not allowed"),
    ("cost-negative", _params(TWO, cpu_s_per_byte=-1e-9), "cpu_s_per_byte: -1e-09 is not allowed"),
    ("cost-infinite", _params(TWO, cpu_s_per_node_s="inf"), "a finite cost from 0"),
    ("cost-text", _params(TWO, cpu_s_per_node_s="lots"), "must be a number or 'inf'"),
    ("param-missing", _model(lambda m: m["models"]["cslv"]["params"].clear()),
     "models.cslv.params: field 'cslv_bytes_s' is missing"),
    ("params-a-list", _model(lambda m: m["models"]["cslv"].update(params=[1])),
     "models.cslv.params: must be a mapping"),
    ("draws-short-rows", _model(lambda m: m["models"][TWO].update(draws=[[1, 2]])),
     "models.two_resource.draws: must be a list of"),
    ("draws-text", _model(lambda m: m["models"]["cslv"].update(draws=[["x"]])),
     "models.cslv.draws: must be a number"),
    ("stderr-a-list", _model(lambda m: m["models"]["cslv"].update(stderr=[])),
     "models.cslv.stderr: must be a mapping"),
    ("range-missing", _model(lambda m: m.pop("fitted_range")), "field 'fitted_range' is missing"),
    ("range-reversed", _model(lambda m: m["fitted_range"].update(nodes=[256, 2])),
     "fitted_range.nodes: [256, 2] is not allowed"),
    ("range-nan", _model(lambda m: m["fitted_range"].update(rate_hz=["nan", 5])),
     "fitted_range.rate_hz"),
    ("format-other", _model(lambda m: m.update(format="something")),
     "not a roboscale capacity model"),
    ("version-1", _model(lambda m: m.update(format_version=1)),
     "format_version: 1 is not supported"),
    ("model-unknown", _model(lambda m: m["models"].update(magic={})), "unknown model(s) ['magic']"),
    ("models-a-list", _model(lambda m: m.update(models=[])), "field 'models' must be a mapping"),
    ("sources-text", _model(lambda m: m.update(sources="results/a")), "sources: must be a list"),
    ("host-a-list", _model(lambda m: m.update(host=[])), "host: must be a mapping"),
    ("bootstrap-text", _model(lambda m: m["fit_options"].update(bootstrap="x")),
     "fit_options.bootstrap: 'x' is not allowed"),
    ("trials-text", _model(lambda m: m.update(trials="many")), "trials: must be a number"),
    ("not-json", lambda p: p.write_text("{"), "not valid JSON"),
    ("empty", lambda p: p.write_text(""), "not valid JSON"),
    ("a-list", lambda p: p.write_text("[]"), "not a roboscale capacity model"),
    ("binary", lambda p: p.write_bytes(b"\x89PNG\x00"), "a binary file"),
]  # fmt: skip


@pytest.mark.parametrize(("make", "expected"), [c[1:] for c in MODELS],
                         ids=[c[0] for c in MODELS])  # fmt: skip
def test_model_file(tmp_path: Path, make: Callable[[Path], None], expected: str) -> None:
    path = tmp_path / "model.json"
    make(path)
    check(["capacity", "predict", str(path), "--size", "4250", "--rate", "20"], str(path), expected)


def test_the_base_model_predicts() -> None:
    code, err = run(["capacity", "predict", str(BASE_MODEL), "--size", "4250", "--rate", "20"])
    assert code == 0, err


# -- output folders and command-line arguments -------------------------------------------------
@pytest.fixture
def files(tmp_path: Path) -> Iterator[dict[str, str]]:
    spec = tmp_path / "spec.yaml"
    spec.write_text(GOOD_SPEC)
    launch = tmp_path / "robot.yaml"
    launch.write_text(GOOD_LAUNCH)
    (tmp_path / "file").write_text("x")
    other = tmp_path / "other"
    other.mkdir()
    safewrite.write_json(other / "run.json", {"format_version": 1, "spec_name": "x", "spec": "y"})
    same = tmp_path / "same"
    same.mkdir()
    safewrite.write_json(
        same / "run.json", {"format_version": 1, "spec_name": "good", "spec": GOOD_SPEC}
    )
    safewrite.write_json(same / "summary.json", {"format_version": 1, "trials": []})
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine")
    yield {"spec": str(spec), "launch": str(launch), "tmp": str(tmp_path), "model": str(BASE_MODEL)}


PREDICT = ["capacity", "predict", "{model}", "--size", "4250"]
SEARCH = ["capacity", "search", "{spec}"]
ARGS: list[tuple[str, list[str], list[str]]] = [
    ("out-empty", ["bench", "{spec}", "--out", ""], ["argument --out: an empty path"]),
    ("out-a-file", ["bench", "{spec}", "--out", "{tmp}/file"], ["file: is a file; --out names"]),
    ("out-under-a-file", ["bench", "{spec}", "--out", "{tmp}/file/sub"],
     ["file/sub: cannot write results there"]),
    ("out-another-experiment", ["bench", "{spec}", "--out", "{tmp}/other"],
     ["other: holds results of experiment 'x' from another spec"]),
    ("out-another-experiment-resume", ["bench", "{spec}", "--out", "{tmp}/other", "--resume"],
     ["other: holds results of experiment 'x' from another spec", "even with --resume"]),
    ("out-same-without-resume", ["bench", "{spec}", "--out", "{tmp}/same"],
     ["same: holds results of 'good' already (0 of 2 trials finished); --resume"]),
    ("out-not-results", ["bench", "{spec}", "--out", "{tmp}/notes"],
     ["notes: is not empty and holds no roboscale results"]),
    ("search-out-empty", [*SEARCH, "--out", ""], ["argument --out: an empty path"]),
    ("search-out-another", [*SEARCH, "--out", "{tmp}/other"], ["from another spec"]),
    ("sweep-huge-with-yes", ["bench", str(DATA / "sweep" / "huge-sweep.yaml"), "--yes"],
     ["huge-sweep.yaml:3: sweep: 1,000,000 trials", "even with --yes"]),
    ("backend-unknown", ["bench", "{spec}", "--backend", "zenohh", "--dry-run"],
     ["--backend: unknown backend 'zenohh'"]),
    ("backend-empty", ["bench", "{spec}", "--backend", ",", "--dry-run"],
     ["--backend: unknown backend ''"]),
    ("predict-rate-nan", [*PREDICT, "--rate", "nan"], ["argument --rate: 'nan' is not a finite"]),
    ("predict-rate-inf", [*PREDICT, "--rate", "inf"], ["argument --rate: 'inf' is not a finite"]),
    ("predict-rate-negative", [*PREDICT, "--rate", "-1"], ["--rate: -1 is out of range"]),
    ("predict-rate-zero", [*PREDICT, "--rate", "0"], ["--rate: 0 is out of range; allowed: above"]),
    ("predict-rate-absurd", [*PREDICT, "--rate", "1e300"], ["--rate: 1e300 is out of range"]),
    ("predict-rate-text", [*PREDICT, "--rate", "fast"], ["--rate: 'fast' is not a number"]),
    ("predict-nodes-fraction", [*PREDICT, "--nodes", "2.5"], ["--nodes: '2.5' is not allowed"]),
    ("predict-nodes-negative", [*PREDICT, "--nodes", "-4"], ["--nodes: -4 is out of range"]),
    ("predict-nodes-nan", [*PREDICT, "--nodes", "nan"], ["--nodes: 'nan' is not allowed"]),
    ("predict-nodes-one", [*PREDICT, "--nodes", "1"], ["a whole number from 2"]),
    ("predict-nodes-absurd", [*PREDICT, "--nodes", "10" * 20], ["--nodes: 1010"]),
    ("predict-both", [*PREDICT, "--nodes", "4", "--rate", "10"], ["give either --rate"]),
    ("predict-neither", PREDICT, ["give either --rate"]),
    ("predict-size-negative", [*PREDICT, "--rate", "1", "--size", "-5"], ["--size: '-5'"]),
    ("predict-size-huge", [*PREDICT, "--rate", "1", "--size", "99GB"], ["--size: '99GB'"]),
    ("search-max-nodes-one", [*SEARCH, "--max-nodes", "1"], ["--max-nodes: 1 is out of range"]),
    ("search-max-nodes-negative", [*SEARCH, "--max-nodes", "-3"], ["--max-nodes: -3"]),
    ("search-max-rate-negative", [*SEARCH, "--max-rate", "-10"], ["--max-rate: -10 is out of"]),
    ("search-max-rate-nan", [*SEARCH, "--max-rate", "nan"], ["--max-rate: 'nan'"]),
    ("search-max-rate-below-spec", [*SEARCH, "--by", "rate", "--max-rate", "1"],
     ["--max-rate: 1 Hz is below the spec's lowest rate (10 Hz)"]),
    ("search-rel-tol-zero", [*SEARCH, "--rel-tol", "0"], ["--rel-tol: 0 is out of range"]),
    ("search-rel-tol-two", [*SEARCH, "--rel-tol", "2"], ["--rel-tol: 2 is out of range"]),
    ("search-budget-negative", [*SEARCH, "--budget-s", "-1"], ["--budget-s: -1 is out of"]),
    ("search-budget-nan", [*SEARCH, "--budget-s", "nan"], ["--budget-s: 'nan'"]),
    ("search-by-unknown", [*SEARCH, "--by", "mood"], ["argument --by: invalid choice"]),
    ("fit-bootstrap-few", ["capacity", "fit", "{tmp}/same", "-o", "{tmp}/m.json",
                           "--bootstrap", "5"], ["--bootstrap: 5 is out of range"]),
    ("fit-seed-negative", ["capacity", "fit", "{tmp}/same", "-o", "{tmp}/m.json", "--seed", "-1"],
     ["--seed: -1 is out of range"]),
    ("fit-output-empty", ["capacity", "fit", "{tmp}/same", "-o", ""], ["an empty path"]),
    ("chaos-rate-negative", ["chaos", "{launch}", "--rate", "-1"], ["--rate: '-1' is not allowed"]),
    ("chaos-rate-nan", ["chaos", "{launch}", "--rate", "nan"], ["--rate: 'nan' is not allowed"]),
    ("chaos-rate-text", ["chaos", "{launch}", "--rate", "lots"], ["--rate: 'lots'"]),
    ("chaos-duration-zero", ["chaos", "{launch}", "--duration", "0"], ["--duration: '0'"]),
    ("chaos-method-unknown", ["chaos", "{launch}", "--method", "meteor"],
     ["--method: unknown method 'meteor'"]),
    ("chaos-weight-negative", ["chaos", "{launch}", "--method", "exception:-1"],
     ["weight of exception must be a number > 0"]),
    ("chaos-seed-fraction", ["chaos", "{launch}", "--seed", "1.5"], ["--seed: '1.5' is not"]),
    ("chaos-settle-negative", ["chaos", "{launch}", "--settle", "-1"], ["--settle: '-1'"]),
    ("chaos-target-empty", ["chaos", "{launch}", "--target", ""], ["--target: ''"]),
    ("chaos-log-empty", ["chaos", "{launch}", "--log", ""], ["argument --log: an empty path"]),
    ("launch-chaos-not-key-value", ["launch", "{launch}", "--chaos", "rate"],
     ["--chaos: 'rate' is not key=value"]),
    ("launch-chaos-rate-text", ["launch", "{launch}", "--chaos", "rate=abc"],
     ["--chaos: rate: 'abc' is not allowed"]),
    ("launch-chaos-unknown-key", ["launch", "{launch}", "--chaos", "colour=red"],
     ["--chaos: colour: unknown key"]),
    ("launch-events-empty", ["launch", "{launch}", "--events", ""], ["an empty path"]),
    ("launch-events-a-directory", ["launch", "{launch}", "--events", "{tmp}"],
     ["{tmp}: Is a directory"]),
    ("chaos-log-a-directory", ["chaos", "{launch}", "--log", "{tmp}", "--duration", "1"],
     ["{tmp}"]),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "expected"), [c[1:] for c in ARGS], ids=[c[0] for c in ARGS])
def test_arguments(files: dict[str, str], argv: list[str], expected: list[str]) -> None:
    check([a.format(**files) for a in argv], *[e.format(**files) for e in expected])
