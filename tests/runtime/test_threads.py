"""ThreadScope: every thread joined by its owner, and what a thread raises surfaced."""

from __future__ import annotations

import threading

import pytest

from roboscale.runtime.threads import ThreadScope


def test_a_failing_thread_reaches_the_owner_and_is_kept() -> None:
    seen: list[tuple[str, BaseException]] = []
    reported = threading.Event()

    def on_error(name: str, e: BaseException) -> None:
        seen.append((name, e))
        reported.set()

    def broken() -> None:
        raise ValueError("a bug")

    scope = ThreadScope("test", on_error=on_error)
    scope.spawn(broken, name="broken")
    assert reported.wait(10.0)
    assert scope.close() == []
    assert [(n, type(e)) for n, e in seen] == [("broken", ValueError)]
    assert [n for n, _ in scope.errors] == ["broken"]


def test_close_joins_every_thread_and_names_one_that_would_not_end() -> None:
    release, stuck = threading.Event(), threading.Event()
    scope = ThreadScope("test")
    quick = scope.spawn(release.wait, 10.0, name="quick")
    scope.spawn(stuck.wait, 10.0, name="stuck")
    release.set()
    assert scope.close(timeout_s=0.2) == ["stuck"]
    assert not quick.is_alive()
    stuck.set()
    assert scope.close() == []
    with pytest.raises(RuntimeError, match="closed"):
        scope.spawn(print, name="late")


def test_bus_and_executor_never_import_node() -> None:
    """The bus-executor-node circle is cut: both see nodes through runtime/callee.py."""
    import ast
    from pathlib import Path

    import roboscale.runtime as runtime

    root = Path(runtime.__file__).parent
    for module in ("bus.py", "executor.py", "callee.py"):
        tree = ast.parse((root / module).read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        assert "roboscale.runtime.node" not in imported, module
