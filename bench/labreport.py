"""The lab report's findings (seed 003), checked against results folders of this lab.

Reads the summary.json of runs of the lab-report specs and prints, per backend, the
figures behind three findings and whether they agree:

1. latency grows with message size (size-sweep: echo round trip p50 by size);
2. fan-out costs more for large messages (labreport-fanout: one-way p50 with the most
   listeners / with the fewest, at the smallest and at the largest size);
3. a chain hop costs about a ping (labreport-chain's median hop p50 / labreport-ping's
   one-way p50 without ack, at each size both ran).

    .venv/bin/python bench/labreport.py RESULTS_DIR... [--json PATH]

Agreement rules (stated, not tuned): 1 holds when the p50 at the largest size is above
the p50 at the smallest and never falls by more than 20 % from one size to the next; 2
when the listener ratio at the largest size exceeds that at the smallest; 3 when the
hop / ping ratio lies within 0.5-2 at every size.
"""

from __future__ import annotations

import itertools
import statistics
from pathlib import Path
from typing import Any

from common import header, parser, save, table
from goals import Target, shown
from roboscale.records.folder import ResultsFolder

Entry = dict[str, Any]


def entries(folders: list[Path]) -> list[Entry]:
    """Every finished trial's summary entry, read and checked by ResultsFolder."""
    out: list[Entry] = []
    for folder in folders:
        out += [e.to_dict() for e in ResultsFolder(folder).summary().trials]
    return [e for e in out if e.get("received")]


def by_environment(es: list[Entry]) -> dict[str, list[Entry]]:
    """Trials grouped by where they ran: findings never mix hosts, links or loads."""
    groups: dict[str, list[Entry]] = {}
    for e in es:
        where = "this machine" if e.get("hosts", 1) == 1 else f"{e['hosts']} hosts {e['link']}"
        where += f", cpu {e['cpu']}" if e.get("cpu") is not None else ""
        where += f", load {e['load_cpu']:g}" if e.get("load_cpu") else ""
        where += f", +{e['load_net_mbit']:g} Mbit/s" if e.get("load_net_mbit") else ""
        groups.setdefault(where, []).append(e)
    return groups


def p50(entry: Entry, key: str) -> float | None:
    value = (entry.get(key) or {}).get("p50")
    return float(value) if value is not None else None


def size_finding(es: list[Entry], backend: str) -> dict[str, Any] | None:
    by_size = {
        e["payload_bytes"]: p50(e, "rtt_us")
        for e in es
        if e["backend"] == backend and e.get("workload", "echo") == "echo"
    }
    sizes = sorted(s for s, v in by_size.items() if v is not None)
    if len(sizes) < 2:
        return None
    values = [by_size[s] or 0.0 for s in sizes]
    grows = values[-1] > values[0] and all(b >= 0.8 * a for a, b in itertools.pairwise(values))
    figure = ", ".join(f"{s} B {v:.0f}" for s, v in zip(sizes, values, strict=True))
    return {"finding": "latency grows with size", "backend": backend,
            "figure": f"echo RTT p50 µs: {figure}", "agrees": grows}  # fmt: skip


def fanout_finding(es: list[Entry], backend: str) -> dict[str, Any] | None:
    fan = [e for e in es if e["backend"] == backend and e.get("workload") == "fanout"]
    sizes = sorted({e["payload_bytes"] for e in fan})
    ratios = {}
    for size in sizes:
        at = {e["listeners"]: p50(e, "one_way_us") for e in fan if e["payload_bytes"] == size}
        few, most = min(at), max(at)
        if most > few and at[few] and at[most]:
            ratios[size] = (at[most] or 0.0) / (at[few] or 1.0)
    if len(ratios) < 2:
        return None
    small, large = min(ratios), max(ratios)
    listeners = sorted({e["listeners"] for e in fan})
    figure = (
        f"one-way p50 with {listeners[-1]} / {listeners[0]} listeners: "
        f"{ratios[small]:.2f}x at {small} B, {ratios[large]:.2f}x at {large} B"
    )
    return {"finding": "fan-out costs more for large messages", "backend": backend,
            "figure": figure, "agrees": ratios[large] > ratios[small]}  # fmt: skip


def about_a_ping(ratio: float) -> bool:
    return 0.5 <= ratio <= 2.0


def chain_finding(es: list[Entry], backend: str) -> dict[str, Any] | None:
    pings = {
        e["payload_bytes"]: p50(e, "one_way_us")
        for e in es
        if e["backend"] == backend and e.get("workload") == "ping" and not e.get("ack")
    }
    ratios = {}
    for e in es:
        if e["backend"] != backend or e.get("workload") != "chain":
            continue
        hops = [p50(n, "hop_us") for n in e.get("per_node", [])]
        ping = pings.get(e["payload_bytes"])
        if ping and hops and None not in hops:
            ratios[e["payload_bytes"]] = statistics.median(h or 0.0 for h in hops) / ping
    if not ratios:
        return None
    rule = Target("", about_a_ping)
    figure = ", ".join(f"{s} B {shown(r, rule)}x" for s, r in sorted(ratios.items()))
    agrees = all(map(about_a_ping, ratios.values()))
    return {"finding": "a chain hop costs about a ping", "backend": backend,
            "figure": f"median hop p50 / ping one-way p50: {figure}", "agrees": agrees}  # fmt: skip


def main() -> None:
    p = parser(__doc__ or "")
    p.add_argument("results", nargs="+", type=Path, help="results folders of lab-report specs")
    args = p.parse_args()
    report = header()
    rows = []
    for where, es in sorted(by_environment(entries(args.results)).items()):
        for backend in sorted({e["backend"] for e in es}):
            for finding in (size_finding, fanout_finding, chain_finding):
                row = finding(es, backend)
                if row is not None:
                    rows.append({**row, "where": where, "agrees": "yes" if row["agrees"] else "no"})
    print(f"\nresults: {', '.join(str(r) for r in args.results)}")
    table(rows, ["finding", "backend", "where", "figure", "agrees"])
    report.update({"results": [str(r) for r in args.results], "findings": rows})
    if args.json:
        save(report, args.json)
        print(f"\njson: {args.json}")


if __name__ == "__main__":
    main()
