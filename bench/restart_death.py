"""How long a SIGKILLed process takes to die, against its threads, its memory and Zenoh.

A process-node restart cannot start the next instance before the old one is dead (never
two live instances), so the death is the floor of every restart. This forks children of
one zygote-like parent (zenoh imported, no thread, no session, `gc.freeze()`), each made
to differ in one thing, kills each with SIGKILL and times the kill until its pidfd is
readable (the kernel's "exited, thread group empty", the earliest a monitor can know),
and until its death notice (runtime/deathnotice.py: a robust mutex its main thread
holds, released as that thread enters do_exit, before the memory is freed) wakes a
waiting thread of the parent: the early notice a restart now waits for instead.
Variants are interleaved, kill by kill, so that every one sees the machine alike:

- `bare`: a fork of the parent, nothing more;
- `heap N MB (child)`: the child writes N MB of its own; `heap N MB (inherited)`: the
  parent wrote them before the fork (copy-on-write pages the child shares), then freed
  its own reference (the child's death frees the pages) or kept it (the child's death
  only unmaps them);
- `N threads`: the child starts N threads blocked on a pipe;
- `session, LAYOUT`: the child opens a Zenoh session (no endpoints) with Zenoh's thread
  pools laid out by `ZENOH_RUNTIME=LAYOUT` (`default`: unset); and with glibc's malloc
  held to one arena (each thread that allocates gets an arena of its own otherwise).

Each row gives the child's threads, resident memory and mappings as it was killed.

    .venv/bin/python bench/restart_death.py [--kills 20] [--json bench/out/restart_death.json]
"""

from __future__ import annotations

import ctypes
import errno
import gc
import json
import os
import select
import signal
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import finish, header, parser, table
from roboscale.runtime.deathnotice import NoticeMutex, NoticePage
from roboscale.runtime.forkserver import die_with_parent
from roboscale.runtime.zenoh_config import THREAD_LAYOUT, THREADS_ENV, zenoh_config, zenoh_settings

MB = 1 << 20
SETTLE_S = 0.01  # between the child's report and the kill: its threads asleep again
# Every Zenoh pool handed over to one: a single async worker thread.
ONE_POOL = "(acc: (handover: app), net: (handover: app), rx: (handover: app), tx: (handover: app))"
LAYOUTS = {"default": None, "bridge": THREAD_LAYOUT, "one pool": ONE_POOL}


@dataclass(frozen=True)
class Variant:
    name: str
    child_mb: int = 0
    inherited_mb: int = 0
    parent_keeps: bool = False  # the parent holds its inherited pages until the kill
    threads: int = 0
    layout: str | None = ""  # "": no session; None: a session, Zenoh's default layout
    arenas: int = 0  # glibc malloc arenas at most (mallopt M_ARENA_MAX); 0: glibc's default


VARIANTS = [
    Variant("bare"),
    Variant("heap 64 MB (child)", child_mb=64),
    Variant("heap 64 MB (inherited)", inherited_mb=64),
    Variant("heap 64 MB (inherited, still the parent's)", inherited_mb=64, parent_keeps=True),
    Variant("16 threads", threads=16),
    *(Variant(f"session, {name} layout", layout=layout) for name, layout in LAYOUTS.items()),
    Variant("session, one pool, 1 malloc arena", layout=ONE_POOL, arenas=1),
]
M_ARENA_MAX = -8  # glibc's mallopt parameter


def _child(v: Variant, report_fd: int, parent: int, notice_fd: int) -> None:
    """In the forked child: become the variant, hold its notice, report, wait to be killed."""
    die_with_parent(parent)
    notice = NoticePage(notice_fd)
    notice.hold()
    held = b"\x01" * (v.child_mb * MB)  # written, so resident
    block_r, _block_w = os.pipe()
    for _ in range(v.threads):
        threading.Thread(target=os.read, args=(block_r, 1), daemon=True).start()
    session = None
    if v.arenas:
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, v.arenas)
    if v.layout != "":
        if v.layout is None:
            os.environ.pop(THREADS_ENV, None)
        else:
            os.environ[THREADS_ENV] = v.layout
        import zenoh

        session = zenoh.open(zenoh_config(zenoh_settings([], [])))
    lines = Path("/proc/self/status").read_text().splitlines()
    status = dict(line.split(":", 1) for line in lines if ":" in line)
    facts = {
        "threads": len(os.listdir("/proc/self/task")),
        "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
        "maps": len(Path("/proc/self/maps").read_text().splitlines()),
    }
    os.write(report_fd, (json.dumps(facts) + "\n").encode())
    os.read(block_r, 1)  # forever: killed here
    del held, session, notice


