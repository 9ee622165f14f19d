"""A trial's DDS domain: a domain id leased so concurrent runs never meet, and Cyclone's
configuration of it (one interface, multicast off, peers named).

Cyclone's default port mapping gives domain d the UDP ports 7400 + 250 d + [0, 250); a run
holds a lock file per domain it uses (flock: released when the holder dies, even by
SIGKILL) and skips a domain whose first discovery port another participant holds.
Stdlib only: the driver half of the dds backend (backends/dds.py) uses it.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path

from roboscale.errors import BackendUnavailable

# Cyclone's default port mapping: domain d uses UDP ports 7400 + 250 d + [0, 250).
PORT_BASE, DOMAIN_GAIN, PARTICIPANT_GAIN, DISCOVERY_OFFSET = 7400, 250, 2, 10
DOMAINS = range(1, 231)  # 0 is everyone's default; above 230 the ports leave 16 bits
MAX_PARTICIPANT_INDEX = 119  # 10 + 2 * 119 + 1 = 249: the domain's last port
RECEIVE_BUFFER = "4MB"


def cyclone_xml(domain: int, interface: str, peers: list[str], max_index: int) -> str:
    """Cyclone's configuration: one interface, no multicast, explicit unicast peers.

    `interface` is a name (`lo`) or an address; peers are probed on the ports of
    participant indexes 0..max_index.
    """
    attribute = "address" if interface[:1].isdigit() else "name"
    peer_list = "".join(f'<Peer address="{p}"/>' for p in peers)
    return (
        f'<CycloneDDS><Domain id="{domain}">'
        f'<General><Interfaces><NetworkInterface {attribute}="{interface}"/></Interfaces>'
        "<AllowMulticast>false</AllowMulticast></General>"
        "<Discovery><ParticipantIndex>auto</ParticipantIndex>"
        f"<MaxAutoParticipantIndex>{max_index}</MaxAutoParticipantIndex>"
        f"<Peers>{peer_list}</Peers></Discovery>"
        # Up to 4 MB of socket buffer (this kernel's rmem_max; "default" as the minimum,
        # so a smaller limit elsewhere is no error): a 300 KB sample is 230 fragments.
        f'<Internal><SocketReceiveBufferSize min="default" max="{RECEIVE_BUFFER}"/></Internal>'
        "</Domain></CycloneDDS>"
    )


def domain_ports(domain: int) -> range:
    base = PORT_BASE + DOMAIN_GAIN * domain
    return range(base, base + DOMAIN_GAIN)


@dataclass
class DomainLease:
    """A domain id held by this process until `release()` (or its death: flock)."""

    domain: int
    _fd: int

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _lock_dir() -> Path:
    """The domain locks of this user: one folder per machine (not per session), so that
    every run of this user sees every other; checked private (privdir)."""
    from roboscale.privdir import private_dir

    return private_dir(Path(tempfile.gettempdir()) / f"roboscale-dds-{os.getuid()}")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def lease_domain() -> DomainLease:
    """A domain id no other roboscale run holds and no participant on this machine uses.

    Runs hold a lock file per domain (flock: released when the holder dies, even by
    SIGKILL); a domain whose first discovery port is taken is used by someone else.
    """
    folder = _lock_dir()
    start = os.getpid() % len(DOMAINS)
    for step in range(len(DOMAINS)):
        domain = DOMAINS[(start + step) % len(DOMAINS)]
        fd = os.open(folder / f"{domain}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            os.close(fd)
            if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                continue
            raise
        if _port_free(domain_ports(domain)[DISCOVERY_OFFSET]):
            return DomainLease(domain, fd)
        os.close(fd)
    raise BackendUnavailable(
        "no free DDS domain id: every domain in 1-230 is held by a run or in use",
        hint="wait for other runs to finish",
    )
