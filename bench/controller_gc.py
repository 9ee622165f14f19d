"""Does the lab's controller collect garbage while a trial's nodes run? (diagnosis)

    .venv/bin/python bench/controller_gc.py [--json bench/out/controller_gc.json]
        -- bench experiments/demo.yaml --quick --backend native-proc --out /tmp/cgc --replace

Runs `roboscale ARGS...` in this process with a `gc.callbacks` recorder, and marks the
time inside `lab.runner.run_nodes` (every node of a trial runs in agent processes of its
own then; the controller only waits). Printed and written: each collection's generation
and duration, inside a trial or between trials. A full collection of the controller
inside a trial would take a core from the trial's nodes on a small machine; between
trials it costs the run's time only. Diagnosis, not a goal: nothing passes or fails.
"""

from __future__ import annotations

import gc
import sys
import time
from typing import Any

from common import finish, header, parser, table


class Collections:
    """Every collection's generation and duration, and whether a trial was running."""

    def __init__(self) -> None:
        self.in_trial = False
        self.rows: list[dict[str, Any]] = []
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
            return
        ms = (time.perf_counter() - self._started) * 1e3
        self.rows.append({"generation": info["generation"], "ms": ms, "in_trial": self.in_trial})

    def summary(self) -> list[dict[str, Any]]:
        """Per place and generation: how many, their total and their longest (ms)."""
        out = []
        for inside in (True, False):
            for gen in (0, 1, 2):
                key = (inside, gen)
                ms = [r["ms"] for r in self.rows if (r["in_trial"], r["generation"]) == key]
                out.append({"where": "inside a trial" if inside else "between trials",
                            "generation": gen, "collections": len(ms),
                            "total_ms": sum(ms), "longest_ms": max(ms, default=0.0)})  # fmt: skip
        return out


def run(argv: list[str], recorder: Collections) -> None:
    import roboscale.lab.runner as runner
    from roboscale.cli import main

    inner = runner.run_nodes

    def marked(*args: Any, **kwargs: Any) -> None:
        recorder.in_trial = True
        try:
            inner(*args, **kwargs)
        finally:
            recorder.in_trial = False

    runner.run_nodes = marked
    gc.callbacks.append(recorder)
    try:
        main(argv)
    except SystemExit as e:
        if e.code not in (0, None):
            print(f"roboscale exited with {e.code}")
    finally:
        gc.callbacks.remove(recorder)
        runner.run_nodes = inner


def main() -> None:
    p = parser(__doc__ or "", judged=False)
    p.add_argument("roboscale_args", nargs="+", help="after --: the roboscale command to run")
    args = p.parse_args()
    report = header()
    recorder = Collections()
    run(args.roboscale_args, recorder)
    rows = recorder.summary()
    print()
    table(rows, ["where", "generation", "collections", "total_ms", "longest_ms"])
    report["raw"] = {"collections": recorder.rows}
    report["results"] = rows
    finish(report, [], args)


if __name__ == "__main__":
    sys.exit(main())
