"""The face tracker on roboscale's runtime: `runtime` (in-process workers) and
`runtime-proc` (a process per worker, forked from a zygote, over the Zenoh bridge).

Both run the tree of `runtime_host.py` in a host process of their own, so that its CPU
and memory are measured apart from whatever drives it.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from roboscale.facetrack import _deps
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.hosted import HostedTracker
from roboscale.safewrite import write_text


@dataclass(frozen=True)
class RuntimeStack:
    name: str
    mode: str  # runtime_host's MODE
    summary: str
    kill_methods: tuple[str, ...]

    def check(self) -> None:
        _deps.cv2()
        _deps.skimage_data()

    def version(self) -> str:
        from importlib.metadata import version

        return f"roboscale {version('roboscale')}, OpenCV {_deps.cv2().__version__}"

    def start(self, cfg: TrackerConfig, workdir: Path) -> HostedTracker:
        workdir.mkdir(parents=True, exist_ok=True)
        config = workdir / "config.json"
        write_text(config, cfg.to_json())
        argv = [sys.executable, "-m", "roboscale.facetrack.stacks.runtime_host", self.mode,
                str(config), str(workdir)]  # fmt: skip
        per_worker = 0.05 if self.mode == "inprocess" else 1.0
        return HostedTracker(self.name, argv, cfg, workdir,
                             start_timeout_s=60.0 + per_worker * cfg.workers)  # fmt: skip


INPROCESS = RuntimeStack(
    "runtime",
    "inprocess",
    "roboscale runtime: one process, workers are supervised in-process nodes",
    ("crash", "sigkill", "sigterm"),
)
PROCESS = RuntimeStack(
    "runtime-proc",
    "process",
    "roboscale runtime: a process per worker (zygote fork), frames over the Zenoh bridge",
    ("sigkill", "sigterm"),
)
