# SPDX-License-Identifier: PostgreSQL
"""Helpers shared by the restart suite's Python checks (races.py, failover.py, stuck.py)."""
import time

import psycopg2


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
    passed = failed = 0
    for what, ok, detail in checks:
        print("%s %s%s" % ("ok  " if ok else "FAIL", what, "" if ok else ": " + detail))
        passed += ok
        failed += not ok
    print("%s: %d passed, %d failed" % (suite, passed, failed))
    return 0 if failed == 0 and checks else 1
