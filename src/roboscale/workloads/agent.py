"""A node process of the lab: `python -m roboscale.workloads.agent CONFIG.json`.

It speaks a line protocol with the lab: it prints READY once its node is
connected (for a sender: once an echo came back), waits for GO (sender) or
STOP/EOF (echoer) on stdin, writes its raw records and prints DONE. Nodes of a
one-way workload (fanout, ping, chain) then wait for CLOSE before closing their
session, so no node drops what its middleware still queues. Stdlib only.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import sys
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

from roboscale.backends.base import NodeContext, Session, get_backend
from roboscale.records.raw import write_raw
from roboscale.workloads.echo import EchoConfig, Echoer, Sender
from roboscale.workloads.oneway import FlowConfig, Sink, Source

PR_SET_TIMERSLACK = 29


def tighten_timer_slack() -> None:
    """Ask for 1 µs timer slack (default 50 µs) so sleeps wake nearer their deadline."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_TIMERSLACK, 1000, 0, 0, 0)


def usage() -> dict[str, float]:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return {"cpu_user_s": ru.ru_utime, "cpu_sys_s": ru.ru_stime, "max_rss_kb": ru.ru_maxrss}


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _header(cfg: dict[str, Any], role: str, name: str, node: Sender | Echoer) -> dict[str, Any]:
    return {
        "role": role,
        "node": name,
        "host": cfg.get("host", "local"),
        "backend": cfg["backend"],
        "pair": cfg["echo"]["pair"],
        "pid": os.getpid(),
        "counters": asdict(node.counters),
        "usage": usage(),
        # Start-up (imports, connection) is excluded from the measured CPU: it grows
        # with N exactly like per-message cost would, and would confound the model.
        "usage_ready": cfg["_ready_usage"],
    }


def _start_sender(session: Session, echo: EchoConfig) -> Sender | None:
    tighten_timer_slack()
    sender = Sender(session, echo)
    if not sender.wait_for_match():
        say(f"NOMATCH no echo within {echo.match_timeout_s:g} s")
        return None
    return sender


def run(cfg: dict[str, Any]) -> int:
    """Run this agent's nodes: a sender, an echoer, or both of one pair (placement "pair")."""
    if cfg.get("workload", "echo") != "echo":
        return run_flow(cfg)
    backend = get_backend(cfg["backend"])
    echo = EchoConfig.from_dict(cfg["echo"])
    roles = ["echoer", "sender"] if cfg["role"] == "pair" else [cfg["role"]]
    sessions: dict[str, Session] = {}
    nodes: dict[str, Sender | Echoer] = {}
    for role in roles:
        name = cfg["names"][role] if cfg["role"] == "pair" else cfg["name"]
        ctx = NodeContext(name=name, host=cfg.get("host", "local"), config=cfg["node_config"])
        sessions[role] = backend.open(ctx)
        if role == "echoer":
            nodes[role] = Echoer(sessions[role], echo)
        elif (sender := _start_sender(sessions[role], echo)) is None:
            return 3
        else:
            nodes[role] = sender
    cfg["_ready_usage"] = usage()
    say("READY")
    if "sender" in nodes:
        if sys.stdin.readline().strip() != "GO":
            return 4
        pacer = nodes["sender"]
        assert isinstance(pacer, Sender)
        pacer.run()
    else:
        sys.stdin.readline()  # STOP, or EOF when the lab goes away
    for role, node in nodes.items():
        name = cfg["names"][role] if cfg["role"] == "pair" else cfg["name"]
        output = cfg["outputs"][role] if cfg["role"] == "pair" else cfg["output"]
        header = _header(cfg, role, name, node)
        header["malformed"] = int(getattr(sessions[role], "malformed", 0))
        write_raw(Path(output), header, node.columns())
    say("DONE")
    # The records are on disk; a middleware that fails to close must not lose them.
    for session in sessions.values():
        with contextlib.suppress(Exception):
            session.close()
    return 0


def _flow_nodes(cfg: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Session], list[Any]]:
    """Open each member's session and node: measuring nodes first, the publisher last."""
    backend = get_backend(cfg["backend"])
    members = cfg["members"] if cfg["role"] == "group" else [cfg]
    sessions: list[Session] = []
    nodes: list[Sink | Source] = []
    for member in members:
        ctx = NodeContext(member["name"], cfg.get("host", "local"), member["node_config"])
        sessions.append(backend.open(ctx))
        flow = FlowConfig.from_dict(member["flow"])
        nodes.append(Source(sessions[-1], flow) if flow.node == 0 else Sink(sessions[-1], flow))
    return members, sessions, nodes


def run_flow(cfg: dict[str, Any]) -> int:
    """A one-way workload's nodes: the publisher, a measuring node, or all of them in one
    process (role "group", placement "pair"). The publisher is READY once every measuring
    node acknowledged a probe; measuring nodes drain the stream's tail before writing."""
    members, sessions, nodes = _flow_nodes(cfg)
    source = next((n for n in nodes if isinstance(n, Source)), None)
    if source is not None:
        tighten_timer_slack()
        if not source.wait_for_match():
            say(f"NOMATCH not every node answered within {source.cfg.match_timeout_s:g} s")
            return 3
    ready = usage()
    say("READY")
    if source is not None:
        if sys.stdin.readline().strip() != "GO":
            return 4
        source.run()
    else:
        sys.stdin.readline()  # STOP, or EOF when the lab goes away
    for member, session, node in zip(members, sessions, nodes, strict=True):
        if isinstance(node, Sink):
            node.drain()
        header = {
            "role": member["role"],
            "node": member["name"],
            "host": cfg.get("host", "local"),
            "backend": cfg["backend"],
            "pair": 0,
            "flow_node": node.cfg.node,
            "pid": os.getpid(),
            "counters": asdict(node.counters),
            "usage": usage(),
            "usage_ready": ready,
            "malformed": int(getattr(session, "malformed", 0)),
        }
        write_raw(Path(member["output"]), header, node.columns())
    say("DONE")
    if cfg["role"] != "group":
        # Closing drops what the middleware still queues (a publisher's tail, a hop's last
        # forwards): stay until the lab says CLOSE, once every node drained.
        sys.stdin.readline()
    for session in sessions:
        with contextlib.suppress(Exception):
            session.close()
    return 0


def main() -> None:
    try:
        cfg = json.loads(Path(sys.argv[1]).read_text())
        code = run(cfg)
    except Exception:
        traceback.print_exc(file=sys.stderr)
        code = 2
    sys.stdout.flush()
    sys.stderr.flush()
    # Middleware threads (zenoh, rospy) can keep a normal exit waiting; the work is saved.
    os._exit(code)


if __name__ == "__main__":
    main()
