"""Layers only point down: no package imports one above it (checked on the source's AST,
imports under `if TYPE_CHECKING:` excepted: they are types, not dependencies).

From the bottom: the foundation modules (errors, registry, eventloop, yamlfile, privdir,
lifeline, cliargs), the runtime, backends, facetrack, records, env, the workload
protocol (workloads/base, stream, agent), spec, analysis, the workload modules (plugins
reached through the registry; their driver half uses analysis), results, lab, capacity,
cli.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

import roboscale

SRC = Path(roboscale.__file__).parent
# From the bottom; a module may import its own layer and those below. Modules in no layer
# (errors, registry, eventloop, yamlfile, privdir, lifeline, cliargs) are the foundation.
LAYERS = [
    ("runtime",),
    ("backends",),
    ("facetrack",),  # the face tracker's pipeline, wire and stacks (runtime, ros1, Erlang)
    ("records",),
    ("env",),
    # what agents run: stdlib
    ("workloads.base", "workloads.stream", "workloads.replay", "workloads.agent"),
    # replay sources and .msg types read in the lab (rosbags), for the spec and the workloads
    ("bags", "bagread", "msgtypes", "msgsamples"),
    ("spec",),
    ("analysis",),
    ("workloads",),  # workload modules: plugins, reached through the registry
    ("results",),
    ("lab",),
    ("capacity",),
    ("reproduce",),  # the seeds' findings, run through the lab
    ("cli",),
]
# What ros1 agents import in Debian's python3 (the face tracker's workload needs OpenCV).
AGENT_SIDE = [*LAYERS[5], "workloads.echo", "workloads.oneway", "workloads.graph"]
# Layers that stand side by side: neither imports the other.
APART = [("env", "runtime"), ("env", "backends"), ("records", "runtime"), ("records", "backends")]


def _type_checking_only(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imported(path: Path) -> set[str]:
    """Every roboscale module a file imports, at module level or inside functions."""
    names: set[str] = set()
    pending: list[ast.AST] = [ast.parse(path.read_text(), str(path))]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _type_checking_only(node):
            pending += node.orelse
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        pending += ast.iter_child_nodes(node)
    return {n.removeprefix("roboscale.") for n in names if n.startswith("roboscale.")}


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")


def layer_of(module: str) -> int | None:
    """The index of the most specific layer holding `module`, None for the foundation."""
    matches = [
        (len(prefix), index)
        for index, prefixes in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(matches)[1] if matches else None


def _apart(module: str, name: str) -> bool:
    def within(m: str, layer: str) -> bool:
        return m == layer or m.startswith(layer + ".")

    return any(
        (within(module, a) and within(name, b)) or (within(module, b) and within(name, a))
        for a, b in APART
    )


def violations() -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        module = module_of(path)
        own = layer_of(module)
        for name in sorted(imported(path)):
            other = layer_of(name)
            upward = other is not None and (own is None or other > own)
            if upward or _apart(module, name):
                found.append(f"{module} imports {name}")
    return found


def test_layers_only_point_down() -> None:
    assert violations() == []


def test_imports_inside_functions_count_and_type_only_ones_do_not(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import roboscale.lab\n"
        "def f():\n    from roboscale.spec.planner import plan\n"
    )
    assert imported(bad) == {"spec.planner", "spec.planner.plan"}
    assert layer_of("runtime.bridge") == 0 and layer_of("errors") is None
    assert layer_of("workloads.stream") < layer_of("workloads.facetrack")
    assert layer_of("workloads.base") < layer_of("spec.loader") < layer_of("workloads.echo")
    assert _apart("env.hostfacts", "runtime.executor") and not _apart("lab.envs", "env.hosts")


@pytest.mark.ros1
def test_agent_modules_import_only_the_stdlib(ros1: None) -> None:
    """ros1 agents run in Debian's system Python, without the venv's packages."""
    from roboscale.lab.nodes import package_path

    imports = "".join(f"import roboscale.{m}\n" for m in [*AGENT_SIDE, "backends.ros1"])
    code = (
        f"import sys\nsys.path.insert(0, {str(package_path())!r})\n{imports}"
        "print(sorted({'numpy', 'pyarrow', 'pydantic', 'matplotlib'} & set(sys.modules)))\n"
    )
    out = subprocess.run(
        ["/usr/bin/python3", "-I", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "[]"
