"""Background load: bounded CPU and network load inside emulated hosts."""

from __future__ import annotations

import pytest

from roboscale.env.cleanup import leftovers
from roboscale.env.cpu import CpuLimit
from roboscale.env.hosts import HostSet
from roboscale.env.load import busy, cpu_load, net_load
from roboscale.errors import UserError


def test_loads_refuse_unbounded_or_bad_settings() -> None:
    with pytest.raises(UserError, match="at most 3600"):
        cpu_load(None, 0.5, 0)
    with pytest.raises(UserError, match="duty"):
        cpu_load(None, 1.5, 1)
    assert busy(0.5, 0.05, period=0.01) >= 1


@pytest.mark.netns
def test_cpu_and_network_load_run_in_hosts_and_stop(root: None) -> None:
    with HostSet(2, cpu=CpuLimit(quota=0.5), verify_link=False) as hs:
        with cpu_load(hs.hosts[0], duty=0.5, duration=1.0) as cpu:
            net = net_load(hs.hosts[0], hs.hosts[1], mbit=20, duration=1.0)
            stream, sink = net.wait()
            (spun,) = cpu.wait()
        assert spun["periods"] > 10
        assert 0 < sink["received"] <= stream["sent"]
        assert stream["sent"] >= 0.5 * 20e6 / 8  # paced on deadlines, not best effort
        with cpu_load(hs.hosts[1], duty=1.0, duration=30) as long_load:
            pass  # leaving the block stops it at once
        assert all(p.poll() is not None for p in long_load.procs)
        run_id = hs.run_id
    assert leftovers(run_id) == []
