"""Property tests (Hypothesis) of the readers of users' files: the YAML reader, the spec
loader, the graph-file loader and the host inventory. Generated text, bytes and mappings;
each is refused with a clear error (a UserError, which the CLI prints as `error:` and exit
code 2) or read to the value it holds. A fixed small budget each (`max_examples`), no
deadline (a loaded machine), derandomized and without an example database, so `make test`
stays fast and repeatable.
"""

from __future__ import annotations

import copy
import math
import re
import shlex
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from roboscale.env.inventory import load_inventory
from roboscale.env.ssh import Ssh
from roboscale.errors import UserError
from roboscale.spec.graphfile import is_name, is_topic, read_graph
from roboscale.spec.loader import load_spec
from roboscale.yamlfile import load_yaml

FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="roboscale-fuzz-") as tmp:
        yield Path(tmp)


def written(folder: Path, data: bytes | str, name: str = "input.yaml") -> Path:
    path = folder / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


# -- the YAML reader ------------------------------------------------------------------------
class Reference(yaml.SafeLoader):
    """yaml.safe_load's YAML 1.1, less what the reader deliberately reads otherwise:
    dates and the `=` value key stay text."""


class CReference(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The same on libyaml's parser, which the reader uses: it takes a few texts that
    PyYAML's own scanner refuses (a tab after a plain scalar: `0\t`)."""


for _loader in (Reference, CReference):
    _loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if not tag.endswith((":timestamp", ":value"))]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }


def reference(text: str) -> tuple[bool, Any]:
    """What safe_load reads (less dates and `=`), by PyYAML's parser, else by libyaml's."""
    for loader in (Reference, CReference):
        try:
            return True, yaml.load(text, Loader=loader)  # safe loaders both
        except yaml.YAMLError:
            continue
    return False, None


def same(a: Any, b: Any) -> bool:
    """Equal values, NaN equal to NaN, a bool never equal to a number."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def read_or_refuse(path: Path) -> tuple[bool, Any]:
    """(True, value) or (False, the error's text); any other exception fails the test."""
    try:
        value, _ = load_yaml(path)
    except UserError as e:
        text = str(e)
        assert text.startswith(str(path)), text  # the error names the file
        return False, text
    return True, value


# Characters that make YAML structure, and some that break lines or decoding.
YAML_CHARS = ":-[]{},#&*!|>'\"%@`?=<~. \t\n\r0123456789abcdeyYnNxX_\\\x85\u2028\ufeff\x00é"
yaml_text = st.text(alphabet=YAML_CHARS, max_size=120)
# Plain data as documents hold it: text keys, and values YAML writes and reads back.
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**18), max_value=10**18)
    | st.floats(allow_nan=False, width=64)
    | st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
)
plain_data = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(st.characters(blacklist_categories=("Cs",)), max_size=8), inner, max_size=4
        )
    ),
    max_leaves=20,
)


@FUZZ
@given(text=yaml_text)
def test_yaml_text_is_refused_or_read_as_safe_load_reads_it(folder: Path, text: str) -> None:
    ok, value = read_or_refuse(written(folder, text))
    if ok:
        parsed, expected = reference(text.removeprefix("\ufeff"))
        assert parsed and same(value, expected), (value, expected)


@FUZZ
@given(data=st.binary(max_size=120))
def test_yaml_bytes_are_refused_or_read(folder: Path, data: bytes) -> None:
    ok, value = read_or_refuse(written(folder, data))
    if ok:
        parsed, expected = reference(data.decode("utf-8-sig"))
        assert parsed and same(value, expected), (value, expected)


@FUZZ
@given(data=st.dictionaries(st.text(max_size=8), plain_data, min_size=1, max_size=5),
       flow=st.booleans(), raw=st.booleans())  # fmt: skip
def test_plain_documents_read_back_as_written(
    folder: Path, data: Any, flow: bool, raw: bool
) -> None:
    """A document PyYAML writes is read. Escaped (`allow_unicode=False`), it reads back as
    the data; with raw Unicode, PyYAML's writer may put a line break of Unicode (NEL, LS)
    raw inside quotes, where YAML folds it to a space: then it reads as safe_load reads it."""
    text = yaml.safe_dump(data, default_flow_style=flow, allow_unicode=raw)
    ok, value = read_or_refuse(written(folder, text))
    assert ok, f"{value}\n--- the document:\n{text}"
    assert same(value, data if not raw else reference(text)[1]), text


