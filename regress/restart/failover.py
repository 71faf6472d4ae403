#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""A grant is acknowledged only once a synchronous standby has it.

A primary with a synchronous standby (synchronous_commit = remote_apply):
its walsender is stopped (SIGSTOP), so the lock manager's commit of an
owner-keyed grant waits for the standby; then the primary's postmaster is
killed (kill -9).  PostgreSQL then gives up waiting for the standby and
finishes the commit locally; the lock manager must not answer the waiting
backend then, since the promoted standby never got that grant.  The
waiting backend is held (SIGSTOP) meanwhile, as a busy machine may hold it,
so that it looks at its answer before it notices the postmaster's death.
Found while looking into an acknowledged lease the torture run's HA mode
missed after a failover.

Usage: failover.py DIR PORT_PRIMARY PORT_STANDBY  (clusters under DIR;
scripts/pg_cluster.sh starts and stops them; run as root)
Prints "ok"/"FAIL" lines and "failover: N passed, M failed".
"""
import os
import signal
import subprocess
import sys
import threading
import time

import psycopg2

import pgcheck
from pgcheck import q, until, report

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "..", "..", "scripts", "pg_cluster.sh")


def cluster(*args, env=None):
    subprocess.run([CLUSTER] + [str(a) for a in args], check=True,
                   env=dict(os.environ, **(env or {})), stdout=subprocess.DEVNULL)


def connect(d, port):
    return pgcheck.connect(host=d, port=port, user="postgres", dbname="postgres")


def alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Precondition(Exception):
    pass


def need(ok, why):
    """A setup step the checks depend on; without it they would prove nothing."""
    if not ok:
        raise Precondition(why)


def main():
    base, pport, sport = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    a, b = os.path.join(base, "fo-a"), os.path.join(base, "fo-b")
    checks = []
    stopped = []
    try:
        cluster("start", a, pport, env={"PG_FSYNC": "on",
                                         "PG_EXTRA_CONF": "synchronous_commit = remote_apply"})
        cluster("standby", b, sport, a, pport,
                env={"PG_FSYNC": "on", "PG_EXTRA_CONF": "synchronous_standby_names = ''"})
        pa = connect(a, pport)
        q(pa, "ALTER SYSTEM SET synchronous_standby_names = '*'")
        q(pa, "SELECT pg_reload_conf()")
        need(until(lambda: q(pa, "SELECT count(*) = 1 FROM pg_stat_replication"
                                 " WHERE sync_state = 'sync'")[0][0]),
             "the standby never became synchronous")
        q(pa, "SELECT dlock_acquire('fo-warm')")   # the worker is up, tickets reserved
        q(pa, "SELECT dlock_release('fo-warm')")
        # a terminate of the lock manager while its commit waits for the
        # standby (its walsender stopped), then the standby catches up: the
        # answer is given once.  The successor must not decide the request
        # again (the torture run saw a grant taken twice, a level more than
        # the client knew of, and a release answered false).
        for what, sql, want in (
                ("an acquire", "SELECT dlock_acquire('fo-once', ttl => '10 min',"
                               " owner => 'fo-o', timeout => '60 s') > 0", True),
                ("a release", "SELECT dlock_release('fo-once', owner => 'fo-o')", True)):
            walsender = q(pa, "SELECT pid FROM pg_stat_replication")[0][0]
            os.kill(walsender, signal.SIGSTOP)
            stopped.append(walsender)
            cc = connect(a, pport)
            got = {}
            call = threading.Thread(target=lambda: got.update(r=q(cc, sql)[0][0]))
            call.start()
            need(until(lambda: q(pa, "SELECT count(*) = 1 FROM pg_stat_activity"
                                     " WHERE backend_type = 'dlock lock manager'"
                                     " AND wait_event = 'SyncRep'")[0][0], timeout=60),
                 "the worker never waited for the standby (%s)" % what)
            old_worker = q(pa, "SELECT pid FROM pg_stat_activity"
                               " WHERE backend_type = 'dlock lock manager'")[0][0]
            q(pa, "SELECT pg_terminate_backend(%s)", (old_worker,))
            need(until(lambda: q(pa, "SELECT count(*) = 1 FROM pg_stat_activity"
                                     " WHERE backend_type = 'dlock lock manager'"
                                     " AND pid <> %s", (old_worker,))[0][0], timeout=60),
                 "no new lock manager")
            time.sleep(1)
            answered_early = not call.is_alive()
            os.kill(walsender, signal.SIGCONT)
            stopped.remove(walsender)
            call.join(30)
            count = q(pa, "SELECT coalesce(sum(count), 0) FROM dlock.held WHERE owner = 'fo-o'")[0][0]
            checks.append(("%s whose commit waited when the lock manager was terminated is"
                           " answered once the standby has it, and only once" % what,
                           not answered_early and got.get("r") is want and
                           count == (1 if what == "an acquire" else 0),
                           "answered early: %s, answer %r, levels held %s"
                           % (answered_early, got.get("r"), count)))
            cc.close()
        # a grant whose commit cannot reach the standby
        walsender = q(pa, "SELECT pid FROM pg_stat_replication")[0][0]
        os.kill(walsender, signal.SIGSTOP)
        stopped.append(walsender)
        result = {}
        cb = connect(a, pport)
        waiting_pid = q(cb, "SELECT pg_backend_pid()")[0][0]

        def acquire():
            try:
                result["token"] = q(cb, "SELECT dlock_acquire('fo', ttl => '10 min',"
                                        " owner => 'fo-key')")[0][0]
            except psycopg2.Error as e:
                result["error"] = str(e).strip().splitlines()[0]
        t = threading.Thread(target=acquire)
        t.start()
        # without this the grant below was never waiting on the standby
        need(until(lambda: q(pa, "SELECT count(*) = 1 FROM pg_stat_activity"
                                 " WHERE backend_type = 'dlock lock manager'"
                                 " AND wait_event = 'SyncRep'")[0][0], timeout=60),
             "the worker never waited for the standby (SyncRep); answer: %s" % result)
        with open(os.path.join(a, "data", "postmaster.pid")) as f:
            pm = int(f.readline())
        # the waiting backend must not simply die before it looks at its
        # answer: hold it until the worker has done whatever it does
        worker = q(pa, "SELECT pid FROM pg_stat_activity"
                       " WHERE backend_type = 'dlock lock manager'")[0][0]
        os.kill(waiting_pid, signal.SIGSTOP)
        stopped.append(waiting_pid)
        os.kill(pm, signal.SIGKILL)
        need(until(lambda: not alive(worker), timeout=60),
             "the worker outlived its postmaster")
        os.kill(waiting_pid, signal.SIGCONT)
        stopped.remove(waiting_pid)
        t.join(30)
        os.kill(walsender, signal.SIGKILL)
        stopped.remove(walsender)
        need(until(lambda: not alive(pm), timeout=60), "the postmaster did not die")
        cluster("promote", b)
        pb = connect(b, sport)
        need(until(lambda: q(pb, "SELECT count(*) = 1 FROM pg_stat_activity"
                                 " WHERE backend_type = 'dlock lock manager'")[0][0],
                   timeout=60), "no lock manager on the promoted standby")
        held = q(pb, "SELECT token FROM dlock.held WHERE owner = 'fo-key'")
        tok = result.get("token")
        # the grant's commit never reached the standby (its walsender was
        # stopped first), so an acknowledged token would be a lost grant
        checks.append(("the grant that never reached the standby was not acknowledged,"
                       " and the promoted standby does not hold it",
                       tok is None and held == [],
                       "acknowledged token %s, held on the standby: %s (%s)"
                       % (tok, held, result.get("error"))))
        checks.append(("the waiting call ended (with an error) when the primary died",
                       "error" in result or tok is not None, str(result)))
        pb.close()
    except Precondition as e:
        checks.append(("precondition", False, str(e)))
    finally:
        for p in stopped:
            os.kill(p, signal.SIGKILL)      # never leave a stopped process behind
        for d in (a, b):
            subprocess.run([CLUSTER, "stop", d], stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    return report("failover", checks)


if __name__ == "__main__":
    sys.exit(main())
