"""`roboscale hosts ...`: the user's real machines, from an inventory, over OpenSSH."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from roboscale.env.inventory import Inventory, load_inventory
from roboscale.env.ssh import connections
from roboscale.errors import UserError
from roboscale.safewrite import write_text

HELP = """\
Real machines: an inventory (YAML) names them; every command reaches them with
your own OpenSSH client (~/.ssh/config, agent, ProxyJump), in batch mode.

  roboscale hosts check INVENTORY        reachable? Python, roboscale, backends, idle CPU, clock
  roboscale hosts install INVENTORY      copy this roboscale and its wheels, install in a venv

A host entry:

  hosts:
    robot:
      address: 192.168.1.20     # or an ssh_config alias
      user: pi
      identity_file: ~/.ssh/id_ed25519
      workdir: .roboscale       # on the host, relative to its home
      roles: [echoer, roscore]
"""


def add_parser(sub: Any) -> None:
    fmt = argparse.RawDescriptionHelpFormatter
    hosts = sub.add_parser(
        "hosts", help="check and set up real machines over SSH", description=HELP,
        formatter_class=fmt,
    )  # fmt: skip
    hsub = hosts.add_subparsers(dest="hosts_command", metavar="SUBCOMMAND", required=True)
    c = hsub.add_parser("check", help="report each host: reachable, versions, backends, clock")
    c.add_argument("inventory", type=Path, help="host inventory (YAML)")
    c.add_argument("--json", type=Path, help="also write the report as JSON here")
    i = hsub.add_parser("install", help="install this roboscale on each host, offline")
    i.add_argument("inventory", type=Path, help="host inventory (YAML)")
    i.add_argument(
        "--wheels",
        type=Path,
        help="a wheelhouse made before (default: build one for the hosts' platform with pip)",
    )
    i.add_argument("--extras", default="", help="roboscale extras to install, e.g. dds")
    for p in (c, i):
        p.add_argument("--host", action="append", help="only this inventory host (repeatable)")


def main(args: argparse.Namespace, console: Console) -> int:
    inventory = load_inventory(args.inventory)
    names = args.host or list(inventory.hosts)
    hosts = [inventory.host(n) for n in names]
    if args.hosts_command == "check":
        return _check(inventory, hosts, args, console)
    return _install(hosts, args, console)


def _check(inventory: Inventory, hosts: list[Any], args: argparse.Namespace, out: Console) -> int:
    from roboscale.lab.remote import check

    with connections(hosts) as links:
        checks = [check(links[h.name]) for h in hosts]
    table = Table("host", "reachable", "python", "roboscale", "backends", "idle CPU", "clock")
    for c in checks:
        backends = ", ".join(n for n, v in c.backends.items() if not v.startswith("unavail"))
        clock = (
            f"{c.clock.offset_ns / 1e6:+.3f} ms ± {c.clock.bound_ns / 1e3:.0f} µs"
            if c.clock
            else ""
        )
        table.add_row(
            c.name,
            "[green]yes[/green]" if c.reachable else "[red]no[/red]",
            c.python,
            f"{c.roboscale} {c.fingerprint}" if c.roboscale else "",
            backends,
            f"{c.idle_cpu:.0%} of {c.cores}" if c.idle_cpu is not None else "",
            clock,
        )
    out.print(table)
    for c in checks:
        if c.problem:
            out.print(f"[red]{escape(c.name)}[/red]: {escape(c.problem)}", highlight=False)
    if args.json:
        write_text(args.json, json.dumps([c.as_dict() for c in checks], indent=2))
    return 0 if all(not c.problem for c in checks) else 1


def _install(hosts: list[Any], args: argparse.Namespace, out: Console) -> int:
    from roboscale.lab.remote import build_wheels, check, install

    with connections(hosts) as links:
        checks = [check(links[h.name]) for h in hosts]
        unreachable = [c for c in checks if not c.reachable or not c.python]
        if unreachable:
            raise UserError(
                "cannot install on: " + "; ".join(f"{c.name}: {c.problem}" for c in unreachable)
            )
        with tempfile.TemporaryDirectory(prefix="roboscale-wheels-") as tmp:
            wheels = args.wheels or build_wheels(Path(tmp), checks, args.extras)
            for h in hosts:
                out.print(f"installing on {h.name} ({h.address}) into {h.workdir}/venv …")
                install(links[h.name], wheels, args.extras)
        after = [check(links[h.name]) for h in hosts]
    bad = [c for c in after if c.problem]
    for c in after:
        state = "[green]ok[/green]" if not c.problem else f"[red]{escape(c.problem)}[/red]"
        out.print(f"{c.name}: roboscale {c.roboscale} ({c.fingerprint}) {state}")
    return 1 if bad else 0