# -- mutations of valid documents ---------------------------------------------------------------
# A document made of random parts rarely gets past its first check; one valid document with
# one to three of its values replaced, keys renamed or removed reaches every later one.
def key_paths(doc: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key and index of a document, outermost first."""
    items = (
        doc.items() if isinstance(doc, dict) else enumerate(doc) if isinstance(doc, list) else ()
    )
    out = []
    for key, value in items:
        out.append((*prefix, key))
        out += key_paths(value, (*prefix, key))
    return out


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for key in path[:-1]:
        doc = doc[key]
    return doc


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any], value: st.SearchStrategy[Any]) -> Any:
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        paths = key_paths(doc)
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent, key = _parent(doc, path), path[-1]
        action = draw(st.sampled_from(["set", "set", "set", "delete", "rename"]))
        if action == "set":
            parent[key] = draw(value)
        elif action == "delete":
            parent.pop(key)
        elif isinstance(parent, dict):
            new = draw(st.sampled_from([f"{key}\n", f"{key}x", "", " "]) | st.text(max_size=6))
            if new not in parent:
                parent[new] = parent.pop(key)
    return doc


def dumped(data: Any) -> str:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


def refused_or(path: Path, load: Any) -> Any:
    """What `load(path)` gives, or None when it refused the file with a clear error."""
    try:
        loaded = load(path)
    except UserError as e:
        assert str(e).startswith(str(path)), str(e)  # it names the file first
        event("refused")
        return None
    event("loaded")
    return loaded


# Values near each field's meaning and past its edges: names, numbers at and beyond their
# ranges, the axes' words, text with line breaks, lists and mappings.
WORDS = ["native", "dds", "zenoh", "ros1", "echo", "facetrack", "graph", "fanout", "runtime",
         "runtime-proc", "erlang", "crash", "sigkill", "sigterm", "reliable", "best_effort",
         "keep_all", "keep_last 5", "keep_last\n5", "keep_last ²", "transient_local", "4KB",
         "1.5B", "9" * 300, "9" * 300 + "KB", "text", "laserscan", "loopback", "wifi", "x\n",
         "", "star", "10.0.0.0/30", "shuffled", "a//b", "a/", "scan\n", "random", "sleep",
         "busy", "any", "all", "lidar", "filter", "sink", "scan", "points", "\0"]  # fmt: skip
values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from(WORDS)
    | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.sampled_from(WORDS) | st.text(max_size=5), inner, max_size=2)
    ),
    max_leaves=6,
)


# -- the spec loader ----------------------------------------------------------------------------
BASE_SPECS = [
    {"name": "s", "sweep": {"backend": ["native", "dds"], "rate_hz": [10, 20],
                            "payload": ["4KB", "text"], "pairs": 1, "workload": "echo"},
     "trial": {"messages": 100, "warmup": 5, "drain_s": 1}, "verdict": {"max_loss": 0.1}},
    {"name": "q", "sweep": {"backend": "dds", "rate_hz": 10, "reliability": "best_effort",
                            "history": ["keep_last 5", "keep_all"],
                            "durability": "transient_local", "workload": ["fanout", "chain"],
                            "listeners": 2, "chain_length": 3}},
    {"name": "f", "sweep": {"workload": "facetrack", "rate_hz": 10, "stack": ["runtime", "ros1"],
                            "workers": 4, "deque_len": [1, 5], "kills": [0, 2],
                            "kill_method": "sigkill", "dispatch": "random"},
     "trial": {"messages": 50}, "quick": {"sweep": {"workers": 2}}},
]  # fmt: skip


@FUZZ
@given(data=st.sampled_from(BASE_SPECS).flatmap(lambda base: mutated(base, values)))
def test_specs_are_refused_or_loaded(folder: Path, data: dict[str, Any]) -> None:
    spec = refused_or(written(folder, dumped(data), "spec.yaml"), load_spec)
    if spec is None:
        return
    # What loaded holds only what its checks allow: names in full, QoS in one spelling,
    # sizes in range, and a face tracker's kill methods its stacks have.
    assert re.fullmatch(r"[A-Za-z0-9_.-]+", spec.name)
    for value in spec.sweep.history:
        assert value is None or re.fullmatch(r"keep_all|keep_last( [1-9][0-9]*)?", value)
    assert all(1 <= size <= 4 << 20 for _, size in spec.sweep.payload)
    if "facetrack" in spec.sweep.workload and any(spec.sweep.kills):
        from roboscale.facetrack.stack import get_stack

        for stack in spec.sweep.stack:
            assert set(spec.sweep.kill_method) <= set(get_stack(stack).kill_methods)


def test_every_base_spec_loads(folder: Path) -> None:
    for base in BASE_SPECS:
        assert load_spec(written(folder, dumped(base), "spec.yaml")).name == base["name"]


# -- the graph-file loader ------------------------------------------------------------------------
BASE_GRAPH = {
    "version": 1,
    "name": "g",
    "nodes": {
        "lidar": {"host": 0, "publish": [{"topic": "scan", "rate_hz": 20, "payload": "laserscan"},
                                         {"topic": "diag/lidar", "rate_hz": 1, "payload": 64}]},
        "odom": {"publish": {"topic": "odom", "rate_hz": 50, "payload": "256B"}},
        "fuse": {"host": 1, "fusion": {"inputs": ["scan", "odom"], "when": "any",
                                       "output": "pose", "payload": "1KB", "work_ms": 1}},
        "filter": {"relay": {"input": "pose", "output": "points", "payload": "4KB",
                             "work": "busy"}},
        "plan": {"timer": {"rate_hz": 10, "inputs": ["points"], "output": "plan",
                           "payload": "2KB"}},
        "sink": {"subscribe": ["plan", "diag/lidar"]},
    },
    "paths": {"scan_to_plan": ["lidar", "fuse", "filter", "plan", "sink"]},
}  # fmt: skip


@FUZZ
@given(data=mutated(BASE_GRAPH, values))
def test_graph_files_are_refused_or_loaded(folder: Path, data: dict[str, Any]) -> None:
    graph = refused_or(written(folder, dumped(data), "graph.yaml"), read_graph)
    if graph is None:
        return
    for n in graph.nodes:
        assert is_name(n.name) and 0 <= n.host <= 63
        for out in n.outputs:
            assert is_topic(out.topic) and all(is_topic(t) for t in out.inputs)
            assert 1 <= out.payload_bytes <= 4 << 20
            assert 0.1 <= out.rate_hz <= 10_000 if not out.triggered else out.rate_hz == 0
    names = {n.name for n in graph.nodes}
    assert all(is_name(p.name) and set(p.nodes) <= names for p in graph.paths)


def test_the_base_graph_loads(folder: Path) -> None:
    graph = read_graph(written(folder, dumped(BASE_GRAPH), "graph.yaml"))
    assert [p.topics for p in graph.paths] == [("scan", "pose", "points", "plan")]


# -- the host inventory -------------------------------------------------------------------------
TEXTS = ["pi", "pi\n", "-oProxyCommand=x", ".roboscale", "~/rs", "~", "~bob", "a b", "x;y",
         "$(id)", "192.0.2.1", "robot.local", "", "python3", "/usr/bin/python3", "é",
         "a\0"]  # fmt: skip
BASE_INVENTORY = {"hosts": {
    "robot": {"address": "192.0.2.1", "user": "pi", "port": 2222, "workdir": "~/rs",
              "python": "python3", "roles": ["echoer", "roscore"], "peer_address": "10.0.0.2"},
    "laptop": {"address": "laptop.local", "workdir": ".roboscale"},
}}  # fmt: skip


@FUZZ
@given(data=mutated(BASE_INVENTORY, st.sampled_from(TEXTS) | values))
def test_inventories_are_refused_or_loaded(folder: Path, data: dict[str, Any]) -> None:
    inventory = refused_or(written(folder, dumped(data), "inventory.yaml"), load_inventory)
    if inventory is None:
        return
    for h in inventory.hosts.values():
        for text in (h.name, h.address, h.user or "x", h.workdir, h.python):
            assert re.fullmatch(r"[A-Za-z0-9_.:%/~+-]+", text) and not text.startswith("-")
        # The working directory reaches the remote shell as one word, whatever it holds.
        line = Ssh(h, folder).shell_argv("true")[-1]
        words = shlex.split(line)
        expected = h.workdir.replace("~", "$HOME", 1) if h.workdir.startswith("~") else h.workdir
        assert words[:4] == ["mkdir", "-p", "--", expected], words
        assert words[5:8] == ["cd", "--", expected], words


def test_the_base_inventory_loads(folder: Path) -> None:
    inventory = load_inventory(written(folder, dumped(BASE_INVENTORY), "inventory.yaml"))
    assert list(inventory.hosts) == ["robot", "laptop"]
