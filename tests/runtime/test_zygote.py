"""The zygote with real forked processes: readiness, exit codes, signals, reaping."""

from __future__ import annotations

import os
import signal
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.conftest import EVENT_TIMEOUT_S

from roboscale.backends.base import free_port
from roboscale.runtime.zygote import ForkedChild, Zygote, ZygoteError

TARGETS = '''
import os, signal, time

def idle(config, ready):
    ready()
    time.sleep(config.get("sleep", 30))
    return config.get("code", 0)

def loop_preloaded(config, ready):
    import sys
    return 0 if "uvloop" in sys.modules else 5

def never_ready(config, ready):
    time.sleep(30)

def talk(config, ready):
    """Opens its own Zenoh session after the fork and publishes until killed."""
    import zenoh
    conf = zenoh.Config()
    conf.insert_json5("mode", '"peer"')
    conf.insert_json5("scouting/multicast/enabled", "false")
    conf.insert_json5("scouting/gossip/enabled", "false")
    conf.insert_json5("connect/endpoints", '["%s"]' % config["endpoint"])
    with zenoh.open(conf) as session:
        pub = session.declare_publisher("test/zygote")
        ready()
        for i in range(250):
            pub.put(f"hello {os.getpid()} {i}")
            time.sleep(0.02)
'''


def write_targets(folder: Path, extra: str = "") -> dict[str, str]:
    (folder / "zyg_targets.py").write_text(TARGETS + textwrap.dedent(extra))
    return {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    }


@pytest.fixture
def zygote(tmp_path: Path) -> Iterator[Zygote]:
    z = Zygote(["zenoh"], env=write_targets(tmp_path), log=tmp_path / "zygote.log")
    z.start()
    try:
        yield z
    finally:
        z.close()


