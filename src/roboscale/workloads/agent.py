"""A node process of the lab: `python -m roboscale.workloads.agent CONFIG.json`.

It speaks a line protocol with the lab: it prints READY once its node is
connected (for a sender: once an echo came back), waits for GO (sender) or
STOP/EOF (echoer) on stdin, writes its raw records and prints DONE. Stdlib only.
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

from roboscale.backends.base import NodeContext, get_backend
from roboscale.records.raw import write_raw
from roboscale.workloads.echo import EchoConfig, Echoer, Sender

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


def run(cfg: dict[str, Any]) -> int:
    backend = get_backend(cfg["backend"])
    ctx = NodeContext(name=cfg["name"], host=cfg.get("host", "local"), config=cfg["node_config"])
    session = backend.open(ctx)
    echo = EchoConfig.from_dict(cfg["echo"])
    node: Sender | Echoer
    if cfg["role"] == "sender":
        tighten_timer_slack()
        node = Sender(session, echo)
        if not node.wait_for_match():
            say(f"NOMATCH no echo within {echo.match_timeout_s:g} s")
            return 3
        say("READY")
        if sys.stdin.readline().strip() != "GO":
            return 4
        node.run()
    else:
        node = Echoer(session, echo)
        say("READY")
        sys.stdin.readline()  # STOP, or EOF when the lab goes away
    header = {
        "role": cfg["role"],
        "node": cfg["name"],
        "backend": cfg["backend"],
        "pair": echo.pair,
        "pid": os.getpid(),
        "counters": asdict(node.counters),
        "malformed": int(getattr(session, "malformed", 0)),
        "usage": usage(),
    }
    write_raw(Path(cfg["output"]), header, node.columns())
    say("DONE")
    # The records are on disk; a middleware that fails to close must not lose them.
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
