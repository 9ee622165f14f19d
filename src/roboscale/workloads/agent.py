"""A node process of the lab: `python -m roboscale.workloads.agent CONFIG.json`.

CONFIG.json is an AgentConfig (workloads/base.py): the process's nodes, each with its
backend settings and its workload program. It speaks a line protocol with the lab:
it prints READY once its nodes are connected (for a pacer: once its path is matched),
waits for GO (pacer) or STOP/EOF (the others) on stdin, writes its raw records and
prints DONE. With `close`, it then waits for CLOSE before closing its sessions, so no
node drops what its middleware still queues. Stdlib only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import sys
import traceback
from dataclasses import asdict
from pathlib import Path

from roboscale.backends.base import NodeContext, Session, get_backend
from roboscale.records.raw import write_raw
from roboscale.workloads.base import AgentConfig, AgentConfigError, Program, get_workload

PR_SET_TIMERSLACK = 29


def tighten_timer_slack() -> None:
    """Ask for 1 µs timer slack (default 50 µs) so sleeps wake nearer their deadline."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0)


def usage() -> dict[str, float]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {
        "cpu_user_s": ru.ru_utime,
        "cpu_sys_s": ru.ru_stime,
        "max_rss_kb": ru.ru_maxrss,
        # How the lab's priority and pin axes left this process (env/sched.py).
        "sched_fifo": float(os.sched_getscheduler(0) == os.SCHED_FIFO),
        "cores": float(len(os.sched_getaffinity(0))),
    }


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def open_nodes(cfg: AgentConfig) -> tuple[list[Session], list[Program]]:
    """Open each node's session and program, in the order the workload planned them."""
    backend = get_backend(cfg.backend)
    workload = get_workload(cfg.workload)
    sessions: list[Session] = []
    programs: list[Program] = []
    for node in cfg.nodes:
        ctx = NodeContext(name=node.name, host=cfg.host, config=node.backend_config)
        sessions.append(backend.open(ctx))
        programs.append(workload.start(node.role, sessions[-1], node.program))
    return sessions, programs


def run(cfg: AgentConfig) -> int:
    """Run this agent's nodes: READY, the stream (pacer) or STOP, raw files, DONE."""
    sessions, programs = open_nodes(cfg)
    pacer = next((p for p in programs if p.paces), None)
    if pacer is not None:
        tighten_timer_slack()
        if not pacer.wait_for_match():
            say(f"NOMATCH {pacer.no_match()}")
            return 3
    # Start-up (imports, connection) is excluded from the measured CPU: it grows with N
    # exactly like per-message cost would, and would confound the model.
    ready = usage()
    say("READY")
    if pacer is not None:
        if sys.stdin.readline().strip() != "GO":
            return 4
        pacer.run()
    else:
        sys.stdin.readline()  # STOP, or EOF when the lab goes away
    for node, session, program in zip(cfg.nodes, sessions, programs, strict=True):
        program.finish()
        header = {
            "role": node.role,
            "node": node.name,
            "host": cfg.host,
            "backend": cfg.backend,
            **program.header(),
            "pid": os.getpid(),
            "counters": asdict(program.counters),
            "usage": usage(),
            "usage_ready": ready,
            "malformed": int(getattr(session, "malformed", 0)),
        }
        write_raw(Path(node.output), header, program.columns())
    say("DONE")
    if cfg.close:
        # Closing drops what the middleware still queues (a publisher's tail, a hop's last
        # forwards): stay until the lab says CLOSE, once every node drained.
        sys.stdin.readline()
    # The records are on disk; a middleware that fails to close must not lose them.
    for session in sessions:
        with contextlib.suppress(Exception):
            session.close()
    return 0


def main() -> None:
    try:
        code = run(AgentConfig.from_json(Path(sys.argv[1]).read_text()))
    except AgentConfigError as e:
        sys.stderr.write(f"error: {sys.argv[1]}: {e}\n")
        code = 2
    except Exception:
        traceback.print_exc(file=sys.stderr)
        code = 2
    sys.stdout.flush()
    sys.stderr.flush()
    # Middleware threads (zenoh, rospy) can keep a normal exit waiting; the work is saved.
    os._exit(code)


if __name__ == "__main__":
    main()
