#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""Torture run for dlock: many clients, random operations, random faults
(crashes and failover included), fencing-checked guarded resources, and
invariants after quiescence.

Clients.  CLIENTS threads and PROCS separate client processes (so that a
client can die with kill -9, not just its backend) loop over random
operations on hot, cold, lease and path names: blocking acquires with
timeouts, try-acquires, shared and exclusive, re-entrant acquires,
owner-keyed leases renewed, left to expire or outlived by a stalled holder,
multi-lock, up-conversions, hierarchical paths, some under a short
statement_timeout.  They reconnect after any lost connection and carry on,
across restarts and failovers.

Guarded resources, entered inside every grant:
  * torture_active: one row per client inside a lock, with its token; a
    conflicting row (same name, or a path above or below) whose token is
    still in dlock.held while ours is too is an exclusion violation;
  * torture_guard: the last exclusive token per name, written only upwards
    (UPDATE ... WHERE last_token < token; a path writes its whole subtree).
    A holder that cannot write while the writer of the larger token still
    holds is an exclusion violation, one whose larger token came from an
    earlier holder saw tokens go backwards; a lease holder whose lease is
    gone from dlock.held lost it legitimately (counted, not a violation).
Besides: every grant's certainly-held interval (from the answer to the
send of the release, of the last statement that succeeded on its session,
or to the earliest possible lease expiry) is recorded, and two conflicting
intervals that overlap are an exclusion violation; every fresh token must
exceed every token acknowledged for that name (and for any name: one
counter) before its request was sent; a session must hold and wait for
nothing between its operations; a renew must not say "not held" while the
lease must still run.

Faults.  Light ones every 0.2-0.6 s: pg_cancel_backend of a waiting
backend, pg_terminate_backend of a waiting or random client backend and of
the dlock worker, kill -9 of a client process while it holds and while it
waits (its backend must then let go within KILLED_CLIENT_LIMIT s).  Heavy
ones every HEAVY_EVERY s: SIGKILL of the dlock worker and of a client
backend (PostgreSQL restarts every backend), pg_ctl restart -m immediate;
with --ha instead kill -9 of the primary's postmaster and pg_ctl promote of
its synchronous standby (remote_apply); the old primary is rebuilt as the
new standby for the next failover.  After each heavy fault: every lease the
server held unexpired just before it is held again with its token and
renewal (dlock.restart_grace covers the downtime), no grant of a dead
session is left, and the failover time (kill to the first grant on a
connection made after it) is measured.

Invariants after quiescence: no queue rows, no session-owned grants and
none to dead sessions, no lease past its expiry plus one reap interval,
every lease gone, every name free in the lock manager's picture, the ticket
counter above every acknowledged token, no crash the harness did not cause
in the server logs; every blocking call ended with a grant, a timeout NULL
or an error within its timeout + reap interval + SLACK, plus the outage when
a restart fell inside the call, plus any measured stall of the machine.

Usage: torture.py --dir DIR --port PORT [--seconds S] [--clients N]
                  [--procs P] [--heavy-every S] [--seed N]
                  [--ha --dir2 DIR2 --port2 PORT2 --failovers K]
       torture.py --self-test   (the checks catch what they should)
The cluster in DIR must be running (run.sh starts it; with --ha this
script builds the standby in DIR2).  Prints a table and
"torture: N passed, M failed" (or "torture-ha: ...").
"""
import argparse
import collections
import contextlib
import datetime
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "..", "..", "scripts", "pg_cluster.sh")
sys.path.insert(0, os.path.join(HERE, "..", "ha"))
sys.path.insert(0, os.path.join(HERE, ".."))
from checklib import Tally  # noqa: E402
from halib import NODES, Cluster, alive, children_of, netns  # noqa: E402

# --patroni: the namespaces of scripts/ha.sh's cluster and of the clients;
# a quarter of the clients live in the second, which a client partition cuts
PATRONI_PREFIX = "dltt-"
PATRONI_NS = ("c1", "c2")
PATRONI_PORT_BASE = int(os.environ.get("TORTURE_PATRONI_PORT_BASE", 6000))
# a cut link errors out within seconds instead of hanging a client
TCP_CUT = " tcp_user_timeout=4000 keepalives=1 keepalives_idle=2 keepalives_interval=1 keepalives_count=2"
ISOLATION = "failover: the leader cut from its peers and etcd, clients still reach it"
CUT_WAIT = "isolations whose demotion ended the lock manager while its commit waited"
PATRONI_FAULTS = ["failover: kill -9 of the leader's Patroni and PostgreSQL",
                  ISOLATION,
                  "kill -9 of an etcd member",
                  "client partition: a quarter of the clients cut from the leader"]
HOT = ["hot/%d" % i for i in range(3)]
COLD = ["cold/%d" % i for i in range(400)]
# long leases, mostly left to expire, so that many acknowledged leases are
# alive whenever a crash or failover strikes
LONG = ["lease/%d" % i for i in range(100)]
LONG_TTL = 8.0
# hierarchical names: a lock on /t/0/a also takes an intention on /t/0, so
# two of these conflict when one is the other or below it and either is
# exclusive (the same rule as for one flat name)
PATHS = ["/t/%d%s" % (i, s) for i in range(3) for s in ("", "/a", "/b", "/a/x", "/a/y")]
# the relation in SQL: $1 is a.name, its ancestor, or below it
SQL_RELATED = ("(a.name = %(n)s OR (left(%(n)s, 1) = '/' AND"
               " (starts_with(%(n)s, a.name || '/') OR starts_with(a.name, %(n)s || '/'))))")
PROBE = "torture/probe"
# counting semaphores and their capacities: never more permits held at once
SEMS = {"sem/0": 2, "sem/1": 3}
# a leader election: never two leaders (its grants are exclusive intervals)
ELECTION = "leader/0"

# Documented slack: how much longer than timeout + dlock.reap_interval a
# blocking call may take on a loaded 2-core machine (scheduling, GIL).
SLACK = 1.0
# A call that overlapped a restart may take the outage plus the 3 s a
# backend waits for a restarting worker (DLOCK_WORKER_GRACE_MS) longer.
WORKER_GRACE = 3.0
# kill -9 of a client process: its backend must hold and wait for nothing
# after this long (client_connection_check_interval + reap + slack).
KILLED_CLIENT_LIMIT = 2.0
# a try-acquire of the monitor slower than this is noted (diagnosis only)
SLOW_PROBE = 0.3
# a heartbeat of this process or a SELECT 1 to the server late by more than
# this is a stall of the machine; blocking calls meanwhile get that much more
STALL = 0.25
CONFLICTS = {("exclusive", "exclusive"), ("exclusive", "shared"), ("shared", "exclusive")}


def mono():
    return time.monotonic()


# ---------------------------------------------------------------------------
# Recording: counters, violations, intervals, tokens, leases
# ---------------------------------------------------------------------------

class Recorder:
    """Everything the clients observe, in the parent process."""

    def __init__(self):
        self.lock = threading.Lock()
        self.stats = {}
        self.faults = {}
        self.violations = {}          # category -> [text]
        self.intervals = []           # (name, exclusive, start, end)
        self.sem_intervals = []       # (name, permits, start, end, what)
        self.blocking = []            # (timeout, send, end, outcome)
        self.max_acked = {}           # name -> largest acknowledged token
        self.max_acked_all = 0
        self.leases = {}              # key -> Lease
        self.first_grant_after = None  # set once per heavy fault
        self.watch_from = None
        self.checks = {}              # invariant -> times checked

    def count(self, key, n=1):
        with self.lock:
            self.stats[key] = self.stats.get(key, 0) + n

    def fault(self, key):
        with self.lock:
            self.faults[key] = self.faults.get(key, 0) + 1

    def checked(self, what, n=1):
        with self.lock:
            self.checks[what] = self.checks.get(what, 0) + n

    def violation(self, category, text):
        with self.lock:
            self.violations.setdefault(category, []).append(text)

    def interval(self, name, exclusive, start, end, what=""):
        if end > start:
            with self.lock:
                self.intervals.append((name, exclusive, start, end, what))

    def blocking_call(self, timeout, send, end, outcome):
        with self.lock:
            self.blocking.append((timeout, send, end, outcome))

    def sem_interval(self, name, permits, start, end, what=""):
        if end > start:
            with self.lock:
                self.sem_intervals.append((name, permits, start, end, what))

    def floors(self, name):
        with self.lock:
            return self.max_acked.get(name, 0), self.max_acked_all

    def acked(self, name, token, floors, who, conn_at):
        """A fresh grant: its token must exceed what was acknowledged before."""
        now = mono()
        with self.lock:
            if floors is not None:
                if token <= floors[0]:
                    self.violations.setdefault("tokens backwards", []).append(
                        "%s: token %d for %s is not above %d, acknowledged before its request"
                        % (who, token, name, floors[0]))
                elif token <= floors[1]:
                    self.violations.setdefault("tokens backwards", []).append(
                        "%s: token %d for %s is not above %d (another name), acknowledged"
                        " before its request: the ticket counter went back"
                        % (who, token, name, floors[1]))
            if token > self.max_acked.get(name, 0):
                self.max_acked[name] = token
            if token > self.max_acked_all:
                self.max_acked_all = token
            # connections made after a failover's kill reach the new primary
            # only (the old one's backends may serve a moment longer)
            if self.watch_from is not None and self.first_grant_after is None \
                    and conn_at > self.watch_from:
                self.first_grant_after = now

    def lease_acked(self, key, name, token, e_lower):
        lease = Lease(key, name, token, e_lower)
        with self.lock:
            self.leases[key] = lease
        return lease

    def lease_gone(self, lease):
        with self.lock:
            self.leases.pop(lease.key, None)

    def lease_snapshot(self, now):
        """Acknowledged leases alive now whose release was never sent."""
        with self.lock:
            for k in [k for k, v in self.leases.items() if v.e_lower < now - 30]:
                del self.leases[k]
            return [v for v in self.leases.values()
                    if not v.release_sent and v.e_lower > now]

    def n_violations(self):
        with self.lock:
            return sum(len(v) for v in self.violations.values())


class Lease:
    def __init__(self, key, name, token, e_lower):
        self.key = key
        self.name = name
        self.token = token
        self.e_lower = e_lower        # monotonic: the lease runs at least until then
        self.renewed_to = None        # the expiry a renewal acknowledged (server time)
        self.release_sent = False


class LineRecorder:
    """A client process's recorder: one JSON line per event to the parent."""

    def __init__(self, out):
        self.out = out

    def _emit(self, *items):
        self.out.write(json.dumps(items) + "\n")
        self.out.flush()

    def count(self, key, n=1):
        self._emit("C", key, n)

    def checked(self, what, n=1):
        self._emit("K", what, n)

    def violation(self, category, text):
        self._emit("V", category, text)

    def interval(self, name, exclusive, start, end, what=""):
        if end > start:
            self._emit("I", name, exclusive, start, end, what)

    def blocking_call(self, timeout, send, end, outcome):
        self._emit("B", timeout, send, end, outcome)

    def floors(self, name):
        return None               # the parent's floors are not known here

    def acked(self, name, token, floors, who, conn_at):
        self._emit("A", name, token, conn_at)


