#!/usr/bin/python3
"""Publishes a counter on `chatter` at ~rate Hz. With ~hang_after_s > 0 it stops publishing
after that long but stays alive and registered (a hung node), unless ~hang_flag exists."""

import os
import time

import rospy
from std_msgs.msg import UInt64

rospy.init_node("talker", disable_signals=True)
pub = rospy.Publisher("chatter", UInt64, queue_size=100)
rate = rospy.Rate(float(rospy.get_param("~rate", 50)))
hang_after = float(rospy.get_param("~hang_after_s", 0))
flag = str(rospy.get_param("~hang_flag", ""))
start = time.monotonic()
count = int(rospy.get_param("~first", 0))
while not rospy.is_shutdown():
    if hang_after and time.monotonic() - start > hang_after and not os.path.exists(flag):
        time.sleep(0.1)
        continue
    pub.publish(UInt64(count))
    count += 1
    rate.sleep()
