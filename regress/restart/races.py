#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""Races between a request's answer and its withdrawal, made deterministic by
stopping processes (SIGSTOP/SIGCONT) at the right moment.  Each once left a
lock granted to a session whose client had been told otherwise: the first
was found by the torture run (regress/torture: a session holding a lock
between its operations), the second while looking into it.

  withdrawals-one-batch: two waiters of one lock, an exclusive one queued
      before a shared one behind a shared holder, are cancelled while the
      worker is stopped, so that one batch withdraws both.  Withdrawing the
      exclusive one must not grant the shared one, whose backend gave up
      too (it was answered "cancelled" and kept the lock).  Run with both
      roles, since the worker takes the withdrawals in slot order.
  undo-acquire-all: a dlock_acquire_all granted, then cancelled before its
      backend saw the grant, while the worker restarts: the backend must
      release every name again, not only the last (each release
      overwrote the one before in the slot while no worker took them).

Usage: races.py   (connection from PG* variables; needs to signal the
server's processes, so run it as root or postgres on the server's host)
Prints "ok"/"FAIL" lines and "races: N passed, M failed".
"""
import os
import signal
import sys
import threading
import time

import psycopg2

import pgcheck
from pgcheck import connect, q, report, worker_pid


def until(obs, sql, args=(), timeout=15):
    """Poll obs until sql's one value is true."""
    return pgcheck.until(lambda: q(obs, sql, args)[0][0], timeout)


def wait_worker(obs):
    return until(obs, "SELECT count(*) > 0 FROM pg_stat_activity"
                      " WHERE backend_type = 'dlock lock manager'")


class Bg:
    """A statement run in another thread on its own connection."""

    def __init__(self, conn, sql):
        self.result = None
        self.error = None
        self.t = threading.Thread(target=self.run, args=(conn, sql))
        self.t.start()

    def run(self, conn, sql):
        try:
            self.result = q(conn, sql)
        except psycopg2.Error as e:
            self.error = e.pgcode

    def join(self):
        self.t.join(30)
        return self.error or self.result


def held_by(obs, pid):
    return [r[0] for r in q(obs, "SELECT name || ' ' || mode FROM dlock.locks"
                                 " WHERE pid = %s AND NOT implied ORDER BY 1", (pid,))]


def withdrawals_round(obs, h, ex, sh):
    """ex waits exclusive, sh shared behind it; both withdrawn in one batch."""
    pex = q(ex, "SELECT pg_backend_pid()")[0][0]
    psh = q(sh, "SELECT pg_backend_pid()")[0][0]
    q(h, "SELECT dlock_acquire('rw', 'shared')")
    r1 = Bg(ex, "SELECT dlock_acquire('rw', 'exclusive')")
    until(obs, "SELECT count(*) = 1 FROM dlock.locks WHERE pid = %s AND NOT granted", (pex,))
    r2 = Bg(sh, "SELECT dlock_acquire('rw', 'shared')")
    until(obs, "SELECT count(*) = 1 FROM dlock.locks WHERE pid = %s AND NOT granted", (psh,))
    w = worker_pid(obs)
    os.kill(w, signal.SIGSTOP)
    try:
        q(obs, "SELECT pg_cancel_backend(%s), pg_cancel_backend(%s)", (pex, psh))
        time.sleep(0.5)              # both backends have asked to withdraw
    finally:
        os.kill(w, signal.SIGCONT)
    got = (r1.join(), r2.join())
    # A cancelled call returns at once; its queue row goes with the worker's
    # next batch, which on a busy machine may come a little later.  Wait
    # for that, so that what is left is only what a withdrawal granted.
    until(obs, "SELECT count(*) = 0 FROM dlock.locks"
               " WHERE pid IN (%s, %s) AND NOT granted", (pex, psh))
    left = held_by(obs, pex) + held_by(obs, psh)
    q(h, "SELECT dlock_release_all()")
    q(ex, "SELECT dlock_release_all()")
    q(sh, "SELECT dlock_release_all()")
    return got == ("57014", "57014") and left == [], "answers %s, still held: %s" % (got, left)


def withdrawals_one_batch(obs):
    """The worker takes withdrawals in slot order: with one pair of sessions
    in both roles, one round has the exclusive waiter's withdrawal first."""
    h, a, b = connect(), connect(), connect()
    results = [withdrawals_round(obs, h, a, b), withdrawals_round(obs, h, b, a)]
    for c in (h, a, b):
        c.close()
    bad = [d for ok, d in results if not ok]
    return not bad, "; ".join(bad)


def undo_acquire_all(obs):
    h, b = connect(), connect()
    pb = q(b, "SELECT pg_backend_pid()")[0][0]
    q(h, "SELECT dlock_acquire('ua1')")
    r = Bg(b, "SELECT dlock_acquire_all(ARRAY['ua1', 'ua2', 'ua3'])")
    until(obs, "SELECT count(*) > 0 FROM dlock.locks WHERE pid = %s AND NOT granted", (pb,))
    os.kill(pb, signal.SIGSTOP)
    try:
        q(h, "SELECT dlock_release('ua1')")      # b's request is granted, b does not see it
        until(obs, "SELECT count(*) = 3 FROM dlock.locks WHERE pid = %s AND granted", (pb,))
        w = worker_pid(obs)
        q(obs, "SELECT pg_terminate_backend(%s)", (w,))
        until(obs, "SELECT count(*) = 0 FROM pg_stat_activity"
                   " WHERE backend_type = 'dlock lock manager'")
        q(obs, "SELECT pg_cancel_backend(%s)", (pb,))
    finally:
        os.kill(pb, signal.SIGCONT)              # b undoes its grant: no worker runs
    got = r.join()
    wait_worker(obs)
    until(obs, "SELECT count(*) = 0 FROM dlock.locks WHERE pid = %s", (pb,), timeout=5)
    left = held_by(obs, pb)
    q(h, "SELECT dlock_release_all()")
    for c in (h, b):
        c.close()
    return got == "57014" and left == [], "answer %s, still held: %s" % (got, left)


def main():
    obs = connect()
    tests = [
        ("two withdrawals in one batch: the first grants nothing to the second",
         lambda: withdrawals_one_batch(obs)),
        ("undo of a dlock_acquire_all grant while the worker restarts",
         lambda: undo_acquire_all(obs)),
    ]
    checks = []
    for name, f in tests:
        wait_worker(obs)
        checks.append((name,) + tuple(f()))
    return report("races", checks)


if __name__ == "__main__":
    sys.exit(main())
