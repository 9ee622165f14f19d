#!/usr/bin/python3
"""rospy nodes of the ROS 1 restart baselines (Debian's system Python, run by roslaunch).

    ros_nodes.py worker                 latches "<pid> <t_ns>" on /ready as soon as it starts
    ros_nodes.py observer               prints "<pid> <t_pub_ns> <t_recv_ns>" per /ready message
    ros_nodes.py pub LOG STOP MAX_S     publishes seq 0, 1, ... on /seq at 1 kHz until STOP exists
    ros_nodes.py sub LOG                appends "<pid> <seq>" to LOG for every message received
    ros_nodes.py dsub LOG CURSOR        the same on /seq_durable, behind roboscale's durable
                                        relay, committing each to CURSOR (roscursor.py)

Times are CLOCK_MONOTONIC nanoseconds, shared by every process of the machine.
Logs are written with one unbuffered O_APPEND write per line, so a SIGKILLed
node loses nothing it had already received.
"""

import os
import sys
import time

import rospy
from std_msgs.msg import String, UInt64

RATE_HZ = 1000


def worker():
    rospy.init_node("worker", disable_rosout=True)
    pub = rospy.Publisher("/ready", String, queue_size=1, latch=True)
    pub.publish(String(f"{os.getpid()} {time.monotonic_ns()}"))
    rospy.spin()


def observer():
    rospy.init_node("observer", disable_rosout=True)

    def on_ready(msg):
        sys.stdout.write(f"{msg.data} {time.monotonic_ns()}\n")
        sys.stdout.flush()

    rospy.Subscriber("/ready", String, on_ready, tcp_nodelay=True)
    print("OBSERVING", flush=True)
    rospy.spin()


def pub(log, stop, max_s):
    rospy.init_node("seq_pub", disable_rosout=True)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    publisher = rospy.Publisher("/seq", UInt64, queue_size=1000)
    rate = rospy.Rate(RATE_HZ)
    deadline = time.monotonic() + float(max_s)
    seq = 0
    while not rospy.is_shutdown() and time.monotonic() < deadline:
        if seq % 100 == 0 and os.path.exists(stop):
            break
        publisher.publish(UInt64(seq))
        os.write(out, f"{seq}\n".encode())
        seq += 1
        rate.sleep()
    os.write(out, b"END\n")
    rospy.spin()  # stay up until roslaunch stops us, so late subscribers still drain


def sub(log):
    rospy.init_node("seq_sub", disable_rosout=True)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    pid = os.getpid()
    os.write(out, f"{pid} START\n".encode())

    def on_seq(msg):
        os.write(out, f"{pid} {msg.data}\n".encode())

    rospy.Subscriber("/seq", UInt64, on_seq, tcp_nodelay=True)
    rospy.spin()


def dsub(log, cursor_path):
    from roscursor import Cursor  # beside this script (runtime/roscursor.py)

    rospy.init_node("seq_sub", disable_rosout=True)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    cursor = Cursor(cursor_path)
    pid = os.getpid()
    os.write(out, f"{pid} START\n".encode())

    def on_seq(msg):
        os.write(out, f"{pid} {msg.data}\n".encode())  # the work, then the commit
        cursor.handled(msg)

    rospy.Subscriber("/seq_durable", UInt64, on_seq, tcp_nodelay=True)
    rospy.spin()


if __name__ == "__main__":
    args = rospy.myargv(sys.argv)[1:]
    {"worker": worker, "observer": observer, "pub": pub, "sub": sub, "dsub": dsub}[args[0]](
        *args[1:]
    )
