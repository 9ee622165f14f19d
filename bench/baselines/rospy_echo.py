#!/usr/bin/python3
"""rospy ping-pong between two processes, the baseline of bench/scale.py (Debian's system Python).

    rospy_echo.py echo                    republishes every /ping message unchanged on /pong
    rospy_echo.py ping COUNT SIZE...      for each SIZE: waits for the echo path, sends WARMUP
                                          pings, then COUNT pings one after the other; prints one
                                          JSON line {"size": SIZE, "rtt_us": [...]} per size

Messages are std_msgs/String with an ASCII payload of SIZE bytes (the thesis's payload
type); subscribers ask for tcp_nodelay. The round trip is timed on the ping side with
time.perf_counter_ns, from just before publish() to the reply's callback. Every wait is
bounded; a missing reply ends the process with an error instead of hanging.
"""

import json
import sys
import threading
import time

import rospy
from std_msgs.msg import String

WARMUP = 20
MATCH_TIMEOUT_S = 30.0
REPLY_TIMEOUT_S = 5.0


def echo():
    rospy.init_node("echo", disable_rosout=True)
    pong = rospy.Publisher("/pong", String, queue_size=1000, tcp_nodelay=True)
    rospy.Subscriber("/ping", String, pong.publish, tcp_nodelay=True)
    print("ready", flush=True)
    rospy.spin()


class Pinger:
    def __init__(self):
        self.pub = rospy.Publisher("/ping", String, queue_size=1000, tcp_nodelay=True)
        self.got = threading.Event()
        rospy.Subscriber("/pong", String, self.on_pong, tcp_nodelay=True)

    def on_pong(self, _msg):
        self.got.set()

    def round_trip(self, msg, timeout_s=REPLY_TIMEOUT_S):
        self.got.clear()
        t0 = time.perf_counter_ns()
        self.pub.publish(msg)
        if not self.got.wait(timeout_s):
            return None
        return (time.perf_counter_ns() - t0) / 1000.0

    def match(self, msg):
        """Probe until one reply comes back: both connections are up."""
        deadline = time.monotonic() + MATCH_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.round_trip(msg, 0.1) is not None:
                time.sleep(0.2)  # replies to earlier probes arrive now, not during a sample
                self.got.clear()
                return
        sys.exit(f"rospy ping: no echo within {MATCH_TIMEOUT_S:g} s")


def ping(count, sizes):
    rospy.init_node("ping", disable_rosout=True)
    pinger = Pinger()
    for size in sizes:
        msg = String("x" * size)
        pinger.match(msg)
        samples = []
        for i in range(WARMUP + count):
            rtt = pinger.round_trip(msg)
            if rtt is None:
                sys.exit(f"rospy ping: no reply to ping {i} of {size} B within {REPLY_TIMEOUT_S} s")
            if i >= WARMUP:
                samples.append(rtt)
        print(json.dumps({"size": size, "rtt_us": samples}), flush=True)
    rospy.signal_shutdown("done")


if __name__ == "__main__":
    args = rospy.myargv(sys.argv)[1:]
    if args[:1] == ["echo"]:
        echo()
    elif args[:1] == ["ping"] and len(args) >= 3:
        ping(int(args[1]), [int(s) for s in args[2:]])
    else:
        sys.exit(__doc__)
