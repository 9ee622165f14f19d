"""The headline: fastest backend per configuration with the ratio's interval, the highest
sustained rate and why the next one failed, warnings about runs that disagree."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from tests.conftest import trial_params

from roboscale.analysis.headline import headline
from roboscale.analysis.stats import summarize_trial
from roboscale.analysis.verdict import Thresholds
from roboscale.records.models import SummaryEntry
from roboscale.records.store import records_table

TH = Thresholds()


def trial(backend: str, rate: float, run: int, median_us: float, n: int = 400) -> tuple[
        SummaryEntry, pa.Table]:  # fmt: skip
    rng = np.random.default_rng(run * 1000 + int(rate) + len(backend))
    name = f"{backend}-{rate:g}-r{run}"
    period = int(1e9 / rate)
    sent = np.arange(1, n + 1, dtype=np.int64) * period
    rtt = (rng.lognormal(np.log(median_us), 0.2, n) * 1e3).astype(np.int64)
    cols = {"seq": np.arange(n), "t_intended": sent, "t_sent": sent,
            "t_echoed": sent + rtt // 2, "t_received": sent + rtt}  # fmt: skip
    params = trial_params(trial=name, backend=backend, rate_hz=rate, payload="text",
                          payload_bytes=11, run=run)  # fmt: skip
    table = records_table(name, "sender_0", "local", 11, cols)
    return summarize_trial(table, params, TH), table


def test_the_fastest_backend_its_ratio_and_where_each_stops() -> None:
    made = [trial("zenoh", 100.0, r, 200.0) for r in range(3)]
    made += [trial("ros1", 100.0, r, 400.0) for r in range(3)]
    made += [trial("zenoh", 1000.0, 0, 250.0), trial("ros1", 1000.0, 0, 3000.0)]
    tables = {e.trial: t for e, t in made}
    h = headline([e for e, _ in made], tables.get, quick=False)
    sections = dict(h.sections)
    fastest = sections["Fastest backend per configuration"]
    assert fastest[0] == "fastest by median latency: zenoh in 2 of 2 configurations"
    at_100 = fastest[1]
    assert at_100.startswith("zenoh 2") and "faster than ros1 at text, 100 Hz" in at_100
    assert "3 runs" in at_100  # across runs: the interval is over runs, then messages
    low, high = (float(x) for x in at_100.split("[")[1].split("]")[0].split(", "))
    assert 1.5 < low <= high < 2.5 and low < 2.2 and high > 1.8  # about 400 / 200
    assert "[not sustained: ros1]" in fastest[2]  # 3 ms round trips at 1 kHz
    stops = sections["Highest sustained rate"]
    assert stops[0].startswith("ros1 text: sustained up to 100 Hz; at 1000 Hz: ")
    assert "of round trips" in stops[0] and stops[1].startswith("zenoh text: sustained at every")


def test_runs_that_drift_are_warned_about_and_quick_runs_say_so() -> None:
    made = [trial("zenoh", 100.0, r, m) for r, m in enumerate((200.0, 260.0, 330.0))]
    made += [trial("ros1", 100.0, r, 400.0) for r in range(3)]
    tables = {e.trial: t for e, t in made}
    h = headline([e for e, _ in made], tables.get, quick=True)
    assert h.warnings[0] == "quick run: short trials, figures are indicative only"
    assert any("zenoh at text, 100 Hz: medians rose run after run" in w for w in h.warnings)
    assert h.lines()[0].startswith("note: quick run")


def test_trials_beside_other_work_or_steal_are_warned_about() -> None:
    from roboscale.records.models import Usage

    quiet, _ = trial("zenoh", 1000.0, 0, 250.0)
    busy, _ = trial("zenoh", 1000.0, 1, 250.0)
    stolen, _ = trial("zenoh", 1000.0, 2, 250.0)
    unknown, _ = trial("zenoh", 1000.0, 3, 250.0)  # older results: nothing measured
    window = {"cpu_s_total": 5.0, "host_window_s": 6.0}
    quiet = quiet.model_copy(update={"usage": Usage(**window, host_other_cpu_s=0.3,
                                                    host_steal_s=0.0)})  # fmt: skip
    busy = busy.model_copy(update={"usage": Usage(**window, host_other_cpu_s=3.0,
                                                  host_steal_s=0.0)})  # fmt: skip
    stolen = stolen.model_copy(update={"usage": Usage(**window, host_other_cpu_s=0.0,
                                                      host_steal_s=0.12)})  # fmt: skip
    h = headline([quiet, busy, stolen, unknown], lambda _: None, quick=False)
    (warning,) = [w for w in h.warnings if "beside other work" in w]
    assert warning.startswith("2 of 4 trials ran beside other work on this machine")
    assert f"most: {busy.trial}, 0.50 cores of other processes, 0.00 of hypervisor" in warning
    h = headline([quiet, unknown], lambda _: None, quick=False)
    assert not [w for w in h.warnings if "beside other work" in w]
    # A trial's own background load (sweep.cpu_load, env.load_cpu) is the experiment.
    loaded = busy.model_copy(update={"load_cpu": 0.5, "cpu_load": "normal"})
    h = headline([quiet, loaded, unknown], lambda _: None, quick=False)
    assert not [w for w in h.warnings if "beside other work" in w]
