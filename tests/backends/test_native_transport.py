"""native-proc on the bridge's opt-in lowlatency transport (NativeProcBackend(transport)):
the setting reaches each node's bridge, and a real trial on it echoes every message."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.backends.test_trials import check_complete, trial

from roboscale.backends.base import MessageKind, NodeContext, NodeSetting
from roboscale.backends.native import NativeProcBackend, NativeProcSession
from roboscale.lab.trial import run_here
from roboscale.runtime.executor import Runtime


def test_an_unknown_transport_is_refused() -> None:
    with pytest.raises(ValueError, match="allowed are queued, lowlatency"):
        NativeProcBackend("fast")  # type: ignore[arg-type]


def test_the_lab_default_stays_queued() -> None:
    backend = NativeProcBackend()
    config = backend.node_config("echoer", 0, NodeSetting(trial="t", listen=True))
    assert config["transport"] == "queued"


@pytest.mark.zenoh
def test_a_node_opens_its_bridge_on_the_transport_asked(rt: Runtime) -> None:
    """The node's config, as the lab hands it to the node's process, opens a real bridge on
    the lowlatency transport."""
    backend = NativeProcBackend("lowlatency")
    config = backend.node_config("echoer", 0, NodeSetting(trial="t", listen=True))
    session = NativeProcSession(NodeContext(name="echoer", host="h0", config=config), rt)
    try:
        session.subscribe("/ping", MessageKind("bytes", 64), lambda seq, msg: None, 0)
        assert session._bridge.config.transport == "lowlatency"
    finally:
        session.close()


@pytest.mark.zenoh
def test_a_lowlatency_trial_echoes_every_message(tmp_path: Path, zenoh: None) -> None:
    """Sender and echoer processes, both bridges on lowlatency: every message comes back
    (the laser scan's 4,250 B, under the transport's cap)."""
    backend = NativeProcBackend("lowlatency")
    t = trial("native-proc", "laserscan", 4250, pairs=1)
    tables, nodes = run_here(backend, t, tmp_path)
    check_complete(tables[0].to_pydict(), 200)
    assert all(n.malformed == 0 for n in nodes)