def kill_once(v: Variant) -> dict[str, Any]:
    """Fork one child of `v`, SIGKILL it; the kill-to-pidfd-readable and kill-to-notice
    times and its facts."""
    inherited = b"\x02" * (v.inherited_mb * MB)
    report_r, report_w = os.pipe()
    parent = os.getpid()
    mutex = NoticeMutex()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(report_r)
            _child(v, report_w, parent, os.dup(mutex.fd))
        finally:
            os._exit(code)
    os.close(report_w)
    mutex.given()
    if not v.parent_keeps:
        del inherited  # the child holds the last reference to those pages
    pidfd = os.pidfd_open(pid)
    try:
        line = b""
        while not line.endswith(b"\n"):
            if not select.select([report_r], [], [], 30.0)[0]:
                raise TimeoutError(f"{v.name}: no report in 30 s")
            chunk = os.read(report_r, 4096)
            if not chunk:
                raise RuntimeError(f"{v.name}: the child died before its report")
            line += chunk
        facts = json.loads(line)
        noticed: list[int] = []
        waiter = threading.Thread(target=_wait_notice, args=(mutex, noticed))
        waiter.start()  # blocked in the lock before the kill (the child holds it)
        time.sleep(SETTLE_S)
        t0 = time.monotonic_ns()
        os.kill(pid, signal.SIGKILL)
        select.select([pidfd], [], [])
        facts["death_us"] = (time.monotonic_ns() - t0) / 1000
        waiter.join(30.0)
        facts["notice_us"] = (noticed[0] - t0) / 1000 if noticed else None
        return facts
    finally:
        os.close(pidfd)
        os.close(report_r)
        os.waitpid(pid, 0)
        mutex.close()


def _wait_notice(mutex: NoticeMutex, noticed: list[int]) -> None:
    """The parent's waiter: the monotonic ns at which the child's death released it."""
    if mutex.wait(30.0) == errno.EOWNERDEAD:
        noticed.append(time.monotonic_ns())
        mutex.release()


def summary(v: Variant, runs: list[dict[str, Any]]) -> dict[str, Any]:
    deaths = sorted(r["death_us"] for r in runs)
    deciles = statistics.quantiles(deaths, n=10) if len(deaths) > 1 else deaths * 9
    notices = sorted(r["notice_us"] for r in runs if r.get("notice_us") is not None)
    notice_deciles = statistics.quantiles(notices, n=10) if len(notices) > 1 else notices * 9
    return {
        "variant": v.name,
        "threads": max(r["threads"] for r in runs),
        "rss_mb": round(statistics.median(r["rss_mb"] for r in runs), 1),
        "maps": max(r["maps"] for r in runs),
        "n": len(deaths),
        "p10_us": round(deciles[0], 1),
        "p50_us": round(statistics.median(deaths), 1),
        "p90_us": round(deciles[-1], 1),
        "notice_n": len(notices),
        "notice_p10_us": round(notice_deciles[0], 1) if notices else None,
        "notice_p50_us": round(statistics.median(notices), 1) if notices else None,
        "notice_p90_us": round(notice_deciles[-1], 1) if notices else None,
    }


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("--kills", type=int, default=20, help="kills per variant (default 20)")
    args = p.parse_args()
    report = header()
    import zenoh  # noqa: F401  (imported before every fork, as the zygote does)

    gc.freeze()
    report["loadavg_start"] = os.getloadavg()
    runs: dict[str, list[dict[str, Any]]] = {v.name: [] for v in VARIANTS}
    for _ in range(args.kills):
        for v in VARIANTS:
            runs[v.name].append(kill_once(v))
    report["loadavg_end"] = os.getloadavg()
    rows = [summary(v, runs[v.name]) for v in VARIANTS]
    print("\nSIGKILL until the pidfd is readable (p*_us) and until the death notice woke the")
    print(f"parent's waiter (notice_*), {args.kills} kills each, interleaved (µs):")
    print(f"load average {report['loadavg_start'][0]:.2f} at the start, "
          f"{report['loadavg_end'][0]:.2f} at the end")  # fmt: skip
    cols = ["variant", "threads", "rss_mb", "maps", "n", "p10_us", "p50_us", "p90_us"]
    table(rows, [*cols, "notice_p10_us", "notice_p50_us", "notice_p90_us"])
    report["raw"] = runs
    report["results"] = rows
    finish(report, [], args)


if __name__ == "__main__":
    main()
