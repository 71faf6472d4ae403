# SPDX-License-Identifier: PostgreSQL
"""Entering a network namespace made by scripts/netns.sh (ip netns) from
Python: the Patroni and the MariaDB HA tests (regress/ha, regress/mysql-ha,
regress/torture)."""
import ctypes
import os

_libc = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNET = 0x40000000


class netns:
    """Run the block in network namespace `name` (this thread only)."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
        fd = os.open("/var/run/netns/" + self.name, os.O_RDONLY)
        try:
            if _libc.setns(fd, _CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns into " + self.name)
        finally:
            os.close(fd)
        return self

    def __exit__(self, *exc):
        _libc.setns(self.home, _CLONE_NEWNET)
        os.close(self.home)