def apply_line(rec, line):
    item = json.loads(line)
    kind = item[0]
    if kind == "C":
        rec.count(item[1], item[2])
    elif kind == "V":
        rec.violation(item[1], item[2])
    elif kind == "I":
        rec.interval(item[1], item[2], item[3], item[4], item[5])
    elif kind == "B":
        rec.blocking_call(item[1], item[2], item[3], item[4])
    elif kind == "A":
        rec.acked(item[1], item[2], None, "process", item[3])
    elif kind == "K":
        rec.checked(item[1], item[2])


# ---------------------------------------------------------------------------
# A client: one connection, the operations, the guarded resource
# ---------------------------------------------------------------------------

class Grant:
    """One grant a client holds, to record its certainly-held interval."""

    def __init__(self, name, mode, token, ack, lease=None, permits=0):
        self.name = name
        self.mode = mode
        self.token = token
        self.ack = ack
        self.lease = lease
        self.permits = permits    # a semaphore's grant: its permits
        self.release_sent = None  # a release that failed may still have released


class Client:
    def __init__(self, cid, rec, dsn, deadline, seed, kind="t", ns=None):
        self.cid = cid
        self.ns = ns              # the network namespace it connects from
        self.rec = rec
        self.dsn = dsn
        self.deadline = deadline
        self.rng = random.Random(seed)
        self.kind = kind
        self.who = "client %s%d" % (kind, cid)
        self.conn = None
        self.conn_at = 0.0
        self.op_name = None
        self.op_started = 0.0
        self.trace = collections.deque(maxlen=12)   # the last dlock calls, for a report
        self.last_ok_send = 0.0
        self.open = []            # grants held now

    # -- connection -------------------------------------------------------

    def connect(self):
        """Connect, retrying while the server restarts or fails over."""
        delay = 0.02
        while mono() < self.deadline:
            try:
                with netns(self.ns) if self.ns else contextlib.nullcontext():
                    self.conn = psycopg2.connect(self.dsn, application_name="torture-%s%d"
                                                 % (self.kind, self.cid), connect_timeout=3)
                self.conn.autocommit = True
                self.conn_at = mono()
                self.q("SET client_min_messages = error")
                return True
            except psycopg2.Error:
                self.conn = None
                self.rec.count("connect attempts refused")
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
        return False

    def q(self, sql, args=()):
        sent = mono()
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql, args)
                rows = cur.fetchall() if cur.description else None
        except psycopg2.Error as e:
            if "dlock_" in sql:
                self.trace.append("%.3f %s %r -> %s" % (sent, sql[7:40], args, e.pgcode))
            raise
        if "dlock_" in sql:
            self.trace.append("%.3f %s %r -> %r" % (sent, sql[7:40], args, rows))
        self.last_ok_send = sent
        return rows

    def timed(self, timeout, sql, args):
        """A blocking call: how it ended and how long it took is recorded."""
        sent = mono()
        try:
            r = self.q(sql, args)
        except psycopg2.Error as e:
            self.rec.blocking_call(timeout, sent, mono(), "error %s" % (e.pgcode or "connection"))
            raise
        self.rec.blocking_call(timeout, sent, mono(),
                               "timeout" if r[0][0] is None else "grant")
        return r[0][0], sent

    # -- grants -----------------------------------------------------------

    def granted(self, name, mode, token, floors, lease=None, permits=0):
        ack = mono()
        self.rec.acked(name, token, floors, self.who, self.conn_at)
        g = Grant(name, mode, token, ack, lease, permits)
        self.open.append(g)
        return g

    def finish(self, g, release_send=None):
        """The grant ends: record the interval it was certainly held."""
        if g.lease is not None:
            # a lease lasts until it runs out, or until a release that was sent
            # (also one that failed: the worker may have done it first)
            end = g.lease.e_lower if g.release_sent is None else min(g.lease.e_lower,
                                                                    g.release_sent)
        else:
            end = release_send if release_send is not None else self.last_ok_send
            # a release that failed (a timeout while the worker restarted,
            # say) is still carried out by the worker: from its send on the
            # name may be free, as for a lease above
            if release_send is None or release_send != g.release_sent:
                if g.release_sent is not None and g.release_sent < end:
                    end = g.release_sent
        what = "%s token %d %s, end: %s" % (
            self.who, g.token, "lease" if g.lease else "session",
            ("lease expiry" if end == g.lease.e_lower else "release sent") if g.lease is not None
            else "release" if release_send is not None else "last statement")
        if g.permits:
            self.rec.sem_interval(g.name, g.permits, g.ack, end, what)
        else:
            self.rec.interval(g.name, g.mode == "exclusive", g.ack, end, what)
        if g in self.open:
            self.open.remove(g)

    # -- the guarded resource ---------------------------------------------

    def enter(self, g):
        """Exclusion and fencing checks, then a short stay inside."""
        leased = g.lease is not None
        self.q("INSERT INTO torture_active VALUES (%s, %s, %s, %s)"
               " ON CONFLICT (client) DO UPDATE SET name = EXCLUDED.name,"
               " token = EXCLUDED.token, mode = EXCLUDED.mode",
               (self.cid, g.name, g.token, g.mode))
        conflicting = "true" if g.mode == "exclusive" else "a.mode = 'exclusive'"
        mine, other = self.q(
            "SELECT EXISTS (SELECT 1 FROM dlock.held WHERE token = %%(t)s),"
            " (SELECT a.client || ' (' || a.name || ', token ' || a.token || ', ' || a.mode || ')'"
            "    FROM torture_active a JOIN dlock.held h ON h.token = a.token"
            "   WHERE %s AND a.client <> %%(c)s AND (%s) LIMIT 1)" % (SQL_RELATED, conflicting),
            {"t": g.token, "n": g.name, "c": self.cid})[0]
        if not mine and not leased:
            self.rec.violation("exclusion", "%s: its session lock on %s (token %d) is gone from"
                               " dlock.held while the session lives" % (self.who, g.name, g.token))
        elif other is not None and mine:
            self.rec.violation("exclusion", "%s entered %s (token %d, %s) while client %s held it"
                               % (self.who, g.name, g.token, g.mode, other))
        elif not mine:
            self.rec.count("fencing: lease gone before entering (legitimate)")
        if g.mode == "exclusive":
            # the resource of a path is its subtree: every name at or below it
            below = "name = %(n)s OR (left(%(n)s, 1) = '/' AND starts_with(name, %(n)s || '/'))"
            n = self.q("UPDATE torture_guard SET last_token = %%(t)s WHERE (%s)"
                       " AND last_token < %%(t)s RETURNING 1" % below, {"t": g.token, "n": g.name})
            want = self.q("SELECT count(*) FROM torture_guard WHERE %s" % below, {"n": g.name})[0][0]
            if len(n) < want:
                mine, last, last_held = self.q(
                    "SELECT EXISTS (SELECT 1 FROM dlock.held WHERE token = %%(t)s), last_token,"
                    " EXISTS (SELECT 1 FROM dlock.held WHERE token = last_token)"
                    " FROM torture_guard WHERE (%s) AND last_token >= %%(t)s LIMIT 1" % below,
                    {"t": g.token, "n": g.name})[0]
                if leased and not mine:
                    self.rec.count("fencing: rejected, lease expired (legitimate)")
                elif last_held:
                    self.rec.violation("exclusion", "%s: token %d on %s was fenced out by %d, held"
                                       " at the same time (%s)" % (self.who, g.token, g.name, last,
                                                                   "lease" if leased else "session"))
                else:
                    self.rec.violation("tokens backwards", "%s: token %d on %s is below %d of an"
                                       " earlier holder; its last calls: %s"
                                       % (self.who, g.token, g.name, last, " | ".join(self.trace)))
        hold = self.rng.choice([0, 0, 0.001, 0.003] if self.kind == "t" else [0.01, 0.05, 0.1])
        if hold:
            time.sleep(hold)

    def leave(self):
        self.q("DELETE FROM torture_active WHERE client = %s", (self.cid,))

    def release(self, g):
        sent = g.release_sent = mono()
        if g.lease is not None:
            g.lease.release_sent = True
            ok = self.q("SELECT dlock_release(%s, owner => %s)", (g.name, g.lease.key))[0][0]
            self.finish(g, sent if ok else None)
            self.rec.lease_gone(g.lease)
            return ok
        ok = self.q("SELECT dlock_release(%s)", (g.name,))[0][0]
        if not ok:
            self.rec.violation("exclusion", "%s: release of held %s (token %d) answered false"
                               % (self.who, g.name, g.token))
        self.finish(g, sent if ok else None)
        return ok

    # -- operations ---------------------------------------------------------

    def pick(self):
        rng = self.rng
        name = rng.choice(HOT) if rng.random() < 0.7 else rng.choice(COLD)
        mode = "shared" if rng.random() < 0.25 else "exclusive"
        return name, mode

    def op_acquire(self):
        rng = self.rng
        name, mode = self.pick()
        timeout = rng.choice([0.05, 0.2, 1.0])
        floors = self.rec.floors(name)
        t, sent = self.timed(timeout, "SELECT dlock_acquire(%s, %s, timeout => %s)",
                             (name, mode, "%f s" % timeout))
        if t is None:
            self.rec.count("acquire timed out")
            return
        self.rec.count("acquire granted")
        g = self.granted(name, mode, t, floors)
        self.enter(g)
        if rng.random() < 0.2:  # re-entrant: the same token, counted
            t2 = self.q("SELECT dlock_acquire(%s, %s)", (name, mode))[0][0]
            if t2 != t:
                self.rec.violation("exclusion", "%s: re-entrant acquire of %s gave token %s, not %s"
                                   % (self.who, name, t2, t))
            if not self.q("SELECT dlock_release(%s)", (name,))[0][0]:
                self.rec.violation("exclusion", "%s: inner release of %s answered false"
                                   % (self.who, name))
            self.rec.count("re-entrant")
        self.leave()
        self.release(g)

    def op_try(self):
        name, mode = self.pick()
        floors = self.rec.floors(name)
        t = self.q("SELECT dlock_try_acquire(%s, %s)", (name, mode))[0][0]
        if t is None:
            self.rec.count("try refused")
            return
        self.rec.count("try granted")
        g = self.granted(name, mode, t, floors)
        self.enter(g)
        self.leave()
        self.release(g)

    def op_lease(self):
        rng = self.rng
        name, mode = self.pick()
        key = "c%s%d-%d" % (self.kind, self.cid, rng.randrange(1 << 30))
        ttl = rng.choice([0.3, 0.6, 2.0])
        long = rng.random() < 0.25
        if long:
            name, ttl = rng.choice(LONG), LONG_TTL
        floors = self.rec.floors(name)
        t, sent = self.timed(1.0, "SELECT dlock_acquire(%s, %s, timeout => '1 s', ttl => %s,"
                             " owner => %s)", (name, mode, "%f s" % ttl, key))
        if t is None:
            self.rec.count("lease timed out")
            return
        self.rec.count("lease granted")
        lease = self.rec.lease_acked(key, name, t, sent + ttl)
        g = self.granted(name, mode, t, floors, lease)
        if not long and rng.random() < 0.05:
            # a holder that stalls past its lease (a long GC pause): the lock
            # moves on, and the fence must keep this holder's writes out
            time.sleep(ttl + 0.3)
            self.rec.count("lease holder stalled past its expiry")
        self.enter(g)
        if rng.random() < 0.5:
            try:
                rsent = mono()
                lease.renewed_to = self.q("SELECT dlock_renew(%s, owner => %s)", (name, key))[0][0]
                lease.e_lower = max(lease.e_lower, rsent + ttl)
                self.rec.count("lease renewed")
            except psycopg2.Error as e:
                if e.pgcode != "DL001":
                    raise
                # a lease runs at least ttl from its request's send
                answered = mono()
                if lease.e_lower > answered:
                    self.rec.violation("acknowledged leases lost", "%s: renew of %s (token %d)"
                                       " says not held %.2f s before the lease can run out;"
                                       " its last calls: %s"
                                       % (self.who, name, t, lease.e_lower - answered,
                                          " | ".join(self.trace)))
                self.rec.count("renew of a lost lease (DL001)")
        self.leave()
        if rng.random() < (0.6 if long else 0.2):
            self.rec.count("lease left to expire")
            self.finish(g)
        else:
            self.release(g)

    def op_multi(self):
        rng = self.rng
        names = sorted(set(rng.sample(COLD, 3) + [rng.choice(HOT)]))
        floors = [self.rec.floors(n) for n in names]
        r, sent = self.timed(1.0, "SELECT dlock_acquire_all(%s, timeout => '1 s')", (names,))
        if r is None:
            self.rec.count("multi timed out")
            return
        self.rec.count("multi granted")
        grants = [self.granted(n, "exclusive", t, f) for n, t, f in zip(names, r, floors)]
        for g in grants:
            self.enter(g)
            self.leave()
        rsent = mono()
        self.q("SELECT dlock_release_all()")
        for g in grants:
            self.finish(g, rsent)

    def op_convert(self):
        """shared, then up to exclusive: a new, larger token, or NULL (still shared)."""
        rng = self.rng
        name = rng.choice(HOT)
        floors = self.rec.floors(name)
        t, sent = self.timed(1.0, "SELECT dlock_acquire(%s, 'shared', timeout => '1 s')", (name,))
        if t is None:
            self.rec.count("convert: shared acquire timed out")
            return
        g = self.granted(name, "shared", t, floors)
        self.enter(g)
        self.leave()
        floors = self.rec.floors(name)
        try:
            t2, csent = self.timed(0.5, "SELECT dlock_convert(%s, 'exclusive', timeout => '0.5 s')",
                                   (name,))
        except psycopg2.Error as e:
            if e.pgcode != "40P01":
                raise
            self.rec.count("convert: deadlock of two up-conversions (40P01)")
            self.release(g)
            return
        if t2 is None:
            self.rec.count("convert timed out (still shared)")
            self.release(g)
            return
        self.rec.count("convert granted")
        if t2 <= t:
            self.rec.violation("tokens backwards", "%s: up-conversion of %s gave token %d, not"
                               " above its shared token %d" % (self.who, name, t2, t))
        self.finish(g, csent)
        g2 = self.granted(name, "exclusive", t2, floors)
        self.enter(g2)
        self.leave()
        self.release(g2)

    def op_path(self):
        """A hierarchical name: intentions on its ancestors, guarded as a subtree."""
        rng = self.rng
        name = rng.choice(PATHS)
        mode = "shared" if rng.random() < 0.3 else "exclusive"
        timeout = rng.choice([0.2, 1.0])
        floors = self.rec.floors(name)
        t, sent = self.timed(timeout, "SELECT dlock_acquire(%s, %s, timeout => %s)",
                             (name, mode, "%f s" % timeout))
        if t is None:
            self.rec.count("path timed out")
            return
        self.rec.count("path granted")
        g = self.granted(name, mode, t, floors)
        self.enter(g)
        self.leave()
        self.release(g)

    def enter_sem(self, g, capacity):
        """A semaphore's guarded resource: at most capacity permits inside."""
        self.q("INSERT INTO torture_active VALUES (%s, %s, %s, 'permits')"
               " ON CONFLICT (client) DO UPDATE SET name = EXCLUDED.name,"
               " token = EXCLUDED.token, mode = EXCLUDED.mode", (self.cid, g.name, g.token))
        mine, inside = self.q(
            "SELECT EXISTS (SELECT 1 FROM dlock.held WHERE token = %(t)s),"
            " (SELECT coalesce(sum(h.permits), 0) FROM torture_active a"
            "   JOIN dlock.held h ON h.token = a.token WHERE a.name = %(n)s)",
            {"t": g.token, "n": g.name})[0]
        self.rec.checked("never more than capacity permits inside a semaphore")
        if mine and inside > capacity:
            self.rec.violation("exclusion", "%s entered %s with %d permits (token %d): %d permits"
                               " held inside, capacity %d" % (self.who, g.name, g.permits,
                                                             g.token, inside, capacity))
        elif not mine and g.lease is None:
            self.rec.violation("exclusion", "%s: its permits of %s (token %d) are gone from"
                               " dlock.held while the session lives" % (self.who, g.name, g.token))
        time.sleep(self.rng.choice([0, 0.001, 0.005]))

    def op_semaphore(self):
        """Permits of a counting semaphore: blocking or try, session or lease."""
        rng = self.rng
        name = rng.choice(sorted(SEMS))
        capacity = SEMS[name]
        permits = rng.randint(1, capacity)
        floors = self.rec.floors(name)
        lease = None
        if rng.random() < 0.3:
            t = self.q("SELECT dlock_try_semaphore(%s, %s, %s)", (name, capacity, permits))[0][0]
            if t is None:
                self.rec.count("semaphore try refused")
                return
        elif rng.random() < 0.5:
            key = "s%s%d-%d" % (self.kind, self.cid, rng.randrange(1 << 30))
            ttl = rng.choice([0.5, 2.0])
            t, sent = self.timed(1.0, "SELECT dlock_semaphore(%s, %s, %s, timeout => '1 s',"
                                 " ttl => %s, owner => %s)",
                                 (name, capacity, permits, "%f s" % ttl, key))
            if t is None:
                self.rec.count("semaphore timed out")
                return
            lease = self.rec.lease_acked(key, name, t, sent + ttl)
        else:
            t, sent = self.timed(1.0, "SELECT dlock_semaphore(%s, %s, %s, timeout => '1 s')",
                                 (name, capacity, permits))
            if t is None:
                self.rec.count("semaphore timed out")
                return
        self.rec.count("semaphore permits granted")
        g = self.granted(name, "permits", t, floors, lease, permits)
        self.enter_sem(g, capacity)
        self.leave()
        if lease is not None and rng.random() < 0.3:
            self.rec.count("semaphore lease left to expire")
            self.finish(g)
        else:
            self.release(g)

    def op_kept(self):
        """A pooled client's wait: short calls that keep their place in line."""
        rng = self.rng
        name, mode = self.pick()
        key = "k%s%d-%d" % (self.kind, self.cid, rng.randrange(1 << 30))
        ttl = rng.choice([1.0, 2.0])
        floors = self.rec.floors(name)
        t = None
        for i in range(rng.choice([3, 10, 30])):
            t, sent = self.timed(0.05, "SELECT dlock_acquire(%s, %s, timeout => '50 ms',"
                                 " ttl => %s, owner => %s, keep_place => true)",
                                 (name, mode, "%f s" % ttl, key))
            if t is not None:
                break
            self.rec.count("kept place: short wait ended, place kept")
        if t is None:
            # giving up: the release withdraws the place (or a grant it got meanwhile)
            self.q("SELECT dlock_release(%s, owner => %s)", (name, key))
            self.rec.count("kept place: given up and withdrawn")
            return
        self.rec.count("kept place: granted")
        # granted while a call waited, or collected: the lease runs from this call on
        lease = self.rec.lease_acked(key, name, t, sent + ttl)
        g = self.granted(name, mode, t, floors, lease)
        self.enter(g)
        self.leave()
        self.release(g)

    def op_leader(self):
        """A campaign; the leader proclaims, reads itself back, resigns or lapses."""
        rng = self.rng
        key = "l%s%d-%d" % (self.kind, self.cid, rng.randrange(1 << 30))
        ttl = rng.choice([0.5, 2.0])
        floors = self.rec.floors(ELECTION)
        t, sent = self.timed(0.3, "SELECT dlock_campaign(%s, %s, timeout => '0.3 s', ttl => %s,"
                             " owner => %s)", (ELECTION, self.who, "%f s" % ttl, key))
        if t is None:
            self.rec.count("campaign timed out")
            return
        self.rec.count("campaign won")
        lease = self.rec.lease_acked(key, ELECTION, t, sent + ttl)
        g = self.granted(ELECTION, "exclusive", t, floors, lease)
        self.enter(g)
        value = "%s term %d" % (self.who, t)
        try:
            self.q("SELECT dlock_proclaim(%s, %s, %s)", (ELECTION, value, key))
            seen = self.q("SELECT value, token FROM dlock_leader(%s)", (ELECTION,))
            self.rec.checked("the leader reads its own value back")
            if not seen or seen[0][1] != t or seen[0][0] != value:
                if lease.e_lower > mono():
                    self.rec.violation("exclusion", "%s leads %s (term %d) but dlock_leader shows"
                                       " %r" % (self.who, ELECTION, t, seen))
            self.rec.count("leader proclaimed")
        except psycopg2.Error as e:
            if e.pgcode != "DL001":
                raise
            if lease.e_lower > mono():
                self.rec.violation("acknowledged leases lost", "%s: proclaim of %s (term %d) says"
                                   " not the leader before its lease can run out" % (self.who,
                                                                                    ELECTION, t))
            self.rec.count("proclaim after the lead lapsed (DL001)")
        self.leave()
        if rng.random() < 0.3:
            self.rec.count("lead left to lapse")
            self.finish(g)
        else:
            self.release(g)

    def one(self):
        op = self.rng.random()
        if self.kind == "p":     # client processes: hot names, blocking, held longer
            f = self.op_acquire if op < 0.8 else self.op_multi
        elif op < 0.28:
            f = self.op_acquire
        elif op < 0.35:
            f = self.op_path
        elif op < 0.50:
            f = self.op_try
        elif op < 0.66:
            f = self.op_lease
        elif op < 0.78:
            f = self.op_multi
        elif op < 0.83:
            f = self.op_convert
        elif op < 0.91:
            f = self.op_semaphore
        elif op < 0.96:
            f = self.op_kept
        else:
            f = self.op_leader
        self.op_name = f.__name__
        self.op_started = mono()
        f()

    # -- the loop -----------------------------------------------------------

    def on_error(self, e):
        code = getattr(e, "pgcode", None)
        if code == "57014":
            self.rec.count("cancelled (57014)")
        elif code in ("57P01", "57P02", "57P03") or code is None or code.startswith("08"):
            self.rec.count("connection lost")
        elif code == "55000" and "not running" in str(e):
            self.rec.count("lock manager not running (55000)")
        else:
            self.rec.violation("unexpected errors", "%s in %s (started %.3f, connected %.3f, now"
                               " %.3f): %s %s" % (self.who, self.op_name, self.op_started,
                                                  self.conn_at, mono(), code, str(e).strip()))
        alive = self.conn is not None and not self.conn.closed
        released = None
        if alive:
            try:
                self.q("SET statement_timeout = 0")
                sent = mono()
                self.q("SELECT dlock_release_all()")
                released = sent
                self.q("DELETE FROM torture_active WHERE client = %s", (self.cid,))
            except psycopg2.Error:
                alive = False
        # grants end here: at the send of release_all (not at a later
        # statement: another client may hold the name by then), or with the
        # session, no earlier than its last statement that succeeded
        for g in list(self.open):
            self.finish(g, released)
        if not alive:
            try:
                self.conn.close()
            except Exception:
                pass
            self.conn = None

    def loop(self):
        try:
            self.run_ops()
        except Exception as e:      # a harness bug must fail the run, not vanish
            self.rec.violation("harness", "%s died: %r" % (self.who, e))
            raise

    def check_nothing_held(self):
        """Between operations the session holds and waits for nothing.  While
        the worker restarts, the tables may still show what a request given
        up meanwhile left (the next worker clears it): look again for a
        while before calling it a leftover.  A grant made after its call gave
        up is given back by the session's next dlock call (by design): one
        such call is made before a grant still there counts."""
        end = mono() + 5
        nudged = False
        while True:
            left = self.q(
                "SELECT (SELECT string_agg(name || ' ' || mode || ' token ' || token, ', ')"
                " FROM dlock.held WHERE owner IS NULL AND NOT implied"
                " AND pid = pg_backend_pid() AND backend_start = s.backend_start),"
                " (SELECT string_agg(name, ', ') FROM dlock.queue WHERE owner IS NULL"
                " AND pid = pg_backend_pid() AND backend_start = s.backend_start)"
                " FROM pg_stat_activity s WHERE s.pid = pg_backend_pid()")[0]
            if not (left[0] or left[1]):
                break
            if mono() > end and not nudged and left[0]:
                # a grant made after its call gave up (the lock manager
                # restarted meanwhile, its answer left staged): by design
                # the session's next dlock call gives it back first
                # (docs/postgresql.md, Semantics); make one that changes nothing else
                self.q("SELECT dlock_release_all(%s)", ("never-used-" + self.who,))
                self.rec.count("grants given back by the session's next call")
                nudged = True
                end = mono() + 5
                continue
            if mono() > end:
                # a primary cut off from its synchronous standby: the lock
                # manager cannot commit the withdrawal yet (it answered
                # nobody); look again while it waits, until it is demoted
                waits = self.q("SELECT count(*) > 0 FROM pg_stat_activity WHERE"
                               " wait_event = 'SyncRep' AND backend_type = 'dlock lock manager'")[0][0]
                if not waits or mono() > self.deadline + 60:
                    break
                self.rec.count("leftover rows while the lock manager waits for its standby")
                end = mono() + 5
            time.sleep(0.1)
        self.rec.checked("a session holds nothing between its operations")
        if left[0] or left[1]:
            self.rec.violation("grants nobody knows of", "%s holds %s and waits for %s between operations, which"
                               " its client never learnt of; its last calls: %s"
                               % (self.who, left[0], left[1], " | ".join(self.trace)))
            self.q("SELECT dlock_release_all()")

    def run_ops(self):
        while mono() < self.deadline:
            if self.conn is None and not self.connect():
                break
            try:
                self.q("SET statement_timeout = 0")
                self.check_nothing_held()
                if self.kind == "t" and self.rng.random() < 0.05:
                    self.q("SET statement_timeout = %s", ("%dms" % self.rng.choice([20, 100]),))
                    self.rec.count("statement_timeout set")
                self.one()
                self.rec.count("operations")
            except (psycopg2.Error, psycopg2.InterfaceError) as e:
                self.on_error(e)
        if self.conn is not None:
            try:
                self.q("SET statement_timeout = 0")
                self.q("SELECT dlock_release_all()")
                for g in list(self.open):
                    self.finish(g)
                self.conn.close()
            except psycopg2.Error:
                pass


