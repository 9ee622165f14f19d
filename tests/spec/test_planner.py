from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

from roboscale.spec.loader import load_spec
from roboscale.spec.planner import plan


def spec_file(tmp_path: Path, extra: str = "") -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: p\nsweep:\n  backend: [zenoh, ros1]\n  rate_hz: [10, 100]\n"
        "  payload: [text, 1KB]\n  pairs: [1, 4]\ntrial:\n  runs: 3\n  duration_s: 2\n" + extra
    )
    return path


def test_cross_product_and_ids(tmp_path: Path) -> None:
    trials = plan(load_spec(spec_file(tmp_path)))
    assert len(trials) == 2 * 2 * 2 * 2 * 3
    assert [t.index for t in trials] == list(range(48))
    assert len({t.trial for t in trials}) == 48
    first = trials[0]
    assert first.trial == "t0000-zenoh-10hz-text-p1-r0"
    assert (first.backend, first.payload, first.payload_bytes, first.pairs) == (
        "zenoh",
        "text",
        11,
        1,
    )
    # duration_s sets the message count from each rate
    assert {(t.rate_hz, t.messages) for t in trials} == {(10.0, 20), (100.0, 200)}


def test_backend_override(tmp_path: Path) -> None:
    trials = plan(load_spec(spec_file(tmp_path)), ["ros1"])
    assert {t.backend for t in trials} == {"ros1"}
    assert len(trials) == 24


def test_thesis_compat_has_no_warmup(tmp_path: Path) -> None:
    trials = plan(load_spec(spec_file(tmp_path, "  mode: thesis_compat\n  warmup: 30\n")))
    assert all(t.warmup == 0 and t.mode == "thesis_compat" for t in trials)


def test_shuffled_order_is_seeded(tmp_path: Path) -> None:
    path = spec_file(tmp_path, "  order: shuffled\nseed: 3\n")
    a = [t.trial.split("-", 1)[1] for t in plan(load_spec(path))]
    b = [t.trial.split("-", 1)[1] for t in plan(load_spec(path))]
    ordered = [t.trial.split("-", 1)[1] for t in plan(load_spec(spec_file(tmp_path)))]
    assert a == b
    assert a != ordered
    assert sorted(a) == sorted(ordered)


def test_intended_duration(tmp_path: Path) -> None:
    t = plan(load_spec(spec_file(tmp_path)))[0]
    assert t.intended_duration_s == (t.messages + t.warmup) / t.rate_hz


