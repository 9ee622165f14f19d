"""bench/dds_hop.py's reading of a perf trace (a made-up one: analysis only)."""

from __future__ import annotations

import pytest

import dds_hop  # bench/dds_hop.py, importable through tests/bench/conftest.py

SEND = "syscalls:sys_enter_sendmsg: fd: 0x00000005, msg: 0x7ffe, flags: 0x00000000"
RECV = "syscalls:sys_exit_recvmsg: 0x34e0"


def switch(tid: int, state: str) -> str:
    return (
        f"sched:sched_switch: prev_comm=python prev_pid={tid} prev_prio=120 "
        f"prev_state={state} ==> next_comm=recv next_pid=21 next_prio=120"
    )


def line(pid: int, tid: int, t_us: float, event: str) -> str:
    return f"  {pid}/{tid}  {100 + t_us / 1e6:.6f}: {event}"


# One round trip of two datagrams each way: the pinger (process 10) sends from thread
# 10 and receives on thread 11, the echoer (process 20) receives and replies on 21.
ROUND_TRIP = [
    line(10, 10, 0, SEND),
    line(10, 10, 4, switch(10, "R+")),  # preempted by the echoer's receive thread
    line(20, 21, 5, RECV),
    line(20, 21, 6, switch(21, "S")),  # asleep again: not a preemption
    line(10, 10, 10, SEND),
    line(20, 21, 12, RECV),
    line(20, 21, 20, SEND),
    line(10, 11, 22, RECV),
    line(20, 21, 25, SEND),
    line(10, 11, 27, RECV),
    line(10, 10, 40, switch(10, "R")),  # after its datagrams left: not counted
]


def test_a_round_trip_is_read_stage_by_stage() -> None:
    stages = dds_hop.timeline("\n".join(ROUND_TRIP), 2)
    assert stages["round_trips"] == 1
    assert stages["ping_out_us"] == pytest.approx(10)
    assert stages["ping_preempted"] == 1
    assert stages["echo_in_us"] == pytest.approx(12)
    assert stages["echo_out_us"] == pytest.approx(20)
    assert stages["echo_turn_us"] == pytest.approx(8)
    assert stages["ping_in_us"] == pytest.approx(27)


def test_a_trace_without_a_complete_round_trip_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="no complete round trip"):
        dds_hop.timeline("\n".join(ROUND_TRIP[:5]), 2)