def children_of(pid: int) -> list[tuple[int, str]]:
    """(pid, state) of every process whose parent is `pid`, zombies included."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[1]) == pid:
            found.append((int(entry), fields[0]))
    return found


def gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state == "Z"  # reparented to an init that has not reaped it yet


def wait_until(condition: object, timeout_s: float = EVENT_TIMEOUT_S) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if callable(condition) and condition():
            return True
        time.sleep(0.01)
    return False


def spawn_ready(z: Zygote, target: str = "zyg_targets:idle", **config: object) -> ForkedChild:
    child = z.spawn("t", target, dict(config))
    assert child.settled.wait(EVENT_TIMEOUT_S)
    return child


@pytest.mark.zenoh
def test_hello_reports_preloads_and_one_thread(zygote: Zygote) -> None:
    assert zygote.alive()
    assert zygote.hello["preloaded"] == ["uvloop", "zenoh"]  # the runtime's loop first
    assert zygote.hello["threads"] == 1


@pytest.mark.zenoh
def test_children_find_the_runtime_loop_already_imported(zygote: Zygote) -> None:
    child = spawn_ready(zygote, "zyg_targets:loop_preloaded")
    assert child.exited.wait(5.0)
    assert child.status is not None and child.status.code == 0


def test_no_loop_is_preloaded_when_the_runtime_uses_asyncio(tmp_path: Path) -> None:
    env = {**write_targets(tmp_path), "ROBOSCALE_LOOP": "asyncio"}
    with Zygote([], env=env) as z:
        assert z.hello["preloaded"] == []


@pytest.mark.zenoh
def test_child_reports_ready_then_its_exit_code(zygote: Zygote) -> None:
    child = spawn_ready(zygote, sleep=0.05, code=3)
    assert child.ready.is_set() and child.pid > 0
    assert child.exited.wait(EVENT_TIMEOUT_S)
    assert child.status is not None and (child.status.code, child.status.signal) == (3, None)
    assert child.status.describe() == "exit code 3"


@pytest.mark.zenoh
def test_signal_goes_to_the_child_and_is_reported(zygote: Zygote) -> None:
    child = spawn_ready(zygote)
    zygote.signal(child.pid, signal.SIGKILL)
    assert child.exited.wait(EVENT_TIMEOUT_S)
    assert child.status is not None and child.status.signal == signal.SIGKILL
    assert child.status.describe() == "killed by SIGKILL"


@pytest.mark.zenoh
def test_a_target_that_cannot_be_imported_is_an_error_not_a_hang(zygote: Zygote) -> None:
    child = zygote.spawn("t", "zyg_targets:missing")
    assert child.exited.wait(EVENT_TIMEOUT_S)
    assert not child.ready.is_set()
    assert "has no attribute 'missing'" in child.error
    assert child.status is not None and child.status.code == 1


@pytest.mark.zenoh
def test_malformed_target_names_the_expected_form(zygote: Zygote) -> None:
    child = zygote.spawn("t", "no_colon_here")
    assert child.exited.wait(EVENT_TIMEOUT_S)
    assert "module:callable" in child.error


@pytest.mark.zenoh
def test_fifty_kills_and_forks_leave_no_zombie(zygote: Zygote) -> None:
    pids = set()
    for _ in range(50):
        child = spawn_ready(zygote)
        assert child.ready.is_set()
        pids.add(child.pid)
        os.kill(child.pid, signal.SIGKILL)
        assert child.exited.wait(EVENT_TIMEOUT_S)
    assert len(pids) == 50
    assert wait_until(lambda: children_of(zygote.pid) == []), children_of(zygote.pid)


@pytest.mark.zenoh
def test_children_die_with_the_zygote(zygote: Zygote) -> None:
    child = spawn_ready(zygote)
    os.killpg(zygote.pid, signal.SIGKILL)  # brutal: no chance to clean up
    assert wait_until(lambda: gone(child.pid))
    assert child.exited.wait(EVENT_TIMEOUT_S)  # the client learns it too
    assert not zygote.alive()


@pytest.mark.zenoh
def test_close_kills_and_reaps_every_child(zygote: Zygote) -> None:
    kids = [spawn_ready(zygote) for _ in range(3)]
    zygote.close()
    assert all(k.exited.wait(EVENT_TIMEOUT_S) for k in kids)
    assert all(gone(k.pid) for k in kids)


def test_missing_preload_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ZygoteError, match="preloading 'no_such_module_x' failed"):
        Zygote(["no_such_module_x"]).start()


def test_preload_that_starts_a_thread_is_refused(tmp_path: Path) -> None:
    (tmp_path / "thready.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(30,)).start()\n"
    )
    z = Zygote(["thready"], env={"PYTHONPATH": str(tmp_path)})
    with pytest.raises(ZygoteError, match="started 1 thread"):
        z.start()


@pytest.mark.zenoh
@pytest.mark.zenoh
def test_forked_child_opens_its_own_zenoh_session(zygote: Zygote, zenoh: None) -> None:
    import zenoh as z

    endpoint = f"tcp/127.0.0.1:{free_port()}"
    conf = z.Config()
    conf.insert_json5("mode", '"peer"')
    conf.insert_json5("scouting/multicast/enabled", "false")
    conf.insert_json5("scouting/gossip/enabled", "false")
    conf.insert_json5("listen/endpoints", f'["{endpoint}"]')
    with z.open(conf) as session:
        sub = session.declare_subscriber("test/zygote", z.handlers.FifoChannel(100))
        child = spawn_ready(zygote, "zyg_targets:talk", endpoint=endpoint)
        try:
            assert child.ready.is_set(), child.error
            deadline = time.monotonic() + EVENT_TIMEOUT_S
            sample = None
            while sample is None and time.monotonic() < deadline:
                sample = sub.try_recv()
                time.sleep(0.01)
            assert sample is not None
            assert sample.payload.to_string().startswith(f"hello {child.pid} ")
        finally:
            zygote.signal(child.pid, signal.SIGKILL)
            assert child.exited.wait(EVENT_TIMEOUT_S)


STANDBY_TARGETS = """
import os
def marked(config, ready, prepared):
    with open(config["mark"], "a") as f:
        f.write(f"run {os.getpid()} {prepared}\\n")
    ready()
    import time
    time.sleep(30)