def test_env_axes_come_first_and_label_trials(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text(
        "name: h\nsweep:\n  backend: zenoh\n  rate_hz: [10, 20]\n  hosts: [2, 4]\n"
        "  link: [ethernet, wifi]\n  cpu: [null, 0.5]\ntrial:\n  runs: 1\n"
    )
    trials = plan(load_spec(path))
    assert len(trials) == 16
    keys = [t.env_key for t in trials]
    # trials sharing hosts, link and quota are adjacent, so each set comes up once
    assert len({k for i, k in enumerate(keys) if i == 0 or keys[i - 1] != k}) == 8
    assert trials[0].trial == "t0000-zenoh-10hz-text-p1-h2-ethernet-r0"
    assert trials[1].trial == "t0001-zenoh-20hz-text-p1-h2-ethernet-r0"
    assert trials[2].trial == "t0002-zenoh-10hz-text-p1-h2-ethernet-cpu0p5-r0"
    assert all(t.emulated for t in trials)


def test_senders_talk_to_every_echoer_host(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text(
        "name: h\nsweep:\n  backend: zenoh\n  rate_hz: 10\n  hosts: 6\n  pairs: 2\n"
        "env:\n  pairs_per: host_pair\ntrial:\n  runs: 1\n"
    )
    (t,) = plan(load_spec(path))
    assert (t.sender_hosts, t.pairs) == (3, 2 * 3 * 3)
    links = {(t.host_of("sender", p), t.host_of("echoer", p)) for p in range(t.pairs)}
    assert links == {(s, e) for s in range(3) for e in range(3, 6)}


def test_one_host_runs_everything_locally(tmp_path: Path) -> None:
    (t, *_) = plan(load_spec(spec_file(tmp_path)))
    assert not t.emulated and t.host_of("sender", 3) == t.host_of("echoer", 3) == 0


def workload_spec(tmp_path: Path, sweep: str) -> Path:
    path = tmp_path / "w.yaml"
    path.write_text("name: w\ntrial:\n  runs: 1\nsweep:\n  backend: zenoh\n  rate_hz: 10\n" + sweep)
    return path


def test_each_workload_crosses_only_its_own_axes(tmp_path: Path) -> None:
    sweep = (
        "  workload: [echo, fanout, ping, chain]\n  listeners: [1, 5]\n"
        "  chain_length: 5\n  ack: [false, true]\n  pairs: [1, 2]\n"
    )
    trials = plan(load_spec(workload_spec(tmp_path, sweep)))
    ids = [t.trial.split("-", 1)[1] for t in trials]
    assert ids == [
        "zenoh-10hz-text-p1-r0",
        "zenoh-10hz-text-p2-r0",
        "zenoh-fanout1-10hz-text-p1-r0",
        "zenoh-fanout1ack-10hz-text-p1-r0",
        "zenoh-fanout5-10hz-text-p1-r0",
        "zenoh-fanout5ack-10hz-text-p1-r0",
        "zenoh-ping-10hz-text-p1-r0",
        "zenoh-pingpong-10hz-text-p1-r0",
        "zenoh-chain5-10hz-text-p1-r0",
        "zenoh-chain5ack-10hz-text-p1-r0",
    ]
    fan = trials[4]
    assert (fan.workload, fan.listeners, fan.ack, fan.measured_nodes) == ("fanout", 5, False, 5)
    chain = trials[8]
    assert (chain.chain_length, chain.measured_nodes, chain.pairs) == (5, 4, 1)
    assert trials[0].workload == "echo" and trials[0].measured_nodes == 1


def test_default_workload_is_echo(tmp_path: Path) -> None:
    trials = plan(load_spec(spec_file(tmp_path)))
    assert {(t.workload, t.listeners, t.chain_length, t.ack) for t in trials} == {
        ("echo", 0, 0, False)
    }


def test_flow_hosts(tmp_path: Path) -> None:
    from dataclasses import replace

    chain = plan(load_spec(workload_spec(tmp_path, "  workload: chain\n")))[0]
    assert [chain.flow_host(i) for i in range(5)] == [0] * 5
    chain3 = replace(chain, hosts=3)
    assert [chain3.flow_host(i) for i in range(5)] == [0, 1, 2, 0, 1]
    fan = replace(chain, workload="fanout", listeners=4, chain_length=0, hosts=3)
    assert [fan.flow_host(i) for i in range(5)] == [0, 1, 2, 1, 2]


def test_shuffled_trials_stay_grouped_by_hosts(tmp_path: Path) -> None:
    path = tmp_path / "h.yaml"
    path.write_text(
        "name: h\nsweep:\n  backend: zenoh\n  rate_hz: [10, 20, 30]\n  hosts: [2, 4]\n"
        "  link: [ethernet, wifi]\ntrial:\n  runs: 2\n  order: shuffled\n"
    )
    trials = plan(load_spec(path))
    keys = [t.env_key for t in trials]
    changes = sum(1 for a, b in itertools.pairwise(keys) if a != b)
    assert changes == 3  # four host sets, each brought up once
    within = [t.rate_hz for t in trials if t.env_key == keys[0]]
    assert within != sorted(within)  # shuffled inside the group (seed 0)


def test_the_link_crossed_is_what_the_lab_builds(tmp_path: Path) -> None:
    base = plan(load_spec(spec_file(tmp_path)))[0]
    assert base.link_crossed == "loopback"
    assert replace(base, hosts=2).link_crossed == "ethernet"  # emulated hosts, no link named
    assert replace(base, hosts=3, link="wifi").link_crossed == "wifi"
    assert replace(base, hosts=1, link="wifi", cpu=0.5).link_crossed == "loopback"


def test_count_and_rate_samples_match_the_plan(tmp_path: Path) -> None:
    from roboscale.lab.runner import estimate_s
    from roboscale.spec.planner import count_trials, rate_samples

    extras = [
        "",
        "  workload: [echo, fanout, ping, chain]\n  listeners: [2, 3]\n  ack: [false, true]\n"
        "  chain_length: [3, 4, 5]\n",
        "  hosts: [1, 2]\n  cpu: [null, 0.5]\n  workload: [ping, echo]\n",
    ]
    for extra in extras:
        text = (
            spec_file(tmp_path)
            .read_text()
            .replace("  pairs: [1, 4]\n", "  pairs: [1, 4]\n" + extra)
        )
        spec = load_spec(spec_file(tmp_path, "") if not extra else _write(tmp_path, text))
        for backends in (None, ["ros1"]):
            trials = plan(spec, backends)
            assert count_trials(spec, backends) == len(trials)
            samples = rate_samples(spec, backends)
            assert sum(n for _, n in samples) == len(trials)
            expected = sum(estimate_s(t) for t in trials)
            assert abs(sum(estimate_s(t) * n for t, n in samples) - expected) < 1e-6 * expected


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    return path
