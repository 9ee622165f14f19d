"""Shared fixtures. Integration tests may skip outside CI only when their real
dependency cannot be present; in CI (CI=true) a missing dependency fails them."""

from __future__ import annotations

import importlib
import os
import shutil
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings as hypothesis_settings

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}

# The parsers' fuzz tests (Hypothesis). CI replays a fixed set of examples per test
# (derandomize), the same budget every run, so a landing never hangs on which inputs a
# random search happened to draw; a developer's run draws new ones every time, and
# `make fuzz` runs the fuzz tests on fresh random examples, several rounds. A failing
# example is printed with its reproduce blob either way.
hypothesis_settings.register_profile("ci", derandomize=True, print_blob=True)
hypothesis_settings.register_profile("dev", print_blob=True)
hypothesis_settings.register_profile("fuzz", print_blob=True, database=None)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if IN_CI else "dev"))

# A shell without job control starts background jobs (`make test &`) with SIGINT
# ignored, and exec passes that on: children the tests stop with SIGINT, as a user's
# Ctrl-C would, then never stop. Restored here, so every child starts with the default.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
REPO = Path(__file__).resolve().parent.parent
# How long a test waits for an event (a process up or gone, a message, a restart)
# before it calls it a hang. A safety net, never a measure: every wait ends on its
# event, so this is generous enough for a machine with every core busy.
EVENT_TIMEOUT_S = 60.0


def require(available: bool, reason: str) -> None:
    if available:
        return
    if IN_CI:
        pytest.fail(f"CI must run this test, but: {reason}")
    pytest.skip(reason)


def require_module(name: str, extra: str) -> None:
    """At a test module's top: a Python package it imports (skipped only outside CI)."""
    try:
        importlib.import_module(name)
    except ImportError:
        if IN_CI:
            pytest.fail(f"CI must run this module, but {name} ({extra}) is missing")
        pytest.skip(f"{name} is missing (make test installs {extra})", allow_module_level=True)


def ros1_available() -> bool:
    if shutil.which("roscore") is None:
        return False
    probe = subprocess.run(
        ["/usr/bin/python3", "-c", "import rospy, genpy.dynamic, sensor_msgs.msg"],
        capture_output=True,
        check=False,
    )
    return probe.returncode == 0


@pytest.fixture(scope="session")
def ros1() -> None:
    require(ros1_available(), "ROS 1 is not installed (sudo make ros1)")


@pytest.fixture(scope="session")
def zenoh() -> None:
    try:
        import zenoh  # noqa: F401

        ok = True
    except ImportError:
        ok = False
    require(ok, "eclipse-zenoh is not installed (make test installs it into .venv)")


def dds_available() -> bool:
    try:
        import cyclonedds  # noqa: F401
    except ImportError:
        return False
    return shutil.which("ddsperf") is not None


@pytest.fixture(scope="session")
def dds() -> None:
    """Cyclone DDS: the Python binding (the dds extra) and Debian's ddsperf."""
    require(dds_available(), "Cyclone DDS is missing (make test installs cyclonedds and ddsperf)")


@pytest.fixture(scope="session")
def root() -> None:
    """Network namespaces, veth, traffic control and cgroups need root."""
    require(os.geteuid() == 0, "needs root for network namespaces, veth, tc and cgroups")


@pytest.fixture(scope="session")
def erlang() -> None:
    require(shutil.which("erl") is not None, "Erlang is not installed (apt-get install erlang-nox)")


# One planned trial run on this machine: its record tables and the nodes' reports.
RunTrial = Callable[[Any], tuple[list[Any], list[dict[str, object]]]]


@pytest.fixture
def run_trial(tmp_path: Path) -> RunTrial:
    """Run one TrialPlan's nodes here as the lab does (infrastructure, nodes, records), with
    no results folder and no summary: what the backend and workload tests look at."""
    from roboscale.backends.base import get_backend
    from roboscale.lab.trial import run_here

    def run(t: Any) -> tuple[list[Any], list[dict[str, object]]]:
        backend = get_backend(t.backend)
        backend.check()
        tables, nodes = run_here(backend, t, tmp_path)
        return tables, [n.to_dict() for n in nodes]  # the headers as agents wrote them

    return run


def trial_params(**overrides: Any) -> dict[str, Any]:
    """The parameters a planned trial records (run.json, metadata.json, summary entries),
    for tests that write a results folder by hand."""
    from roboscale.spec.planner import plan
    from roboscale.spec.schema import Spec

    spec = Spec.model_validate({"name": "t", "sweep": {"rate_hz": [10.0]}})
    return {**plan(spec)[0].params(), **overrides}


def distribution(**given: float | None) -> dict[str, float | None]:
    """A latency distribution as summaries hold it; the keys not given are null."""
    keys = ("p50", "p90", "p99", "p999", "max", "mean", "std", "ci80_low", "ci80_high")
    return {k: given.get(k) for k in keys}


def summary_entry(**fields: Any) -> Any:
    """A summary entry as the results folder gives it (its workload's typed model): a
    finished trial of 10 messages, all back, with the fields given (an `error` makes it a
    failed trial's)."""
    from roboscale.records.models import ENTRY_MODELS, FailedEntry

    if fields.get("error"):
        return FailedEntry.model_validate({**trial_params(), **fields})
    figures = {
        "sent": 10, "received": 10, "lost": 0, "loss": 0.0, "achieved_rate_hz": 10.0,
        "achieved_rate_min_hz": 10.0, "rtt_us": distribution(), "one_way_us": distribution(),
        "send_lag_us": distribution(), "sustained": True, "verdict": {"sustained": True},
    }  # fmt: skip
    data = {**trial_params(), **figures, **fields}
    return ENTRY_MODELS[data["workload"]].model_validate(data)


def write_run(run_dir: Path, **fields: Any) -> None:
    """A results folder's run.json, as the lab writes it (fields not given: defaults)."""
    from roboscale.records.folder import ResultsFolder
    from roboscale.records.models import RunInfo
    from roboscale.records.schema import FORMAT_VERSION

    ResultsFolder(run_dir).write_run(RunInfo.model_validate({"format_version": FORMAT_VERSION,
                                                             **fields}))  # fmt: skip


def write_trial(run_dir: Path, trial: str, tables: list[Any], params: dict[str, Any]) -> None:
    """A trial's records and metadata, as the lab writes them."""
    from roboscale.records.folder import ResultsFolder
    from roboscale.records.models import TrialMetadata
    from roboscale.records.schema import FORMAT_VERSION

    meta = {"format_version": FORMAT_VERSION, "params": params, "host": {"cores": 2}}
    ResultsFolder(run_dir).write_trial(trial, tables, TrialMetadata.model_validate(meta))


def add_entry(run_dir: Path, entry: Any, thresholds: dict[str, float | None]) -> None:
    """A summary entry (a model, or a failed trial's parameters and error) added."""
    from roboscale.records.folder import ResultsFolder
    from roboscale.records.models import FailedEntry

    if isinstance(entry, dict):
        entry = FailedEntry.model_validate(entry)
    ResultsFolder(run_dir).add_entry(entry, thresholds)
