"""An Erlang port program: the Python side of one face_server or of the aggregator_server.

    python -P -m roboscale.facetrack.stacks.port_program detector INDEX CONFIG_JSON
    python -P -m roboscale.facetrack.stacks.port_program aggregator 0 CONFIG_JSON

As ErlPort runs one Python interpreter per Erlang process, `python_server.erl` opens one
of these per face_server with `open_port({spawn_executable, Python}, [{packet, 4}, binary,
exit_status])` (`-P` keeps its working directory off the import path). Every message on
stdin and stdout is framed as `{packet, 4}`. It answers `Y` once its role is loaded, then
per input `O` + output: a detector's result (`wire`), or for the aggregator `O` + `R` +
the command and `O` + `D` + the handled entry; `X` for an input it could not decode
(counted and dropped by Erlang). It exits at end of input, which comes when its Erlang
process ends, however it ends, and is killed with the VM's port helper
(PR_SET_PDEATHSIG) should the VM die first.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from roboscale.facetrack import wire
from roboscale.facetrack.config import TrackerConfig
from roboscale.facetrack.stacks.link import read_packet, write_packet

PR_SET_PDEATHSIG = 1
Handler = Callable[[bytes], list[bytes] | None]


def die_with_parent() -> None:
    """SIGKILL when the parent (Erlang's erl_child_setup, or a rospy node's roslaunch) ends."""
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # it ended before the call
        os._exit(1)


def detector(index: int, cfg: TrackerConfig) -> Handler:
    from roboscale.facetrack.pipeline import WorkerRole

    role = WorkerRole(index)

    def handle(data: bytes) -> list[bytes] | None:
        result = role.handle(data)
        return None if result is None else [result]

    return handle


def aggregator(cfg: TrackerConfig) -> Handler:
    from roboscale.facetrack.pipeline import TrackerRole

    role = TrackerRole(cfg)

    def handle(data: bytes) -> list[bytes] | None:
        malformed = role.malformed
        command = role.handle(data)
        if command is None:  # malformed, or a second result for a frame: dropped
            return None if role.malformed > malformed else []
        return [b"R" + command, b"D" + wire.encode_handled(role.handled[-1])]

    return handle


def main(argv: list[str]) -> int:
    if len(argv) != 3 or argv[0] not in ("detector", "aggregator"):
        print("usage: port_program detector|aggregator INDEX CONFIG_JSON", file=sys.stderr)
        return 2
    out = os.dup(1)  # the framed channel; stray prints of libraries go to stderr instead
    os.dup2(2, 1)
    die_with_parent()
    cfg = TrackerConfig.from_json(Path(argv[2]).read_text())
    handle = detector(int(argv[1]), cfg) if argv[0] == "detector" else aggregator(cfg)
    write_packet(out, b"Y")
    while (message := read_packet(0)) is not None:
        outputs = handle(message)
        for output in [b"X"] if outputs is None else outputs:
            write_packet(out, output if output == b"X" else b"O" + output)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # Erlang closed the port while we answered
        sys.exit(0)
