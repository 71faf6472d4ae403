# SPDX-License-Identifier: PostgreSQL
"""Helpers shared by the restart suite's Python checks (races.py, failover.py, stuck.py)."""
import os
import sys
import time

import psycopg2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checklib import Tally  # noqa: E402


def connect(**kw):
    """An autocommit connection; libpq's PG* environment fills what kw leaves out."""
    c = psycopg2.connect("", **kw)
    c.autocommit = True
    return c


def q(c, sql, args=()):
    with c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else None


def worker_pid(c):
    """The lock manager's pid, or None while none runs."""
    r = q(c, "SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock lock manager'")
    return r[0][0] if r else None


def until(pred, timeout=30, step=0.01):
    """Poll pred until it is true (True) or timeout seconds pass (False)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return False


def report(suite, checks):
    """Print an ok/FAIL line per (what, ok, detail) and the suite's summary;
    return the exit status (a suite that checked nothing failed)."""
    tally = Tally()
    for what, ok, detail in checks:
        tally.check(what, ok, detail)
    print(tally.summary(suite))
    return 0 if tally.failed == 0 and checks else 1
