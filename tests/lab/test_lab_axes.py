"""The lab's priority, pinning and load-level axes: planned as axes, applied to real
trials, refused clearly where they cannot apply."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from roboscale.env import sched
from roboscale.errors import UserError
from roboscale.lab.runner import run_sweep
from roboscale.spec.loader import load_spec
from roboscale.spec.planner import count_trials, plan

AXES = """\
name: axes
sweep:
  backend: native
  rate_hz: 200
  priority: [normal, fifo]
  pin: [null, "0"]
  cpu_load: [none, heavy]
trial:
  runs: 1
  messages: 40
  warmup: 5
  drain_s: 1
"""


def _spec(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_the_axes_cross_into_trials_named_by_them(tmp_path: Path) -> None:
    spec = load_spec(_spec(tmp_path, AXES))
    trials = plan(spec)
    assert count_trials(spec) == len(trials) == 8
    names = [t.trial for t in trials]
    assert "t0007-native-200hz-text-p1-fifo-pin0-loadheavy-r0" in names
    heavy = [t for t in trials if t.cpu_load == "heavy"]
    assert {t.load_cpu for t in heavy} == {0.75}
    assert {t.load_cpu for t in trials if t.cpu_load == "none"} == {0.0}


@pytest.mark.parametrize(
    ("axis", "value", "allowed"),
    [("priority", "rt", "'normal' or 'fifo'"), ("pin", "'0;rm'", "should match pattern")],
)
def test_bad_values_are_refused_with_what_is_allowed(
    tmp_path: Path, axis: str, value: str, allowed: str
) -> None:
    text = f"name: bad\nsweep:\n  backend: native\n  rate_hz: 10\n  {axis}: {value}\n"
    with pytest.raises(UserError, match=allowed):
        load_spec(_spec(tmp_path, text))


def test_the_wrapper_sets_fifo_and_cores_on_the_command_it_runs() -> None:
    if os.geteuid() != 0:
        with pytest.raises(UserError, match="needs root"):
            sched.check("fifo", None)
        return
    probe = (
        "import os; "
        "print(os.sched_getscheduler(0) == os.SCHED_FIFO, sorted(os.sched_getaffinity(0)))"
    )
    argv = [*sched.prefix("fifo", "0"), sys.executable, "-c", probe]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["True", "[0]"]


NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_without_root_fifo_is_refused_by_the_check_and_by_the_kernel() -> None:
    """As a real unprivileged user (nobody), in Debian's python3 (stdlib only)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to become nobody")
    src = str(Path(sched.__file__).resolve().parents[2])
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": src}
    code = "from roboscale.env.sched import check\ncheck('fifo', None)"
    done = subprocess.run([*NOBODY, "/usr/bin/python3", "-c", code], capture_output=True,
                          text=True, env=env)  # fmt: skip
    assert "UserError: priority fifo (SCHED_FIFO) needs root" in done.stderr
    argv = [*NOBODY, "/usr/bin/python3", "-m", "roboscale.env.sched", "--fifo", "10", "--", "true"]
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    assert done.returncode == 2 and "Operation not permitted" in done.stderr


def test_cores_that_do_not_exist_are_refused() -> None:
    with pytest.raises(UserError, match="do not exist here"):
        sched.check("normal", "999")


def test_a_real_trial_runs_under_fifo_on_one_core(tmp_path: Path) -> None:
    """The node processes of a real trial report the policy and cores they ran with."""
    if os.geteuid() != 0:
        pytest.skip("SCHED_FIFO needs root (its refusal is tested above)")
    text = AXES.replace("[normal, fifo]", "fifo").replace('[null, "0"]', '"0"')
    text = text.replace("[none, heavy]", "normal")
    spec = load_spec(_spec(tmp_path, text))
    out = tmp_path / "run"
    outcome = run_sweep(spec, plan(spec), out, text, "test", Console(quiet=True))
    assert outcome.failed == 0
    (entry,) = json.loads((out / "summary.json").read_text())["trials"]
    assert entry["received"] == 40 and entry["priority"] == "fifo" and entry["pin"] == "0"
    assert entry["load_cpu"] == 0.25
    meta = json.loads(next((out / "trials").glob("*/metadata.json")).read_text())
    usage = [n["usage"] for n in meta["nodes"]]
    assert usage and all(u["sched_fifo"] == 1 and u["cores"] == 1 for u in usage)


def test_real_machines_and_one_host_traffic_are_refused(tmp_path: Path) -> None:
    from dataclasses import replace

    from roboscale.backends.base import get_backend
    from roboscale.lab.envs import check_placement

    text = "name: t\nsweep:\n  backend: zenoh\n  rate_hz: 10\n  traffic: heavy\ntrial:\n  runs: 1\n"
    (trial,) = plan(load_spec(_spec(tmp_path, text)))
    with pytest.raises(UserError, match="flows between two hosts"):
        check_placement(get_backend("zenoh"), trial)
    remote = replace(trial, traffic="", priority="fifo", inventory="/x/inventory.yaml")
    with pytest.raises(UserError, match="real machines over SSH cannot set them"):
        check_placement(get_backend("zenoh"), remote)


TRAFFIC = """\
name: traffic
sweep:
  backend: zenoh
  rate_hz: 50
  hosts: 2
  link: ethernet
  traffic: [none, normal]
env:
  verify_link: false
  subnet: 10.239.0.0/24
trial:
  runs: 1
  messages: 40
  warmup: 5
  drain_s: 1
"""


@pytest.mark.netns
@pytest.mark.zenoh
def test_traffic_levels_flow_between_two_emulated_hosts(
    tmp_path: Path, root: None, zenoh: None
) -> None:
    spec = load_spec(_spec(tmp_path, TRAFFIC))
    out = tmp_path / "run"
    outcome = run_sweep(spec, plan(spec), out, TRAFFIC, "test", Console(quiet=True))
    assert outcome.failed == 0
    entries = json.loads((out / "summary.json").read_text())["trials"]
    assert [(e["traffic"], e["load_net_mbit"], e["received"]) for e in entries] == [
        ("none", 0.0, 40),
        ("normal", 5.0, 40),
    ]
    left = subprocess.run(["pgrep", "-f", "roboscale.env.load udp"], capture_output=True)
    assert left.stdout == b""  # the stream stopped with its trial
