"""roboscale: measure, predict and harden the communication of robot software.

This package root stays free of third-party imports: node agents of the ros1
backend import it from Debian's system Python, which has rospy but none of the
lab's dependencies.
"""

__version__ = "0.1.0"
