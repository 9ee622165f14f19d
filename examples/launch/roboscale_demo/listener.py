#!/usr/bin/python3
"""Subscribes to `chatter`; with ~log set, appends each counter it receives to that file."""

import rospy
from std_msgs.msg import UInt64

rospy.init_node("listener", disable_signals=True)
path = str(rospy.get_param("~log", ""))
out = open(path, "a", buffering=1) if path else None


def heard(msg: UInt64) -> None:
    if out is not None:
        out.write(f"{msg.data}\n")


rospy.Subscriber("chatter", UInt64, heard)
rospy.spin()
