"""bench/restart_death.py with one kill per variant: real forks and sessions, no timing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import restart_death  # bench/restart_death.py, importable through tests/bench/conftest.py

RunBench = Callable[[str, list[str]], dict[str, Any]]  # tests/bench/conftest.py


@pytest.mark.slow
@pytest.mark.zenoh
def test_every_variant_is_killed_and_described(zenoh: None, run_bench: RunBench) -> None:
    report = run_bench("restart_death.py", ["--kills", "2"])
    rows = {row["variant"]: row for row in report["results"]}
    assert list(rows) == [v.name for v in restart_death.VARIANTS]
    assert all(row["n"] == 2 and row["p50_us"] > 0 for row in rows.values())
    assert all(row["notice_n"] == 2 for row in rows.values())  # every death noticed
    assert rows["16 threads"]["threads"] == 17  # what each variant differs in is real
    assert rows["heap 64 MB (child)"]["rss_mb"] > rows["bare"]["rss_mb"] + 60
    default, one_pool = rows["session, default layout"], rows["session, one pool layout"]
    assert one_pool["threads"] < default["threads"]
