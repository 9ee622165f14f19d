"""Link profiles: bandwidth, delay, jitter, loss and queue length of an emulated link.

A profile describes the path between two emulated hosts, per direction: each packet
is delayed by `delay_ms` ± `jitter_ms` (uniform, like netem's default), lost with
probability `loss`, and each host's link carries at most `bandwidth_mbit` with a
queue of `queue_packets`. Profiles without delay, jitter and loss run on kernel
veths with tbf (fast enough for gigabit); the others run through the userspace
link emulator (`linkemu.py`), because this kernel has no netem.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from roboscale.errors import SpecError, SpecErrors, UserError
from roboscale.yamlfile import LineMap, load_yaml

# Python forwards about this much through the userspace emulator on 2 shared
# cores with headroom (measured in docs/hosts.md); faster links with delay or
# loss would measure the emulator, not the profile.
USERSPACE_MAX_MBIT = 100.0
MTU = 1500


@dataclass(frozen=True)
class LinkProfile:
    name: str
    bandwidth_mbit: float
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    loss: float = 0.0
    queue_packets: int = 1000
    reorder: bool = False
    # One channel for all hosts in both directions, as a Wi-Fi cell is: stations take
    # turns on the air, so a round trip spends the bandwidth twice.
    shared_medium: bool = False

    @property
    def needs_emulator(self) -> bool:
        """Delay, jitter and a shared medium need the userspace emulator (no netem here);
        loss alone is done by iptables' statistic match on kernel veths."""
        return self.delay_ms > 0 or self.jitter_ms > 0 or self.shared_medium

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


BUILTIN: dict[str, LinkProfile] = {
    # Gigabit Ethernet: the thesis's wired setup; no added delay (veth is sub-ms).
    "ethernet": LinkProfile("ethernet", bandwidth_mbit=1000.0, queue_packets=1000),
    # 802.11n at 2.4 GHz: the thesis (seed 000, section 3.1.4) expects "an average
    # data throughput of 25 Mbps" for the Raspberry Pi 3's Wi-Fi (citing Cisco).
    # The thesis gives no delay, jitter or loss; these are typical of a lightly
    # loaded home 802.11n cell: a few ms one way, ±1 ms, 0.5 % residual loss
    # after link-layer retries. The cell is one shared half-duplex channel.
    "wifi": LinkProfile(
        "wifi",
        bandwidth_mbit=25.0,
        delay_ms=2.0,
        jitter_ms=1.0,
        loss=0.005,
        queue_packets=100,
        shared_medium=True,
    ),
}

FIELDS: dict[str, str] = {
    "bandwidth_mbit": "a bandwidth in Mbit/s above 0 and at most 100000",
    "delay_ms": "a one-way delay in ms from 0 to 10000",
    "jitter_ms": "a jitter in ms from 0 to the delay (uniform delay ± jitter)",
    "loss": "a loss probability per packet from 0 to below 1 (0.01 = 1 %)",
    "queue_packets": "a queue length in packets from 1 to 100000",
    "reorder": "true or false (true: jitter may reorder packets, as netem does)",
    "shared_medium": "true or false (true: all hosts share one channel both ways, as Wi-Fi)",
    "base": f"a built-in profile to start from: {', '.join(BUILTIN)}",
}
RANGES: dict[str, tuple[float, float]] = {
    "bandwidth_mbit": (0.0, 100_000.0),
    "delay_ms": (0.0, 10_000.0),
    "jitter_ms": (0.0, 10_000.0),
    "loss": (0.0, 1.0),
    "queue_packets": (1.0, 100_000.0),
}


