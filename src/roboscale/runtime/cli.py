"""The runtime's subcommands: `roboscale launch`, `roboscale status`, `roboscale chaos`.

`add_parsers(subparsers)` adds them to the main parser; `COMMANDS` maps each name
to its `cmd_*(args, console) -> int`. Bad input raises UserError (exit code 2 in
the main command); a tree that died, or chaos that left it broken, is exit code 1.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, Group, JustifyMethod, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from roboscale.cliargs import path as path_arg
from roboscale.errors import UserError

if TYPE_CHECKING:
    from roboscale.runtime.chaos import ChaosMonkey, ChaosReport
    from roboscale.runtime.chaosspec import ChaosSpec
    from roboscale.runtime.statusfile import LaunchStatus

# The runtime modules are imported when a command runs: `roboscale --help` stays fast.
KEYS = ("rate", "duration", "method", "target", "seed", "settle", "log")  # chaosspec.KEYS

LAUNCH_HELP = """\
Start a supervision tree from a launch file, YAML or roslaunch XML (.launch, .xml),
validated first: every mistake is reported with file:line: field. Run it until
Ctrl-C or SIGTERM, then stop it in reverse order. A roslaunch file gets a private
rosmaster unless --master names one; respawn, respawn_delay and required become
restart policies. A node on a <machine> elsewhere is started there over ssh (host
keys always checked; ROBOSCALE_SSH_CONFIG names an ssh_config file, else yours applies)
and supervised here. --check validates only (no runtime, nothing of yours imported);
--explain prints the supervision tree the file became. While it runs, its live status is
published for `roboscale status`.
With --chaos (or a `chaos:` section in the file) the chaos monkey runs, prints its
summary, and the launch ends: exit code 0 when the tree survived with every child
running, 1 otherwise. A mistake in the file: exit code 2.
The YAML format (children node, process, command, ros_master, ros_node, remote,
supervisor; zygote:, a process child's standby: true, bridge:, cursors:, security:,
chaos:): docs/runtime.md, "Launch files", and the docstring of
roboscale/runtime/launchmodels.py.
"""
LAUNCH_EXAMPLES = """\
examples:
  roboscale launch examples/launch/workers.yaml
  roboscale launch examples/launch/talker_listener.launch rate:=20
  roboscale launch --check examples/launch/talker_listener.launch
  roboscale launch --explain robot.launch               # the tree, then nothing runs
  roboscale launch robot.yaml --events events.jsonl     # record every supervision event
  ROBOSCALE_SSH_CONFIG=lab_ssh_config roboscale launch two_hosts.launch
  roboscale launch examples/launch/workers.yaml \
      --chaos rate=200,duration=10,method=exception,target=/workers/*
"""
STATUS_HELP = """\
Show the live tree of running launches: state, restarts, messages delivered,
queue depths, drops, last exit, and per-topic message rates. A status file left
by a launch that no longer runs is reported as stale and removed. Exit code (not
with --watch): 0 when a launch (of that name) runs, 1 when none does, so that
`roboscale status robot` in a script asks whether robot is up.
"""
STATUS_EXAMPLES = """\
examples:
  roboscale status                  # every running launch
  roboscale status workers --watch  # refresh twice a second until the launch ends
  roboscale status --json           # the raw status documents
"""
CHAOS_HELP = """\
Start the launch file's tree and kill its nodes at a given rate for a given
duration: targets are picked at random (seeded) among the children whose path
matches --target; methods: exception (a callback raises), hang (a callback blocks
until the watchdog catches it; needs deadline_s), sigterm and sigkill (process and
command children). Each kill, exit and restart is written to a JSON-lines log. The
summary gives kills, restarts, restart time p50/p99 (kill until the new instance
is ready) and whether the tree is alive with every child running (exit code 0).
Options override the file's `chaos:` section.
"""
CHAOS_EXAMPLES = """\
examples:
  roboscale chaos examples/launch/workers.yaml --rate 200 --duration 10
  roboscale chaos examples/launch/workers.yaml --method exception:8+hang:1 --target '/workers/w1*'
  roboscale chaos robot.yaml --method sigkill --target '/drivers/*' --log kills.jsonl
"""
REFRESH_S = 0.5
PIPE_WIDTH = 160


def add_parsers(sub: Any) -> None:
    """Add `launch`, `status` and `chaos` to the main parser's subparsers."""
    fmt = argparse.RawDescriptionHelpFormatter
    p = sub.add_parser(
        "launch",
        help="run a launch file's supervision tree",
        description=LAUNCH_HELP,
        epilog=LAUNCH_EXAMPLES,
        formatter_class=fmt,
    )
    p.add_argument("file", type=path_arg, help="launch file (YAML, or roslaunch XML)")
    p.add_argument(
        "args", nargs="*", metavar="NAME:=VALUE", help="roslaunch arguments (<arg> values)"
    )
    p.add_argument(
        "--master", metavar="URI", help="roslaunch files: use this ROS master, not a private one"
    )
    p.add_argument("--check", action="store_true", help="validate only, start nothing")
    p.add_argument("--explain", action="store_true", help="print the supervision tree")
    p.add_argument(
        "--events", type=path_arg, help="append every supervision event to this JSON-lines file"
    )
    p.add_argument(
        "--chaos", metavar="KEY=VALUE,...", help=f"run the chaos monkey; keys: {', '.join(KEYS)}"
    )

    s = sub.add_parser(
        "status",
        help="show the live tree of running launches",
        description=STATUS_HELP,
        epilog=STATUS_EXAMPLES,
        formatter_class=fmt,
    )
    s.add_argument("name", nargs="?", help="a launch's name (its root supervisor); default: all")
    s.add_argument("--watch", action="store_true", help="refresh until the launch ends or Ctrl-C")
    s.add_argument("--json", action="store_true", help="print the raw status documents")

    c = sub.add_parser(
        "chaos",
        help="kill a launch's nodes at a rate and check it survives",
        description=CHAOS_HELP,
        epilog=CHAOS_EXAMPLES,
        formatter_class=fmt,
    )
    c.add_argument("file", type=path_arg, help="launch file (YAML) of the tree to torment")
    c.add_argument("--rate", help="kills per second (default 200)")
    c.add_argument("--duration", help="seconds (default 10)")
    c.add_argument(
        "--method", help="exception | hang | sigterm | sigkill, or weighted: exception:8+hang:1"
    )
    c.add_argument(
        "--target", help="path pattern, absolute or below the root: '/workers/*' (default *)"
    )
    c.add_argument("--seed", help="random seed (default 0)")
    c.add_argument("--settle", help="seconds allowed for the last restarts (default 5)")
    c.add_argument(
        "--log", type=path_arg, help="JSON-lines log (default results/chaos/NAME-TIME.jsonl)"
    )
    c.add_argument("--events", type=path_arg, help="append every supervision event to this file")


# -- launch and chaos ------------------------------------------------------------------------
def cmd_launch(args: argparse.Namespace, console: Console) -> int:
    from roboscale.runtime.chaosspec import chaos_from_launch, parse_chaos_option
    from roboscale.runtime.launchspec import XML_SUFFIXES, explain, read_launch

    path = _launch_file(args.file)
    launch_args = parse_launch_args(args.args)
    if args.check or args.explain:
        launch = read_launch(path, launch_args, master=args.master)  # pure data, no user code
        if args.explain:
            console.print(escape(explain(launch.spec)), highlight=False, soft_wrap=True)
        else:
            console.print(f"{path}: ok, {count_children(launch.spec)} children")
        return 0
    xml = path.suffix in XML_SUFFIXES
    chaos = parse_chaos_option(args.chaos) if args.chaos else None
    spec = chaos if chaos is not None or xml else chaos_from_launch(path)
    return run(path, spec, console, events=args.events, args=launch_args, master=args.master)


def parse_launch_args(given: list[str]) -> dict[str, str]:
    """roslaunch's `name:=value` command-line arguments."""
    values: dict[str, str] = {}
    for item in given:
        name, sep, value = item.partition(":=")
        if not sep or not name:
            raise UserError(f"{item!r}: launch arguments are name:=value (e.g. rate:=20)")
        values[name] = value
    return values


def count_children(spec: Any) -> int:
    return sum(1 + count_children(c) if hasattr(c, "children") else 1 for c in spec.children)


def cmd_chaos(args: argparse.Namespace, console: Console) -> int:
    from roboscale.runtime.chaosspec import ChaosSpec, build_spec, chaos_from_launch

    path = _launch_file(args.file)
    from roboscale.runtime.launchspec import XML_SUFFIXES

    xml = path.suffix in XML_SUFFIXES  # roslaunch files have no chaos: section
    base = (None if xml else chaos_from_launch(path)) or ChaosSpec()
    given = {k: getattr(args, k) for k in KEYS if getattr(args, k, None) is not None}
    try:
        overrides = build_spec(given)
    except ValueError as e:
        raise UserError(f"--{e}") from None
    spec = ChaosSpec(**{f: getattr(overrides if _given(f, given) else base, f) for f in _FIELDS})
    return run(path, spec, console, events=args.events)


_FIELDS = ("rate", "duration", "methods", "target", "seed", "settle", "log")


def _given(field: str, given: dict[str, Any]) -> bool:
    return ("method" if field == "methods" else field) in given


def _launch_file(path: Path) -> Path:
    if not path.exists():
        raise UserError(f"{path}: no such launch file", hint="see examples/launch/workers.yaml")
    return path


def run(
    path: Path,
    spec: ChaosSpec | None,
    console: Console,
    *,
    events: Path | None,
    args: dict[str, str] | None = None,
    master: str | None = None,
) -> int:
    """Run a launch, publishing its status, with the chaos monkey when `spec` is given."""
    from roboscale.runtime.chaos import ChaosMonkey
    from roboscale.runtime.chaosspec import ChaosSpec
    from roboscale.runtime.executor import Runtime
    from roboscale.runtime.launch import run_launch
    from roboscale.runtime.statusfile import StatusPublisher
    from roboscale.runtime.supervisor import Supervisor

    if spec is not None and spec.log is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        spec = ChaosSpec(
            **{f: getattr(spec, f) for f in _FIELDS if f != "log"},
            log=Path("results") / "chaos" / f"{path.stem}-{stamp}.jsonl",
        )
    monkeys: list[ChaosMonkey] = []

    async def session(rt: Runtime, root: Supervisor) -> int | None:
        monkey = ChaosMonkey(rt, root, spec) if spec is not None else None
        publisher = StatusPublisher(root, rt.bus, extra=_chaos_progress(monkey))
        publishing = asyncio.ensure_future(publisher.run())
        console.print(
            f"[bold]{root.name}[/bold] running; Ctrl-C stops it. "
            f"Status: roboscale status {root.name}"
        )
        try:
            if monkey is None:
                await publishing  # until Ctrl-C, or an error writing the status file
                return None
            monkeys.append(monkey)
            chaos = monkey.spec
            console.print(
                f"chaos: up to {chaos.kills} kills at {chaos.rate:g}/s for "
                f"{chaos.duration:g} s on {len(monkey.targets)} targets"
            )
            report = await monkey.run()
            return 0 if report.ok else 1
        finally:
            publishing.cancel()
            await asyncio.gather(publishing, return_exceptions=True)

    with _quiet_events(spec is not None):
        code = run_launch(path, events=events, session=session, args=args, master=master)
    if monkeys:
        console.print(chaos_table(monkeys[0].report))
    return code


def _chaos_progress(monkey: ChaosMonkey | None) -> Callable[[], dict[str, Any]]:
    if monkey is None:
        return dict
    return lambda: {"chaos": monkey.progress()}


@contextlib.contextmanager
def _quiet_events(quiet: bool) -> Iterator[None]:
    # Under chaos every kill is an event: the log file has them; the terminal gets the summary.
    logger = logging.getLogger("roboscale.runtime")
    level = logger.level
    if quiet:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def chaos_table(report: ChaosReport) -> Table:
    d = report.to_dict()
    verdict = "[green]alive, every child running[/green]" if report.ok else "[red]BROKEN[/red]"
    table = Table("chaos", "", title="chaos summary", show_header=False)
    rows = [
        ("kills", f"{d['kills']} ({', '.join(f'{k} {v}' for k, v in d['by_method'].items())})"),
        ("achieved rate", f"{d['achieved_rate']}/s over {d['elapsed_s']} s"),
        ("skipped (no running target)", str(d["skipped"])),
        ("restarts", str(d["restarts"])),
        (
            "restart p50 / p99 / max",
            " / ".join(_ms(d[k]) for k in ("restart_p50_ms", "restart_p99_ms", "restart_max_ms")),
        ),
        ("hangs not caught", str(d["uncaught_hangs"])),
        ("supervisors that gave up", ", ".join(d["gave_up"]) or "none"),
        ("not running at the end", _some(d["not_running"])),
        ("tree", verdict),
        ("log", escape(str(d["log"]))),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _some(paths: list[str], shown: int = 5) -> str:
    if not paths:
        return "none"
    return f"{len(paths)}: " + ", ".join(paths[:shown]) + (", ..." if len(paths) > shown else "")


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f} ms"


# -- status ----------------------------------------------------------------------------------
def cmd_status(args: argparse.Namespace, console: Console) -> int:
    from roboscale.runtime.statusfile import read_statuses

    if not console.is_terminal:
        console.width = max(console.width, PIPE_WIDTH)  # piped: never cut a path or a number
    if args.json:
        statuses = read_statuses(name=args.name)
        docs = [s.doc or {"name": s.name, "pid": s.pid, "stale": s.stale} for s in statuses]
        console.print_json(json.dumps(docs))
        return 0 if any(s.doc for s in statuses) else 1
    if args.watch:
        return _watch(args.name, console)
    statuses = read_statuses(name=args.name)
    console.print(render_statuses(statuses, args.name))
    return 0 if any(s.doc for s in statuses) else 1


def _watch(name: str | None, console: Console) -> int:
    """Refresh until Ctrl-C or until no watched launch runs any more (its last view stays)."""
    from roboscale.runtime.statusfile import read_statuses

    last: RenderableType | None = None
    try:
        with Live(console=console, auto_refresh=False) as live:
            while True:
                statuses = read_statuses(name=name)
                if not any(s.doc for s in statuses):
                    if last is None:  # nothing to watch: say so at once
                        live.update(render_statuses(statuses, name), refresh=True)
                        return 1
                    live.update(Group(last, Text("the launch ended", style="bold")), refresh=True)
                    return 0
                last = render_statuses(statuses, name)
                live.update(last, refresh=True)
                time.sleep(REFRESH_S)
    except KeyboardInterrupt:
        return 0


def render_statuses(statuses: list[LaunchStatus], name: str | None) -> RenderableType:
    from roboscale.runtime.statusfile import run_dir

    if not statuses:
        which = f"named {name!r} " if name else ""
        return Text(f"no running launch {which}(looked in {run_dir()})")
    parts: list[RenderableType] = []
    for s in statuses:
        if s.doc is None:
            parts.append(
                Text(f"{s.name} (pid {s.pid}): stale, {s.stale}; removed {s.path}", style="yellow")
            )
        else:
            parts.extend(render_status(s.doc))
    return Group(*parts)


_STATE_STYLE = {"running": "green", "stopped": "red"}
_TEXT = ("kind", "state")


def render_status(doc: dict[str, Any]) -> list[RenderableType]:
    """The tree table and the topic table of one status document."""
    up = max(0.0, doc["updated_unix"] - doc["started_unix"])
    age = max(0.0, time.time() - doc["updated_unix"])
    state = "[green]alive[/green]" if doc["alive"] else "[red]ended[/red]"
    head = f"[bold]{escape(doc['name'])}[/bold] pid {doc['pid']}  {state}  up {up:.0f} s"
    head += f"  (updated {age:.1f} s ago)"
    if "chaos" in doc:
        c = doc["chaos"]
        head += f"  chaos: {c['kills']} kills, {c['restarts']} restarts, {c['pending']} pending"
    # Paths are never cut (they name what to target); the last exit wraps instead.
    widest = max((len(r["path"]) for r in doc["rows"]), default=4)
    tree = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    tree.add_column("path", no_wrap=True, min_width=widest)
    for header in ("kind", "state", "restarts", "delivered", "queued", "dropped"):
        justify: JustifyMethod = "left" if header in _TEXT else "right"
        tree.add_column(header, no_wrap=True, min_width=len(header), justify=justify)
    tree.add_column("last exit", overflow="fold", ratio=1)
    for r in doc["rows"]:
        style = _STATE_STYLE.get(r["state"], "")
        tree.add_row(
            escape(r["path"]),
            r["kind"],
            f"[{style}]{r['state']}[/{style}]",
            str(r["restarts"]),
            str(r["delivered"]),
            str(r["queued"]),
            str(r["dropped"]),
            escape(r["last_exit"]),
        )
    topics = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    topics.add_column("topic", no_wrap=True)
    for header in ("msgs/s", "published", "subscribers"):
        topics.add_column(header, justify="right")
    for t in doc["topics"]:
        topics.add_row(
            escape(t["topic"]), f"{t['rate_hz']:g}", str(t["published"]), str(t["subscribers"])
        )
    return [Text.from_markup(head), tree, topics]


COMMANDS: dict[str, Callable[[argparse.Namespace, Console], int]] = {
    "launch": cmd_launch,
    "status": cmd_status,
    "chaos": cmd_chaos,
}