marked.prepare = lambda: "warm"
"""


def test_a_warm_standby_runs_nothing_before_its_hand_over_and_is_made_again(
    tmp_path: Path,
) -> None:
    env = write_targets(tmp_path, STANDBY_TARGETS)
    mark = tmp_path / "mark"
    with Zygote(["zenoh", "zyg_targets"], env=env) as z:
        z.keep_standby("zyg_targets:marked")
        assert wait_until(lambda: z.standbys.get("zyg_targets:marked"))
        standby = z.standbys["zyg_targets:marked"]
        assert not mark.exists()  # waiting, prepared, but not an instance yet
        os.kill(standby, signal.SIGKILL)  # a kill storm hits the standby: made again
        assert wait_until(lambda: z.standbys.get("zyg_targets:marked") not in (None, standby))
        waiting = z.standbys["zyg_targets:marked"]
        child = z.spawn("m", "zyg_targets:marked", {"mark": str(mark)}, standby=True)
        # The waiting standby took it (read before the spawn: once the child is ready the
        # next standby may already be announced in its place).
        assert child.standby and child.pid == waiting
        assert child.wait_ready(EVENT_TIMEOUT_S)  # read on this thread, which handed over
        assert mark.read_text() == f"run {child.pid} warm\n"  # prepare's result handed in
        # The next standby is made once the handed-over child is ready.
        assert wait_until(lambda: z.standbys.get("zyg_targets:marked") not in (None, child.pid))
        assert mark.read_text().count("run") == 1


def test_a_hand_over_goes_to_the_standby_with_the_zygote_stopped(tmp_path: Path) -> None:
    """The client writes the hand-over to the standby and reads its READY itself: a
    zygote that cannot run (SIGSTOP) is on no step of it."""
    env = write_targets(tmp_path, STANDBY_TARGETS)
    mark = tmp_path / "mark"
    with Zygote(["zenoh", "zyg_targets"], env=env) as z:
        z.keep_standby("zyg_targets:marked")
        assert wait_until(lambda: z.standbys.get("zyg_targets:marked"))
        os.kill(z.pid, signal.SIGSTOP)
        try:
            child = z.spawn("m", "zyg_targets:marked", {"mark": str(mark)}, standby=True)
            assert child.standby and child.wait_ready(EVENT_TIMEOUT_S)
            assert set(child.stamps) == {"handed_over", "ready_target", "ready_seen"}
            assert child.stamps["handed_over"] <= child.stamps["ready_seen"]
        finally:
            os.kill(z.pid, signal.SIGCONT)
        assert mark.read_text() == f"run {child.pid} warm\n"
        z.signal(child.pid, signal.SIGKILL)  # its exit still comes from the zygote
        assert child.exited.wait(EVENT_TIMEOUT_S)
        assert child.status is not None and child.status.signal == signal.SIGKILL


FAILING_PREPARE = """
def unprepared(config, ready, prepared=None):
    ready()
def _fail():
    raise RuntimeError("no session today")
unprepared.prepare = _fail
"""


def test_a_standby_whose_prepare_fails_is_not_made_again_and_the_start_forks(
    tmp_path: Path,
) -> None:
    env = write_targets(tmp_path, FAILING_PREPARE)
    with Zygote(["zenoh", "zyg_targets"], env=env) as z:
        z.keep_standby("zyg_targets:unprepared")
        assert wait_until(lambda: z.standbys.get("zyg_targets:unprepared") == 0)
        child = z.spawn("u", "zyg_targets:unprepared", standby=True)
        assert not child.standby  # forked: its target runs, unprepared
        assert child.ready.wait(EVENT_TIMEOUT_S)


class _SetBy(threading.Event):
    """An Event that records which thread set it."""

    def __init__(self) -> None:
        super().__init__()
        self.by: list[threading.Thread] = []

    def set(self) -> None:
        self.by.append(threading.current_thread())
        super().set()


def test_a_hand_overs_ready_is_read_by_the_thread_that_handed_it_over(tmp_path: Path) -> None:
    """No other thread is on a restart's path: the reader never reads a hand-over's READY
    (it would set `ready` before `wait_ready` is called, and from its own thread)."""
    env = write_targets(tmp_path, STANDBY_TARGETS)
    mark = tmp_path / "mark"
    with Zygote(["zenoh", "zyg_targets"], env=env) as z:
        z.keep_standby("zyg_targets:marked")
        assert wait_until(lambda: z.standbys.get("zyg_targets:marked"))
        child = z.spawn("m", "zyg_targets:marked", {"mark": str(mark)}, standby=True)
        assert child.standby
        child.ready = recorded = _SetBy()  # READY, once written, waits in the socket
        assert wait_until(mark.exists)  # the instance runs: its ready() follows
        assert child.wait_ready(EVENT_TIMEOUT_S)
        assert recorded.by == [threading.current_thread()]
        # The next standby is still asked for (by the new instance's notice waiter).
        assert wait_until(lambda: z.standbys.get("zyg_targets:marked") not in (None, child.pid))


LAST_WORDS = """
import os
def ready_then_gone(config, ready, prepared):
    ready()
    os._exit(5)
ready_then_gone.prepare = lambda: "warm"
"""


def test_a_ready_written_just_before_the_standbys_death_still_counts(tmp_path: Path) -> None:
    env = write_targets(tmp_path, LAST_WORDS)
    with Zygote(["zenoh", "zyg_targets"], env=env) as z:
        z.keep_standby("zyg_targets:ready_then_gone")
        assert wait_until(lambda: z.standbys.get("zyg_targets:ready_then_gone"))
        child = z.spawn("g", "zyg_targets:ready_then_gone", standby=True)
        assert child.standby
        assert child.exited.wait(EVENT_TIMEOUT_S)  # the exit report came first
        assert child.wait_ready(EVENT_TIMEOUT_S)  # its READY is read all the same
        assert child.status is not None and child.status.code == 5
