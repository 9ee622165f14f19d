"""The runtime stands on its own: no module of it imports a layer above it."""

from __future__ import annotations

import ast
from pathlib import Path

import roboscale.runtime

ABOVE = (
    "backends",
    "lab",
    "spec",
    "env",
    "analysis",
    "workloads",
    "capacity",
    "facetrack",
    "records",
    "cli",
)


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_the_runtime_imports_nothing_above_it() -> None:
    folder = Path(roboscale.runtime.__file__).parent
    upward = {
        f"{path.name}: {name}"
        for path in sorted(folder.glob("*.py"))
        for name in imported_modules(path)
        if name.split(".")[:2] in [["roboscale", layer] for layer in ABOVE]
    }
    assert upward == set()
