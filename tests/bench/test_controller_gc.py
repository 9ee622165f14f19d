"""bench/controller_gc.py: collections are told apart by where they fell."""

from __future__ import annotations

import controller_gc  # bench/controller_gc.py, importable through tests/bench/conftest.py


def test_collections_are_counted_inside_and_between_trials() -> None:
    recorder = controller_gc.Collections()
    for inside, generation in ((False, 2), (True, 0), (True, 0), (False, 0)):
        recorder.in_trial = inside
        recorder("start", {"generation": generation})
        recorder("stop", {"generation": generation})
    rows = {(r["where"], r["generation"]): r["collections"] for r in recorder.summary()}
    assert rows[("inside a trial", 0)] == 2 and rows[("inside a trial", 2)] == 0
    assert rows[("between trials", 2)] == 1 and rows[("between trials", 0)] == 1