def _check_number(field: str, value: Any) -> str | None:
    """The problem with a numeric field's value, or None."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number, got {value!r}; allowed: {FIELDS[field]}"
    low, high = RANGES[field]
    if field == "queue_packets" and not float(value).is_integer():
        return f"must be a whole number, got {value!r}; allowed: {FIELDS[field]}"
    bad_low = value <= low if field == "bandwidth_mbit" else value < low
    bad_high = value >= high if field == "loss" else value > high
    if bad_low or bad_high or math.isnan(value):
        return f"{value!r} is out of range; allowed: {FIELDS[field]}"
    return None


def profile_from_mapping(
    name: str, data: Any, file: str, lines: LineMap, where: tuple[str | int, ...] = ()
) -> LinkProfile:
    """Validate one profile mapping; every problem names file, line and field."""
    errors: list[SpecError] = []
    dotted = ".".join(str(p) for p in where)

    def fail(field: str, problem: str) -> None:
        full = f"{dotted}.{field}" if dotted else field
        line = lines.get((*where, field), lines.get(where))
        errors.append(SpecError(file, line, full, problem))

    if not isinstance(data, dict):
        raise SpecError(file, lines.get(where), dotted or name, "a profile must be a mapping")
    base_name = data.get("base", "ethernet")
    if base_name not in BUILTIN:
        fail("base", f"unknown profile {base_name!r}; allowed: {FIELDS['base']}")
        base_name = "ethernet"
    values = BUILTIN[base_name].as_dict() | {"name": name}
    for key, value in data.items():
        if key == "base":
            continue
        if key not in FIELDS:
            close = difflib.get_close_matches(str(key), list(FIELDS), n=1)
            guess = f"; did you mean '{close[0]}'?" if close else ""
            fail(str(key), f"unknown field{guess} allowed fields here: {', '.join(FIELDS)}")
        elif key in ("reorder", "shared_medium"):
            if not isinstance(value, bool):
                fail(key, f"must be true or false, got {value!r}")
            values[key] = value
        elif (problem := _check_number(key, value)) is not None:
            fail(key, problem)
        else:
            values[key] = int(value) if key == "queue_packets" else float(value)
    if not errors and values["jitter_ms"] > values["delay_ms"]:
        fail(
            "jitter_ms", f"{values['jitter_ms']!r} exceeds delay_ms; allowed: {FIELDS['jitter_ms']}"
        )
    if not errors and values["bandwidth_mbit"] > USERSPACE_MAX_MBIT:
        profile = LinkProfile(**values)
        if profile.needs_emulator:
            fail(
                "bandwidth_mbit",
                f"{profile.bandwidth_mbit:g} Mbit/s with delay or jitter is above what the "
                f"userspace link emulator forwards faithfully; allowed with delay or jitter: "
                f"at most {USERSPACE_MAX_MBIT:g}",
            )
    if errors:
        raise SpecErrors(errors) if len(errors) > 1 else errors[0]
    return LinkProfile(**values)


def load_profiles(path: Path) -> dict[str, LinkProfile]:
    """Load `profiles: {name: {field: value}}` from YAML; built-ins stay available."""
    data, lines = load_yaml(path, "link profiles file")
    file = str(path)
    if not isinstance(data, dict) or not isinstance(data.get("profiles"), dict):
        raise SpecError(file, 1, "profiles", "expected a mapping 'profiles: {name: {fields}}'")
    for key in data:
        if key != "profiles":
            raise SpecError(file, lines.get((key,)), str(key), "unknown field; allowed: profiles")
    out = dict(BUILTIN)
    problems: list[SpecError] = []
    for name, fields in data["profiles"].items():
        try:
            out[str(name)] = profile_from_mapping(
                str(name), fields, file, lines, ("profiles", name)
            )
        except SpecErrors as e:
            problems.extend(e.errors)
        except SpecError as e:
            problems.append(e)
    if problems:
        raise SpecErrors(problems) if len(problems) > 1 else problems[0]
    return out


def resolve(name: str, profiles: dict[str, LinkProfile] | None = None) -> LinkProfile:
    known = profiles if profiles is not None else BUILTIN
    if name not in known:
        close = difflib.get_close_matches(name, list(known), n=1)
        guess = f"; did you mean '{close[0]}'?" if close else ""
        raise UserError(f"unknown link profile {name!r}{guess} known: {', '.join(known)}")
    return known[name]


def tbf_args(profile: LinkProfile) -> list[str]:
    """tc arguments that shape a veth to the profile's bandwidth and queue."""
    rate_bps = profile.bandwidth_mbit * 1e6
    # burst must hold a full GSO segment (64 KB) or tbf re-segments every packet;
    # limit is the queue in bytes behind the bucket.
    burst = max(64 * 1024, int(rate_bps / 8 / 1000))
    limit = profile.queue_packets * (MTU + 14) + burst
    return ["tbf", "rate", f"{int(rate_bps)}bit", "burst", str(burst), "limit", str(limit)]


def loss_rule(subnet: str, loss: float) -> list[str]:
    """iptables rule that drops packets arriving from the subnet with probability loss.

    It drops on INPUT of the receiving host: a DROP on OUTPUT would make the
    sender's sendto() fail with EPERM, which no real link does."""
    return [
        "iptables", "-w", "-A", "INPUT", "-s", subnet, "-m", "statistic",
        "--mode", "random", "--probability", f"{loss:.6f}", "-j", "DROP",
    ]  # fmt: skip
