"""Test program: a remote node that only holds its liveliness token. argv: connect, node path."""

from __future__ import annotations

import sys
import time

import zenoh

from roboscale.runtime.bridge import BridgeConfig, session_config
from roboscale.runtime.liveliness import declare_alive

session = zenoh.open(session_config(BridgeConfig(connect=(sys.argv[1],))))
token = declare_alive(session, sys.argv[2])
print("ready", flush=True)
time.sleep(60.0)
