"""What a host has: run on the host itself, by `roboscale hosts check` over SSH.

`python -m roboscale.lab.hostprobe` prints one JSON object: interpreter, machine,
C library, cores, idle CPU, this roboscale's version and source fingerprint, and
which backends are installed.

Two fixed scripts of ours run with the host's own python, before roboscale is
there: `BOOTSTRAP` reports the interpreter alone, and `CLOCK_LOOP` answers clock
exchanges: for each line read, it writes its CLOCK_MONOTONIC at receipt and at reply.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import sys
import time
from pathlib import Path

BOOTSTRAP = (
    "import json, os, platform, sys\n"
    "print(json.dumps({'python': platform.python_version(), 'machine': platform.machine(),"
    " 'libc': platform.libc_ver()[1], 'cores': os.cpu_count(),"
    " 'executable': sys.executable}))\n"
)

CLOCK_LOOP = (
    "import sys, time\n"
    "for line in sys.stdin:\n"
    "    t1 = time.monotonic_ns()\n"
    "    sys.stdout.write(f'{t1} {time.monotonic_ns()}\\n')\n"
    "    sys.stdout.flush()\n"
)


def fingerprint() -> str:
    """A digest of this roboscale's source files: two hosts run the same code only if
    their fingerprints match (the version alone does not change between commits)."""
    package = Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.is_file() and path.suffix in {".py", ".erl", ".json", ".yaml"}:
            digest.update(str(path.relative_to(package)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def idle_cpu(interval_s: float = 0.2) -> float:
    """The idle share of all cores over a short interval, from /proc/stat."""

    def sample() -> tuple[int, int]:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return fields[3] + fields[4], sum(fields)  # idle + iowait, total

    idle0, total0 = sample()
    time.sleep(interval_s)
    idle1, total1 = sample()
    return (idle1 - idle0) / max(1, total1 - total0)


def report() -> dict[str, object]:
    from roboscale import __version__
    from roboscale.backends.base import get_backend, known_backends
    from roboscale.env.hostfacts import host_facts
    from roboscale.errors import UserError

    backends: dict[str, str] = {}
    for name in known_backends():
        try:
            backend = get_backend(name)
            backend.check()
            backends[name] = backend.version()
        except (UserError, ImportError, OSError) as e:
            backends[name] = f"unavailable: {str(e).splitlines()[0]}"
    return {
        "python": platform.python_version(),
        "machine": platform.machine(),
        "libc": platform.libc_ver()[1],
        "cores": os.cpu_count(),
        "executable": sys.executable,
        "idle_cpu": round(idle_cpu(), 3),
        "roboscale": __version__,
        "fingerprint": fingerprint(),
        "backends": backends,
        "host": host_facts(),  # what a trial's metadata records of the machine it ran on
    }


def main() -> None:
    print(json.dumps(report()))


if __name__ == "__main__":
    main()