def proc_client_main(cid, deadline, seed):
    """Entry point of a client process (torture.py --proc-client)."""
    rec = LineRecorder(sys.stdout)
    c = Client(cid, rec, os.environ["TORTURE_DSN"], deadline, seed, kind="p")
    c.loop()
    return 0


# ---------------------------------------------------------------------------
# The clusters
# ---------------------------------------------------------------------------

def cluster(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([CLUSTER] + [str(a) for a in args], env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        raise RuntimeError("pg_cluster.sh %s failed: %s" % (" ".join(map(str, args)), r.stdout))
    return r.stdout


def postmaster_pid(d):
    with open(os.path.join(d, "data", "postmaster.pid")) as f:
        return int(f.readline())


def dsn_of(nodes, extra=""):
    hosts = ",".join(d for d, _ in nodes)
    ports = ",".join(str(p) for _, p in nodes)
    s = "host=%s port=%s user=postgres dbname=postgres" % (hosts, ports)
    if len(nodes) > 1:
        s += " target_session_attrs=read-write"
    return s + extra


class Admin:
    """A connection for the harness itself, re-opened whenever needed."""

    def __init__(self, dsn):
        self.dsn = dsn
        self.conn = None

    def q(self, sql, args=(), timeout=30):
        end = mono() + timeout
        while True:
            try:
                if self.conn is None or self.conn.closed:
                    self.conn = psycopg2.connect(self.dsn, application_name="torture-admin",
                                                 connect_timeout=3)
                    self.conn.autocommit = True
                with self.conn.cursor() as cur:
                    cur.execute(sql, args)
                    return cur.fetchall() if cur.description else None
            except psycopg2.Error:
                try:
                    self.conn.close()
                except Exception:
                    pass
                self.conn = None
                if mono() > end:
                    raise
                time.sleep(0.05)

    def close(self):
        if self.conn is not None:
            self.conn.close()


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------

class Run:
    def __init__(self, args):
        self.args = args
        self.rec = Recorder()
        self.cl = Cluster(args.patroni, PATRONI_PREFIX, PATRONI_PORT_BASE) if args.patroni else None
        self.nodes = [] if self.cl else \
            [(args.dir, args.port)] + ([(args.dir2, args.port2)] if args.ha else [])
        self.primary = 0
        # the harness's connections; the clients' (TCP from their namespaces
        # under --patroni) are set in setup
        self.dsn = None if self.cl else dsn_of(self.nodes)
        self.client_dsn = self.dsn
        self.admin = Admin(self.dsn)
        self.fault_rng = random.Random(args.seed)
        self.fault_node = None
        self.deadline = None
        self.stop = threading.Event()
        self.procs = {}             # cid -> Popen
        self.proc_lock = threading.Lock()
        self.killed_watch = []      # (backend pid, backend_start, t_kill, kind)
        self.windows = []           # (start, end) of outages, for the timing check
        self.recovery = {}          # kind -> [seconds]
        self.failover_times = []
        self.reap = 0.1
        self.lease_overstay = 0.0
        self.slow_probes = []       # (time, seconds) of slow try-acquires by the monitor
        self.events = []            # (time, kind) of the heavy faults
        self.stalls = []            # (start, end) when this process or the server did not run
        self.recovery_list = []     # and how long each took
        self.log_files = [os.path.join(d, "server.log") for d, _ in self.nodes]

    # -- set-up -------------------------------------------------------------

    def primary_dir(self):
        return self.nodes[self.primary]

    def standby_node(self):
        return self.nodes[1 - self.primary]

    def make_standby(self):
        """Build the standby of the current primary and make it synchronous."""
        d, p = self.standby_node()
        pd, pp = self.primary_dir()
        if os.path.exists(os.path.join(d, "data")):
            shutil.rmtree(os.path.join(d, "data"))
        # the killed postmaster's socket lock: its pid may linger as a zombie
        # (until init reaps it), which a new postmaster takes for alive
        lock = os.path.join(d, ".s.PGSQL.%d.lock" % p)
        if os.path.exists(lock):
            with open(lock) as f:
                pid = int(f.readline())
            if not alive(pid):
                os.unlink(lock)
        cluster("standby", d, p, pd, pp,
                env={"PG_EXTRA_CONF": "synchronous_standby_names = ''", "PG_FSYNC": "on"})
        direct = Admin(dsn_of([self.primary_dir()]))
        direct.q("ALTER SYSTEM SET synchronous_standby_names = '*'")
        direct.q("SELECT pg_reload_conf()")
        lsn = direct.q("SELECT pg_current_wal_lsn()")[0][0]
        end = mono() + 60
        while mono() < end:
            r = direct.q("SELECT count(*) FROM pg_stat_replication WHERE sync_state = 'sync'"
                         " AND replay_lsn >= %s::pg_lsn", (lsn,))[0][0]
            if r == 1:
                direct.close()
                return
            time.sleep(0.05)
        direct.close()
        raise RuntimeError("the standby did not become synchronous")

    def start_patroni(self):
        """scripts/ha.sh's cluster in namespaces, and the clients' ones."""
        self.client_dsn = self.cl.start() + TCP_CUT
        for ns in PATRONI_NS:
            self.cl.client(ns)
        self.nodes = [self.cl.socket(n) for n in NODES]
        # through the unix sockets, which no cut touches; a statement on an
        # isolated primary waits for its standby: let it give up
        self.dsn = dsn_of(self.nodes, " options='-c statement_timeout=10s'")
        self.admin = Admin(self.dsn)
        self.log_files = [self.cl.log_file(n) for n in NODES]
        if self.cl.wait_healthy(180) is None:
            raise RuntimeError("the Patroni cluster did not become healthy: %s"
                               % self.cl.sh("status", self.cl.dir, check=False))

    def client_ns(self, cid):
        if not self.cl:
            return None
        return PATRONI_PREFIX + PATRONI_NS[1 if cid % 4 == 3 else 0]

    def setup(self):
        if self.cl:
            self.start_patroni()
        elif self.args.ha:
            self.make_standby()
        self.admin.q("DROP TABLE IF EXISTS torture_guard, torture_active")
        self.admin.q("CREATE TABLE torture_guard (name text PRIMARY KEY, last_token bigint NOT NULL)")
        # UNLOGGED: stale rows after a crash are harmless (their tokens are not held)
        self.admin.q("CREATE UNLOGGED TABLE torture_active (client int PRIMARY KEY, name text,"
                     " token bigint, mode text)")
        self.admin.q("INSERT INTO torture_guard SELECT n, 0 FROM unnest(%s::text[]) n",
                     (HOT + COLD + LONG + PATHS,))
        self.reap = float(self.admin.q("SELECT extract(epoch FROM current_setting("
                                       "'dlock.reap_interval')::interval)")[0][0])
        self.grace = float(self.admin.q("SELECT extract(epoch FROM current_setting("
                                        "'dlock.restart_grace')::interval)")[0][0])

    # -- client processes -----------------------------------------------------

    def spawn(self, cid):
        env = dict(os.environ, TORTURE_DSN=self.client_dsn)
        # ip netns exec execs the command: the pid stays the client's
        ns = ["ip", "netns", "exec", self.client_ns(cid)] if self.cl else []
        p = subprocess.Popen(ns + [sys.executable, os.path.abspath(__file__), "--proc-client", str(cid),
                                   "--proc-deadline", repr(self.deadline),
                                   "--proc-seed", str(random.randrange(1 << 30))],
                             stdout=subprocess.PIPE, env=env, text=True, bufsize=1)
        p.killed = False
        t = threading.Thread(target=self.read_proc, args=(cid, p), daemon=True)
        t.start()
        with self.proc_lock:
            self.procs[cid] = p

    def read_proc(self, cid, p):
        for line in p.stdout:
            try:
                apply_line(self.rec, line)
            except ValueError:
                if not (p.killed and not line.endswith("\n")):   # cut by kill -9
                    self.rec.violation("harness", "client process %d wrote %r" % (cid, line))
        rc = p.wait()
        if p.killed:
            if mono() < self.deadline - 1:
                self.spawn(cid)
        elif rc != 0:
            self.rec.violation("unexpected errors", "client process %d exited with %d" % (cid, rc))

    # -- faults ---------------------------------------------------------------

    def client_backends(self, kind, where):
        return self.admin.q(
            "SELECT a.application_name, a.pid, a.backend_start FROM pg_stat_activity a"
            " WHERE a.application_name LIKE %%s AND %s ORDER BY random() LIMIT 1" % where,
            ("torture-%s%%" % kind,), timeout=5)

    def light_fault(self, rng):
        k = rng.random()
        if k < 0.30:
            r = self.admin.q("SELECT pg_cancel_backend(l.pid) FROM dlock.locks l JOIN pg_stat_activity a"
                             " ON a.pid = l.pid AND a.backend_start = l.backend_start"
                             " WHERE NOT l.granted AND a.application_name LIKE 'torture-%%'"
                             " ORDER BY random() LIMIT 1", timeout=5)
            if r:
                self.rec.fault("pg_cancel_backend of a waiting backend")
        elif k < 0.52:
            waiting = k < 0.41
            r = self.client_backends("t", "EXISTS (SELECT 1 FROM dlock.locks l WHERE l.pid = a.pid"
                                     " AND l.backend_start = a.backend_start AND NOT l.granted)"
                                     if waiting else "true")
            if r:
                self.admin.q("SELECT pg_terminate_backend(%s)", (r[0][1],), timeout=5)
                self.rec.fault("pg_terminate_backend of a %s client backend"
                               % ("waiting" if waiting else "random"))
        elif k < 0.94 and self.args.procs > 0:
            holding = k < 0.73
            for _ in range(20):      # client processes mostly wait: look a while
                r = self.client_backends("p", "EXISTS (SELECT 1 FROM dlock.locks l"
                                         " WHERE l.pid = a.pid AND l.backend_start = a.backend_start"
                                         " AND %sl.granted)" % ("" if holding else "NOT "))
                if r:
                    break
                time.sleep(0.05)
            if r:
                cid = int(r[0][0][len("torture-p"):])
                with self.proc_lock:
                    p = self.procs.get(cid)
                if p is not None and p.poll() is None:
                    p.killed = True
                    os.kill(p.pid, signal.SIGKILL)
                    kind = "holding" if holding else "waiting"
                    self.rec.fault("kill -9 of a client process while %s" % kind)
                    with self.rec.lock:
                        self.killed_watch.append((r[0][1], r[0][2], mono(), kind))
        else:
            kind = "pg_terminate_backend of the dlock worker"
            leases, before, snap_now, t_snap = self.lease_view(kind)
            t0 = mono()
            old = self.worker_pid()
            self.admin.q("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                         " WHERE backend_type = 'dlock lock manager'", timeout=5)
            self.rec.fault(kind)
            if self.wait_worker(old, 10):
                # no restart grace here (shared memory stays): what is
                # unexpired now must be held
                self.check_after_restart(kind, leases, before, snap_now, t0 - t_snap, grace=False)
            self.windows.append((t0, mono()))

    def worker_pid(self):
        r = self.admin.q("SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock lock manager'",
                         timeout=30)
        return r[0][0] if r else None

    def wait_worker(self, old, limit):
        """Until a worker other than 'old' serves a try-acquire."""
        end = mono() + limit
        while mono() < end:
            try:
                pid = self.worker_pid()
                if pid is not None and pid != old:
                    t = self.admin.q("SELECT dlock_try_acquire(%s)", (PROBE,), timeout=5)[0][0]
                    if t is not None:
                        self.admin.q("SELECT dlock_release(%s)", (PROBE,), timeout=5)
                        return True
            except psycopg2.Error:
                pass
            time.sleep(0.05)
        self.rec.violation("invariants", "the dlock worker did not come back within %d s" % limit)
        return False

    def lease_view(self, kind):
        """The acknowledged leases and the server's view of them just before
        a fault: (leases, {key: (token, expires_at)}, server now, when)."""
        leases = self.rec.lease_snapshot(mono())
        snap = self.admin.q("SELECT now(), owner, token, expires_at FROM dlock.held"
                            " WHERE owner = ANY(%s)", ([x.key for x in leases],))
        t_snap = mono()
        before = {k: (t, e) for _, k, t, e in snap}
        for x in leases:
            # acknowledged, never released, and its lease runs beyond this
            # query (a lease runs at least ttl from its request's send)
            if x.key not in before and x.e_lower > t_snap and not x.release_sent:
                self.rec.violation("acknowledged leases lost", "before %s: lease %s on %s"
                                   " (token %d) is not held" % (kind, x.key, x.name, x.token))
        return leases, before, snap[0][0] if snap else None, t_snap

    def heavy_fault(self, kind):
        """A crash, restart or failover; then the checks that follow one."""
        leases, before, snap_now, t_snap = self.lease_view(kind)
        old = self.worker_pid()
        with self.rec.lock:
            self.rec.first_grant_after = None
            self.rec.watch_from = None
        t0 = t_down = mono()
        if kind == "SIGKILL of the dlock worker":
            if old is None:
                return
            os.kill(old, signal.SIGKILL)
        elif kind == "SIGKILL of a client backend":
            r = self.client_backends("t", "true")
            if not r:
                return
            os.kill(r[0][1], signal.SIGKILL)
        elif kind == "pg_ctl restart -m immediate":
            cluster("restart", self.primary_dir()[0], "immediate")
            # the old server ran, and reaped leases as they ran out, until
            # some moment before the restart returned (seconds on a loaded
            # machine): only a lease unexpired then must come back
            t_down = mono()
        elif kind == "failover: kill -9 of the primary, promote the standby":
            self.failover()
        elif kind in PATRONI_FAULTS:
            self.fault_landed = None
            self.patroni_fault(kind)
            t_down = self.fault_landed or t_down
        self.rec.fault(kind)
        self.events.append((t0, kind))
        failover = kind.startswith("failover")
        # without a failover the worker is the same: any answer will do
        ok = self.wait_worker(old if failover or not self.cl else None, 60)
        t1 = mono()
        self.windows.append((t0, t1))
        self.recovery.setdefault(kind, []).append(t1 - t0)
        self.recovery_list.append(t1 - t0)
        if ok:
            self.check_after_restart(kind, leases, before, snap_now, t_down - t_snap,
                                     grace=failover or not self.cl)
        if failover:
            # the failover time: kill to the first successful acquire of a client
            end = mono() + 10
            while mono() < end and self.rec.first_grant_after is None:
                time.sleep(0.02)
            with self.rec.lock:
                first = self.rec.first_grant_after
                self.rec.watch_from = None
            if first is None:
                self.rec.violation("invariants", "no client acquired anything within 10 s"
                                   " after the failover")
            else:
                self.failover_times.append(first - t0)
            if self.cl:
                self.patroni_restore(kind)
            else:
                self.make_standby()

    def failover(self):
        pd, _ = self.primary_dir()
        pm = postmaster_pid(pd)
        kids = children_of(pm)
        os.kill(pm, signal.SIGKILL)
        with self.rec.lock:
            self.rec.watch_from = mono()
        # the old primary's backends notice their postmaster's death and exit
        end = mono() + 15
        while mono() < end and any(alive(k) for k in kids):
            time.sleep(0.02)
        for k in kids:
            if alive(k):
                os.kill(k, signal.SIGKILL)
        cluster("promote", self.standby_node()[0])
        self.primary = 1 - self.primary

    def patroni_fault(self, kind):
        """A fault of PATRONI_FAULTS; a failover returns once another node
        leads and the old leader is a primary no more."""
        leader = self.cl.patroni_leader()
        if leader is None:
            raise RuntimeError("no leader before: %s" % kind)
        self.fault_node = leader
        if kind.startswith("kill -9 of an etcd member"):
            node = self.fault_rng.choice(NODES)
            self.cl.kill_node(node, ("etcd",))
            time.sleep(5)
            self.cl.start_node(node)
            return
        if kind.startswith("client partition"):
            self.cl.cut(PATRONI_NS[1], leader)
            time.sleep(LONG_TTL + 2)        # its leases run out meanwhile
            self.cl.heal(PATRONI_NS[1], leader)
            return
        log = self.cl.log_file(leader)
        log_from = os.path.getsize(log) if os.path.exists(log) else 0
        if "kill -9" in kind:
            self.cl.kill_node(leader)
        else:
            others = [n for n in NODES if n != leader]
            self.cl.cut(leader, others[0], leader, others[1])
        # until now the old leader ran and reaped leases as they ran out
        # (finding the leader took a while on a loaded machine): only a
        # lease unexpired now must be on the new one
        self.fault_landed = mono()
        with self.rec.lock:
            self.rec.watch_from = mono()
        new = self.cl.wait_leader(other_than=leader, timeout=150)
        if new is None:
            raise RuntimeError("no new leader 150 s after: %s" % kind)
        end = mono() + 60
        while mono() < end and self.cl.role(leader) == "primary":
            time.sleep(0.2)
        if self.cl.role(leader) == "primary":
            self.rec.violation("invariants", "%s is still a primary 60 s after %s promoted"
                               " (%s)" % (leader, new, kind))
        if kind == ISOLATION and self.cut_wait(log, log_from):
            self.rec.count(CUT_WAIT)

    @staticmethod
    def cut_wait(log, offset):
        """Whether the old leader's demotion (a fast shutdown) ended its lock
        manager while its commit waited for the standby: the window in which
        a grant could be answered that the new leader never received."""
        try:
            with open(log, errors="replace") as f:
                f.seek(offset)
                text = f.read()
        except OSError:
            return False
        waits = set(re.findall(r"\[(\d+)\] WARNING:  canceling the wait for synchronous"
                               r" replication and terminating connection", text))
        ended = set(re.findall(r"\[(\d+)\] FATAL:  terminating background worker"
                               r" \"dlock lock manager\"", text))
        return bool(waits & ended)

    def patroni_restore(self, kind):
        """The old leader back as a replica: started again, or the cut healed."""
        if "kill -9" in kind:
            self.cl.start_node(self.fault_node)
        else:
            self.cl.heal()
        if self.cl.wait_healthy(240) is None:
            self.rec.violation("harness", "no healthy cluster 240 s after %s: %s" % (
                kind, self.cl.sh("status", self.cl.dir, check=False)))

    def check_after_restart(self, kind, leases, before, snap_now, to_fault, grace=True):
        """Every lease held (by the server's view) and unexpired when the fault
        struck is held again with its token: the restart grace covers the
        leases that ran out meanwhile.  No grant of a dead session is left."""
        r = self.admin.q("SELECT now(), backend_start FROM pg_stat_activity"
                         " WHERE backend_type = 'dlock lock manager'")
        srv_now = r[0][0] if r else None
        within_grace = grace and r and (r[0][0] - r[0][1]).total_seconds() < self.grace - 0.5
        rows = self.admin.q("SELECT owner, name, token, expires_at FROM dlock.held"
                            " WHERE owner = ANY(%s)", ([x.key for x in leases],))
        held = {k: (n, t) for k, n, t, _ in rows}
        expiry = {k: e for k, _, _, e in rows}
        fault_at = snap_now + datetime.timedelta(seconds=to_fault + 0.1) if snap_now else None
        n = 0
        for x in leases:
            if x.release_sent or x.key not in before:
                continue
            token, expires = before[x.key]
            # unexpired at the fault: the restart grace keeps it; else unexpired now
            if not (expires > fault_at if within_grace else
                    srv_now is not None and expires > srv_now + datetime.timedelta(seconds=0.1)):
                continue
            n += 1
            if held.get(x.key) != (x.name, x.token):
                # the times the verdict rests on, to tell a loss from a late look
                self.rec.violation("acknowledged leases lost",
                                   "after %s: lease %s on %s (token %d) is %s (it ran until %s"
                                   " before the fault at %s; the new lock manager started %s,"
                                   " looked at %s, grace %s)" % (
                                       kind, x.key, x.name, x.token,
                                       "held with %s" % (held[x.key],) if x.key in held else "gone",
                                       expires, fault_at, r[0][1] if r else None, srv_now,
                                       within_grace))
            elif x.renewed_to is not None and expiry[x.key] < x.renewed_to:
                self.rec.violation("acknowledged leases lost",
                                   "after %s: lease %s on %s runs until %s, renewed to %s" % (
                                       kind, x.key, x.name, expiry[x.key], x.renewed_to))
        self.rec.checked("acknowledged leases present after a restart or failover", n)
        if not grace:
            return
        dead = self.admin.q(
            "SELECT count(*) FROM dlock.held h WHERE owner IS NULL AND NOT EXISTS"
            " (SELECT 1 FROM pg_stat_activity a WHERE a.pid = h.pid"
            " AND a.backend_start = h.backend_start)")[0][0]
        self.rec.checked("no grant to a dead session after a restart or failover")
        if dead:
            self.rec.violation("invariants", "after %s: %d grants to dead sessions" % (kind, dead))

    def faults(self):
        rng = random.Random(self.args.seed)
        a = self.args
        kinds = ([ISOLATION] if self.cl and a.isolations else PATRONI_FAULTS if self.cl else
                 ["failover: kill -9 of the primary, promote the standby"] if a.ha else
                 ["SIGKILL of the dlock worker", "SIGKILL of a client backend",
                  "pg_ctl restart -m immediate"])
        counted = a.ha or self.cl       # a given number of heavy faults
        nheavy = a.isolations or a.failovers
        if counted:
            gap = a.seconds / (nheavy + 1)
        else:
            gap = a.heavy_every
        self.fault_rng = rng
        round_ = []
        heavy = 0
        next_heavy = mono() + gap * rng.uniform(0.5, 1.0)
        time.sleep(1)
        # a Patroni failover takes a while: none starts near the end
        while mono() < self.deadline - (4 if a.ha else 2):
            try:
                if mono() >= next_heavy and not (counted and heavy >= nheavy) and \
                        not (self.cl and mono() > self.deadline - 45):
                    heavy += 1
                    if not round_:
                        round_ = kinds[:]
                        rng.shuffle(round_)
                        # failovers first (pop takes from the end): a short
                        # run has them
                        round_.sort(key=lambda k: k.startswith("failover"))
                    self.heavy_fault(round_.pop())
                    next_heavy = mono() + gap * rng.uniform(0.6, 1.2)
                else:
                    self.light_fault(rng)
            except (psycopg2.Error, RuntimeError, ProcessLookupError, OSError) as e:
                self.rec.violation("harness", "fault injection failed: %s" % e)
            time.sleep(rng.uniform(0.2, 0.6))

    # -- stalls of the machine ----------------------------------------------------

    def heartbeat(self):
        """When this process was not scheduled (its own calls then look slow)."""
        last = mono()
        while not self.stop.is_set():
            time.sleep(0.05)
            now = mono()
            if now - last > STALL:
                self.stalls.append((last, now))
            last = now

    def server_probe(self):
        """When the server did not answer a trivial query (no dlock involved),
        e.g. the machine stalled: calls made meanwhile may be late by as much."""
        c = Admin(self.dsn)
        while not self.stop.is_set():
            t = mono()
            try:
                c.q("SELECT 1", timeout=1)
            except psycopg2.Error:
                pass               # down (a restart is an outage of its own)
            else:
                if mono() - t > STALL:
                    self.stalls.append((t, mono()))
            time.sleep(0.1)
        c.close()

    # -- the monitor ------------------------------------------------------------

    def monitor(self):
        """While the clients run: conflicting holders in one snapshot of
        dlock.held, backends of killed clients that keep their locks, and the
        largest lease overstay (reported, asserted only after quiescence)."""
        mon = Admin(self.dsn)
        while not self.stop.is_set():
            try:
                r = mon.q("SELECT name, string_agg(mode || ' token ' || token, ', ')"
                          " FROM dlock.held WHERE NOT implied GROUP BY name"
                          " HAVING count(*) > 1 AND bool_or(mode = 'exclusive')", timeout=5)
                # a path and a name below it, of two owners, one exclusive
                r += mon.q("SELECT a.name, a.mode || ' token ' || a.token || ' and ' || b.name"
                           " || ' ' || b.mode || ' token ' || b.token"
                           " FROM dlock.held a JOIN dlock.held b ON starts_with(b.name, a.name || '/')"
                           " WHERE left(a.name, 1) = '/' AND NOT a.implied AND NOT b.implied"
                           " AND (a.mode = 'exclusive' OR b.mode = 'exclusive')"
                           " AND coalesce('k' || a.owner, 's' || a.pid || '.' || a.backend_start)"
                           " <> coalesce('k' || b.owner, 's' || b.pid || '.' || b.backend_start)",
                           timeout=5)
                self.rec.checked("no conflicting holders in one snapshot of dlock.held")
                for name, what in r:
                    self.rec.violation("exclusion", "dlock.held has conflicting holders of %s: %s"
                                       % (name, what))
                # how long the lock manager takes to answer, for the diagnosis
                t = mono()
                if mon.q("SELECT dlock_try_acquire(%s)", (PROBE + "/mon",), timeout=5)[0][0]:
                    mon.q("SELECT dlock_release(%s)", (PROBE + "/mon",), timeout=5)
                if mono() - t > SLOW_PROBE:
                    self.slow_probes.append((t, mono() - t))
                o = mon.q("SELECT extract(epoch FROM max(now() - expires_at)) FROM dlock.held",
                          timeout=5)[0][0]
                if o is not None:
                    self.lease_overstay = max(self.lease_overstay, float(o))
                with self.rec.lock:
                    watch = list(self.killed_watch)
                for w in watch:
                    pid, bstart, t_kill, kind = w
                    n = mon.q("SELECT count(*) FROM dlock.locks WHERE pid = %s AND backend_start = %s",
                              (pid, bstart), timeout=5)[0][0]
                    if n == 0 or mono() - t_kill > KILLED_CLIENT_LIMIT:
                        with self.rec.lock:
                            self.killed_watch.remove(w)
                        self.rec.checked("a killed client's backend lets go in time")
                        if n:
                            self.rec.violation("invariants", "the backend of a client killed while"
                                               " %s still holds or waits after %.1f s"
                                               % (kind, KILLED_CLIENT_LIMIT))
            except psycopg2.Error:
                pass
            self.stop.wait(0.3)
        mon.close()

    # -- after the run --------------------------------------------------------

    def check_intervals(self):
        """Two conflicting certainly-held intervals must not overlap: on one
        name, or on a path and a name below it ('self' on the name, 'below'
        on each ancestor; two 'below' never conflict)."""
        by_key = {}
        for name, excl, start, end, what in self.rec.intervals:
            by_key.setdefault(name, []).append((start, end, excl, True, what))
            if name.startswith("/"):
                parts = name.split("/")
                for i in range(2, len(parts)):
                    by_key.setdefault("/".join(parts[:i]), []).append(
                        (start, end, excl, False, "%s on %s" % (what, name)))
        n = 0
        for key, ivs in by_key.items():
            ivs.sort(key=lambda x: x[0])
            last = {}           # (self?, exclusive?) -> (latest end so far, its grant)
            for start, end, excl, own, what in ivs:
                n += own
                for (o_own, o_excl), (o_end, o_what) in last.items():
                    if (own or o_own) and (excl or o_excl) and o_end > start:
                        self.rec.violation("exclusion", "%s: a %s grant%s held from %.3f (%s)"
                                           " overlaps a %s one%s held until %.3f (%s)" % (
                                               key, "exclusive" if excl else "shared",
                                               "" if own else " below", start, what,
                                               "exclusive" if o_excl else "shared",
                                               "" if o_own else " below", o_end, o_what))
                k = (own, excl)
                if end > last.get(k, (float("-inf"),))[0]:
                    last[k] = (end, what)
        self.rec.checked("grant intervals without overlap", n)
        # semaphores: at any moment at most capacity permits certainly held
        by_sem = {}
        for name, permits, start, end, what in self.rec.sem_intervals:
            by_sem.setdefault(name, []).append((start, end, permits, what))
        for name, ivs in by_sem.items():
            events = sorted([(s, 1, p, w) for s, e, p, w in ivs] + [(e, 0, -p, w) for s, e, p, w in ivs])
            held = 0
            for at, kind, delta, what in events:      # ends before starts at one instant
                held += delta
                if held > SEMS[name]:
                    self.rec.violation("exclusion", "%s: %d permits certainly held at %.3f, capacity"
                                       " %d (%s)" % (name, held, at, SEMS[name], what))
                    break
            self.rec.checked("semaphore intervals within capacity", len(ivs))

    def check_blocking(self):
        late = 0
        worst = 0.0
        for timeout, send, end, outcome in self.rec.blocking:
            allowed = timeout + self.reap + SLACK
            for ws, we in self.windows:
                if ws < end and we > send:
                    allowed += (we - ws) + WORKER_GRACE
            for ws, we in self.stalls:
                if ws < end and we > send:
                    allowed += min(we, end) - max(ws, send)
            over = (end - send) - timeout
            worst = max(worst, over)
            if end - send > allowed:
                late += 1
                if late <= 10:
                    since = [send - we for ws, we in self.windows if we <= send]
                    slow = [lat for t, lat in self.slow_probes if send - 1 <= t <= end + 1]
                    self.rec.violation("late calls", "a call with timeout %.2f s took %.2f s (%s),"
                                       " sent at +%.1f s, %s after the last outage; slowest"
                                       " worker probe around then %s" % (
                                           timeout, end - send, outcome, send - self.started,
                                           "%.1f s" % min(since) if since else "none",
                                           "%.2f s" % max(slow) if slow else "< %.1f s" % SLOW_PROBE))
        if late > 10:
            self.rec.violation("late calls", "... %d late calls in all" % late)
        self.rec.checked("blocking calls ended within timeout + reap interval + slack",
                         len(self.rec.blocking))
        self.worst_overrun = worst

    def quiescence(self):
        """The invariants once every client has gone."""
        a = self.admin
        checks = []

        def check(what, ok, detail=""):
            checks.append((what, ok, detail))
            self.rec.checked(what)
            if not ok:
                self.rec.violation("invariants", "%s %s" % (what, detail))

        # sessions end asynchronously after a disconnect: give them a moment
        end = mono() + 5
        while mono() < end and a.q("SELECT count(*) FROM dlock.held WHERE owner IS NULL")[0][0]:
            time.sleep(0.1)
        n = a.q("SELECT count(*) FROM dlock.held WHERE owner IS NULL")[0][0]
        check("no session-owned grants once every client disconnected", n == 0, "(%d left)" % n)
        n = a.q("SELECT count(*) FROM dlock.held h WHERE owner IS NULL AND NOT EXISTS"
                " (SELECT 1 FROM pg_stat_activity x WHERE x.pid = h.pid"
                " AND x.backend_start = h.backend_start)")[0][0]
        check("no grants to dead sessions", n == 0, "(%d)" % n)
        n = a.q("SELECT count(*) FROM dlock.queue WHERE kept_until IS NULL")[0][0]
        check("no queue rows but kept places", n == 0, "(%d)" % n)
        # every remaining lease goes within its expiry plus one reap interval
        limit = self.reap + 0.1
        end = mono() + max(LONG_TTL, self.grace) + 3
        worst = 0.0
        while mono() < end:
            left, over = a.q("SELECT (SELECT count(*) FROM dlock.held)"
                             " + (SELECT count(*) FROM dlock.queue),"
                             " extract(epoch FROM greatest((SELECT max(now() - expires_at)"
                             " FROM dlock.held), (SELECT max(now() - kept_until) FROM dlock.queue)))")[0]
            if over is not None:
                worst = max(worst, float(over))
            if left == 0:
                break
            time.sleep(0.05)
        check("no lease past its expiry plus one reap interval (%.0f ms + 100 ms)" % (self.reap * 1000),
              worst <= limit, "(worst overstay %.3f s)" % worst)
        self.quiet_overstay = worst
        n = a.q("SELECT count(*) FROM dlock.held")[0][0]
        check("every lease gone after its expiry", n == 0, "(%d left)" % n)
        n = a.q("SELECT count(*) FROM dlock.queue")[0][0]
        check("every kept place gone after its lease", n == 0, "(%d left)" % n)
        # the lock manager's picture: every name free (nothing granted to nobody)
        names = HOT + COLD + LONG + PATHS + sorted(SEMS) + [ELECTION]
        got = a.q("SELECT count(*) FROM unnest(%s::text[]) n WHERE dlock_try_acquire(n) IS NOT NULL",
                  (names,))[0][0]
        a.q("SELECT dlock_release_all()")
        check("every name free in the lock manager", got == len(names), "(%d of %d)" % (got, len(names)))
        n = a.q("SELECT count(*) FROM dlock.locks")[0][0]
        check("nothing held or queued at the end", n == 0, "(%d)" % n)
        hi = a.q("SELECT max(hi) FROM dlock.ticket_counter")[0][0]
        check("the ticket counter is above every acknowledged token", hi > self.rec.max_acked_all,
              "(%s vs %s)" % (hi, self.rec.max_acked_all))
        return checks

    def scan_logs(self):
        """Crashes we did not cause: PANIC, or a process killed by another signal."""
        bad = []
        for path in self.log_files:
            try:
                with open(path, errors="replace") as f:
                    for line in f:
                        if "PANIC" in line or (re.search(r"terminated by signal (\d+)", line) and
                                               not re.search(r"terminated by signal 9\b", line)):
                            bad.append(line.strip())
            except OSError:
                pass
        self.rec.checked("server logs: no PANIC, no process killed by a signal we did not send")
        for b in bad[:5]:
            self.rec.violation("invariants", "server log: %s" % b)

    # -- main -----------------------------------------------------------------

    def run(self):
        a = self.args
        self.setup()
        started = self.started = mono()
        self.deadline = started + a.seconds
        clients = [Client(i, self.rec, self.client_dsn, self.deadline, a.seed * 1000 + i,
                          ns=self.client_ns(i))
                   for i in range(a.clients)]
        threads = [threading.Thread(target=c.loop, daemon=True) for c in clients]
        for t in threads:
            t.start()
        for i in range(a.procs):
            self.spawn(a.clients + i)
        mon = threading.Thread(target=self.monitor, daemon=True)
        mon.start()
        for f in (self.heartbeat, self.server_probe):
            threading.Thread(target=f, daemon=True).start()
        f = threading.Thread(target=self.faults, daemon=True)
        f.start()
        for i, t in enumerate(threads):
            t.join(max(1, self.deadline - mono()) + 90)
            if t.is_alive():
                self.rec.violation("invariants", "client %d did not finish" % i)
        f.join(120)
        if f.is_alive():
            self.rec.violation("harness", "the fault thread did not finish")
        end = mono() + 30
        for cid, p in list(self.procs.items()):
            try:
                p.wait(max(0.1, end - mono()))
            except subprocess.TimeoutExpired:
                p.killed = True
                p.kill()
                self.rec.violation("invariants", "client process %d did not finish" % cid)
        self.stop.set()
        mon.join(10)
        elapsed = mono() - started
        self.check_intervals()
        self.check_blocking()
        checks = self.quiescence()
        self.scan_logs()
        self.admin.q("DROP TABLE torture_guard, torture_active")
        self.admin.close()
        return self.report(elapsed, checks)

    def report(self, elapsed, checks):
        a = self.args
        rec = self.rec
        name = suite_name(a)
        print("%-58s %10s" % ("operations", "count"))
        for k in sorted(rec.stats):
            print("%-58s %10d" % (k, rec.stats[k]))
        print("%-58s %10s" % ("faults", "count"))
        for k in sorted(rec.faults):
            print("%-58s %10d" % (k, rec.faults[k]))
        for k, v in sorted(self.recovery.items()):
            print("recovery after %s: max %.2f s, mean %.2f s" % (k, max(v), sum(v) / len(v)))
        print("heavy faults (monotonic clock, the run started at %.3f): %s" % (
            self.started, ", ".join("%.3f %s (%.2f s)" % (t, k.split(":")[0], r)
                                    for (t, k), r in zip(self.events, self.recovery_list))))
        if a.ha or a.patroni:
            ft = ", ".join("%.2f s" % x for x in self.failover_times) or "none measured"
            print("failover time, the fault to the first successful acquire: %s" % ft)
        print("largest lease overstay while running (not asserted): %.3f s; after quiescence: %.3f s"
              % (self.lease_overstay, self.quiet_overstay))
        print("largest overrun of a blocking call past its timeout: %.3f s" % self.worst_overrun)
        if self.stalls:
            print("the machine stalled %d times (this process or a SELECT 1 late by more than"
                  " %.2f s), longest %.2f s" % (len(self.stalls), STALL,
                                                max(e - s for s, e in self.stalls)))
        if self.slow_probes:
            print("the lock manager answered a try-acquire in more than %.1f s %d times (slowest"
                  " %.2f s at +%.0f s)" % (SLOW_PROBE, len(self.slow_probes),
                                           max(x[1] for x in self.slow_probes),
                                           max(self.slow_probes, key=lambda x: x[1])[0] - self.started))
        print("%-70s %8s" % ("invariants checked", "times"))
        for k in sorted(rec.checks):
            print("%-70s %8d" % (k, rec.checks[k]))
        tally = Tally()
        for what, ok, detail in checks:
            tally.check(what, ok, detail, sep=" ")
        categories = ["exclusion", "tokens backwards", "acknowledged leases lost", "late calls",
                      "grants nobody knows of", "unexpected errors", "invariants", "harness"]
        for c in categories:
            v = rec.violations.get(c, [])
            for t in v[:10]:
                print("VIOLATION [%s] %s" % (c, t))
            if c in ("invariants",):
                continue      # counted with the checks above
            tally.check("%s: %d" % (c, len(v)), not v)
        legit = rec.stats.get("fencing: rejected, lease expired (legitimate)", 0) + \
            rec.stats.get("fencing: lease gone before entering (legitimate)", 0)
        tally.check("too few operations ran", rec.stats.get("operations", 0) >= a.clients,
                    quiet=True)
        heavy = sum(v for k, v in rec.faults.items()
                    if k.startswith(("SIGKILL", "pg_ctl", "failover")) or k in PATRONI_FAULTS)
        tally.check("no crash, restart or failover happened", heavy != 0, quiet=True)
        if a.patroni and a.isolations:
            # the window of issue 36: grants answered by an isolated leader
            tally.check("no isolation ended the lock manager while its commit waited for"
                        " the standby: the window was not hit", rec.stats.get(CUT_WAIT, 0) != 0,
                        quiet=True)
        # one summary row, as in docs/reliability.md
        faults = "; ".join("%d %s" % (v, k) for k, v in sorted(rec.faults.items()))
        nviol = sum(len(rec.violations.get(c, [])) for c in categories)
        print("| %s | %d threads + %d processes | %.0f s | %d | %s | %d | exclusion %d, tokens"
              " backwards %d, leases lost %d, late calls %d, other %d; fencing rejections of"
              " expired leases (legitimate) %d |"
              % ("Patroni (isolations)" if a.patroni and a.isolations else
                 "Patroni (HA)" if a.patroni else "HA (failover)" if a.ha else "crash", a.clients, a.procs, elapsed,
                 rec.stats.get("operations", 0), faults, sum(rec.checks.values()),
                 len(rec.violations.get("exclusion", [])),
                 len(rec.violations.get("tokens backwards", [])),
                 len(rec.violations.get("acknowledged leases lost", [])),
                 len(rec.violations.get("late calls", [])),
                 nviol - len(rec.violations.get("exclusion", [])) -
                 len(rec.violations.get("tokens backwards", [])) -
                 len(rec.violations.get("acknowledged leases lost", [])) -
                 len(rec.violations.get("late calls", [])), legit))
        print(tally.summary(name))
        return 0 if tally.failed == 0 else 1


def selftest():
    """The harness's own checks must catch what they are meant to catch."""
    class Fake(Run):
        def __init__(self):
            self.rec = Recorder()
    cases = [
        ("two exclusive grants of one name overlap",
         [("x", True, 0, 2), ("x", True, 1, 3)], 1),
        ("exclusive then exclusive, one after the other",
         [("x", True, 0, 1), ("x", True, 1.5, 3)], 0),
        ("shared and shared overlap",
         [("x", False, 0, 2), ("x", False, 1, 3)], 0),
        ("shared inside an exclusive",
         [("x", True, 0, 5), ("x", False, 1, 2)], 1),
        ("exclusive path and shared below it overlap",
         [("/t/0", True, 0, 2), ("/t/0/a/x", False, 1, 3)], 1),
        ("shared path and shared below it overlap",
         [("/t/0", False, 0, 2), ("/t/0/a", False, 1, 3)], 0),
        ("exclusive siblings overlap",
         [("/t/0/a", True, 0, 2), ("/t/0/b", True, 1, 3)], 0),
        ("exclusive below a shared path overlap",
         [("/t/0/a/y", True, 5, 9), ("/t/0", False, 1, 6)], 1),
    ]
    failed = 0
    for what, ivs, want in cases:
        f = Fake()
        f.rec.intervals = [iv + ("",) for iv in ivs]
        f.check_intervals()
        got = len(f.rec.violations.get("exclusion", []))
        if (got > 0) != (want > 0):
            print("FAIL self-test: %s: %d violations, expected %d" % (what, got, want))
            failed += 1
    sem_cases = [
        ("three permits of a capacity of two", [("sem/0", 1, 0, 5), ("sem/0", 2, 1, 3)], 1),
        ("two permits, then two more after the release",
         [("sem/0", 2, 0, 1), ("sem/0", 2, 1, 2)], 0),
        ("three permits of a capacity of three", [("sem/1", 2, 0, 5), ("sem/1", 1, 1, 3)], 0),
    ]
    for what, ivs, want in sem_cases:
        f = Fake()
        f.rec.intervals = []
        f.rec.sem_intervals = [iv + ("",) for iv in ivs]
        f.check_intervals()
        got = len(f.rec.violations.get("exclusion", []))
        if (got > 0) != (want > 0):
            print("FAIL self-test: %s: %d violations, expected %d" % (what, got, want))
            failed += 1
    cases += sem_cases
    rec = Recorder()
    f = rec.floors("x")
    rec.acked("x", 10, f, "a", 0)
    rec.acked("x", 9, rec.floors("x"), "b", 0)
    rec.acked("y", 8, rec.floors("y"), "c", 0)
    rec.acked("x", 11, f, "d", 0)        # sent before 10 was acknowledged: fine
    if len(rec.violations.get("tokens backwards", [])) != 2:
        print("FAIL self-test: token floors: %s" % rec.violations)
        failed += 1
    print("self-test of the checks: %d cases, %d failed" % (len(cases) + 1, failed))
    return failed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir")
    ap.add_argument("--port", type=int)
    ap.add_argument("--dir2")
    ap.add_argument("--port2", type=int)
    ap.add_argument("--ha", action="store_true")
    ap.add_argument("--patroni", metavar="DIR")
    ap.add_argument("--seconds", type=float, default=30)
    ap.add_argument("--clients", type=int, default=64)
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--heavy-every", type=float, default=8.0)
    ap.add_argument("--failovers", type=int, default=1)
    ap.add_argument("--isolations", type=int, default=0,
                    help="Patroni mode: only this many isolations of the leader")
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--proc-client", type=int)
    ap.add_argument("--proc-deadline", type=float)
    ap.add_argument("--proc-seed", type=int)
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return 1 if selftest() else 0
    if args.proc_client is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        return proc_client_main(args.proc_client, args.proc_deadline, args.proc_seed)
    print("seed %d (TORTURE_SEED=%d repeats the fault schedule)" % (args.seed, args.seed))
    if selftest():
        print("%s: 0 passed, 1 failed" % suite_name(args))
        return 1
    sys.stdout.flush()
    run = Run(args)
    try:
        return run.run()
    except Exception as e:      # a run that could not start or end is a failure
        print("FAIL the run ended with %r" % e)
        print("%s: 0 passed, 1 failed" % suite_name(args))
        return 1
    finally:
        if run.cl:
            run.cl.stop()


def suite_name(args):
    if args.patroni and args.isolations:
        return "torture-isolation"
    return "torture-patroni" if args.patroni else "torture-ha" if args.ha else "torture"


if __name__ == "__main__":
    sys.exit(main())
