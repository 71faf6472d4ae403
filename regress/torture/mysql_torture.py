#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""Torture run for the dlock MariaDB plugin: many client processes, random
operations, random faults, and a fencing-checked guarded resource, on one
throwaway MariaDB (bench/mysql_server.sh, innodb_flush_log_at_trx_commit=1).

The plugin's lock manager runs inside mariadbd: one thread decides, writes
dlock.held / dlock.queue through one loopback connection ('dlock_store'),
answers after the commit, and ends a session's locks when its connection
ends.  Each client is a process with its own connection.  It loops over
random operations on a few hot and many cold names: blocking acquires with
timeouts, try-acquires, re-entrant acquires, the six DLM modes on some
names, paths ('/t/a/b' takes intentions on '/t' and '/t/a'), conversions
(dlock_convert, up and down), dlock_acquire_all() on 2-3 names, owner-keyed
leases that are renewed or left to expire, counting semaphores, leader
elections (dlock_campaign / dlock_proclaim / dlock_leader), kept places
(keep_place = 1 with an owner key and short timeouts, resumed by the next
call), two locks let go by dlock_release_all().  Inside every grant it
enters the guarded resource:

  * torture.active has one row per client and name inside a lock, with
    its token and mode; a client inserts its row, then looks at the rows
    of the same name and of its path's ancestors and descendants whose
    tokens are still in dlock.held: one whose mode conflicts with its own
    (path rules: a lock below takes an intention on every ancestor) while
    its own token is in dlock.held too is an exclusion violation;
  * torture.guard keeps, per name and mode, the largest token that entered
    in that mode (a path also enters its ancestors in the intention mode).
    A holder writes its token only if every conflicting mode's token is
    smaller (one UPDATE).  A holder that cannot is a violation (a token
    went backwards, or someone newer got in) unless it is a lease that is
    no longer in dlock.held (lost: counted);
  * semaphores: the permits of live holders never exceed the capacity;
    elections: the leader's term enters as an exclusive holder, and
    dlock_leader() shows its value while it leads, never after it resigned;
  * every grant is logged with the monotonic time it was seen; afterwards,
    per name (and ancestor), the tokens of session-owned grants in
    conflicting modes must grow in the order they were seen (across
    restarts and crashes too), and no token is handed out twice.

Faults, at random times: kill -9 of client processes (holding or waiting),
KILL QUERY and KILL of waiting connections, KILL and KILL QUERY of the lock
manager's store connection (idle or in the middle of a batch: the manager
rebuilds its picture from the tables and decides the waiting calls again),
max_statement_time on some statements, a clean server restart, and a kill
-9 of mariadbd followed by a restart.  Checked while it runs: the session
locks and queue rows of a killed connection are gone within 2 s; dlock.held
never shows two conflicting holders or a semaphore over its capacity; no
lease outlives its expiry by more than 1 s; after every restart, each
owner-keyed lease acknowledged before the server went down (and not
released) is still in dlock.held with its token, until its expiry or the
restart grace; a call the plugin reports killed or failed leaves no grant
it was not told of; every blocking call ends within its timeout plus
slack.  After the clients stop: no queue rows, no session-owned grants, no
lease past its expiry, and the server only crashed when killed.

HA mode (--ha): the same clients against a primary with a semi-synchronous
replica (scripts/mysql_ha.sh: AFTER_SYNC, GTID replication, the dlock plugin
on both), connecting to whichever node is the primary.  Faults: a failover
(kill -9 of the primary, promotion of the replica, the old primary rebuilt as
the new replica), kill -9 of the replica and its restart, SIGSTOP of the
replica for 1-3 s, and the light faults above on the primary.  Checked
besides: no grant is answered to a call sent while the replica was away
(killed or stopped) before it came back - the primary stalls, it does not
grant -, every owner-keyed lease acknowledged before a failover is held by
the promoted replica with its token, tokens still grow in grant order across
failovers, the failover time (the kill to the first grant on the new
primary).  --quick with --ha: 45 s with 24 clients, one failover and one of
each replica fault.  At the end the replica has applied the primary's whole
binary log and replicates on.

Network partitions (--ha --netns): both nodes and the clients in network
namespaces of their own (scripts/mysql_ha.sh --netns, prefix
MYSQL_TORTURE_NETNS, default dlmt-), the clients over TCP, a quarter of them
from namespace c2, the rest from c1; the harness keeps the unix sockets.
Faults besides: the primary cut from its replica for 3-8 s (no grant answered
meanwhile), c2 cut from the primary for 10 s (leases run out, their holders'
late writes fenced), and the primary cut from its replica and from c2 while
c1 still reaches it, the replica promoted without a fence, the old primary
fenced and rebuilt once healed (no grant answered from the cut until the
rebuilt replica is back).  --quick: 120 s, one of each HA fault.

Usage: mysql_torture.py [--quick] [--ha [--netns]] [--seconds S] [--clients N] [--port P]
Prints a table and "mysql-torture: N passed, M failed" ("mysql-torture-ha:"
in HA mode).
"""
import argparse
import collections
import datetime
import json
import multiprocessing as mp
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# what the run needs, installed when missing (Debian packages only)
subprocess.run([os.path.join(ROOT, "scripts", "deps.sh"), "python3-mysqldb", "mariadb-server",
                "libmariadb-dev", "libmariadbd-dev"], check=True, stdout=subprocess.DEVNULL)
import MySQLdb  # noqa: E402  (after deps.sh has installed it)
sys.path.insert(0, os.path.join(HERE, ".."))
import mylib  # noqa: E402
from checklib import Tally  # noqa: E402
from netnslib import netns  # noqa: E402
SERVER = os.path.join(ROOT, "bench", "mysql_server.sh")
HA_SCRIPT = os.path.join(ROOT, "scripts", "mysql_ha.sh")

# the DLM modes and their compatibility (core/dlock_core.c)
NL, CR, CW, PR, PW, EX = range(6)
MODES = ["NL", "CR", "CW", "PR", "PW", "EX"]
COMPAT = {NL: {NL, CR, CW, PR, PW, EX}, CR: {NL, CR, CW, PR, PW}, CW: {NL, CR, CW},
          PR: {NL, CR, PR}, PW: {NL, CR}, EX: {NL}}
CONFLICTS = dict((m, sorted(set(range(6)) - COMPAT[m])) for m in range(6))


def covers(a, b):
    """Mode a includes mode b (a conversion from a to b is down: same token)."""
    return set(CONFLICTS[b]) <= set(CONFLICTS[a])


def intention(m):
    """The mode a path lock takes on each ancestor (None for NL)."""
    return CR if m in (CR, PR) else CW if m in (CW, PW, EX) else None


def ancestors(name):
    if not name.startswith("/"):
        return []
    parts = name.split("/")[1:]
    return ["/" + "/".join(parts[:i]) for i in range(1, len(parts))]


def clash(n1, m1, n2, m2):
    """Whether a holder of n1 in m1 and another owner's holder of n2 in m2 conflict."""
    if n1 == n2:
        return m2 in CONFLICTS[m1]
    if n2 in ancestors(n1):
        i = intention(m1)
        return i is not None and m2 in CONFLICTS[i]
    if n1 in ancestors(n2):
        i = intention(m2)
        return i is not None and m1 in CONFLICTS[i]
    return False


HOT = ["hot/%d" % i for i in range(3)]
COLD = ["cold/%d" % i for i in range(200)]
DLM = ["dlm/0", "dlm/1"]                  # every DLM mode
PATHS = ["/t", "/t/a", "/t/b", "/t/a/b", "/t/a/c", "/t/b/d"]
PATH_WEIGHTS = [1, 3, 3, 4, 4, 4]
LEAVES = ["/t/a/b", "/t/a/c", "/t/b/d"]   # unrelated to each other
ELECT = ["elect/0", "elect/1"]
SEMS = [("sem/0", 3), ("sem/1", 2)]
GUARDED = HOT + COLD + DLM + PATHS + ELECT
LONG = 3                                  # long leases: long/<slot>/0..LONG-1

SLACK = 2.0          # a blocking call may overrun its timeout by this much: a KILL of the
                     # lock manager's connection stalls every call while it reconnects and reloads
SESSION_END = 2.0    # a killed connection's locks and queue rows are gone by then
LEASE_SLACK = 1.0    # no lease is in dlock.held this long past its expiry
WAIT_FOREVER = 10.0  # a wait without timeout on a cold name
STORE_STALL = 1.0    # the lock manager may stall this long after a KILL of its store connection

# errnos a client may see: its own statement killed (1317, 1927, 1969 for
# max_statement_time), the connection or server gone (2002, 2006, 2013,
# 1053), and, only while the server restarts, the lock manager stopping or
# starting (1105); in HA mode, while a failover runs, a replica refusing
# (1290: a client reached the old primary's node after it was rebuilt)
KILLED = (1317, 1927, 1969)
GONE = (2002, 2006, 2013, 1053)
REPLICA = 1290


def connect(sock, timeout=5):
    """sock: a unix socket path, or (host, port) - netns mode: over TCP from
    the client's namespace (the process is in it already).  FOUND_ROWS:
    an UPDATE answers the rows it matched."""
    if isinstance(sock, tuple):
        return mylib.connect_tcp(None, sock[0], sock[1], timeout, found_rows=True)
    return mylib.connect(sock, timeout, found_rows=True)


def text_of(v):
    return v.decode() if isinstance(v, (bytes, bytearray)) else v


def utc_seconds(text):
    """'YYYY-MM-DD HH:MM:SS.ffffff' (UTC, as dlock_renew answers) -> Unix seconds."""
    d = datetime.datetime.strptime(text_of(text), "%Y-%m-%d %H:%M:%S.%f")
    return d.replace(tzinfo=datetime.timezone.utc).timestamp()


class Shared:
    """What the client processes and the fault thread share."""

    def __init__(self, clients):
        self.connids = mp.Array("q", clients)    # each slot's connection id
        self.conngen = mp.Array("q", clients)    # ... and the server run it belongs to
        self.gen = mp.Value("q", 0)              # server runs started so far
        self.unstable = mp.Value("d", 0.0)       # monotonic: until then the server restarts
        self.fault_at = mp.Value("d", 0.0)       # monotonic: when the last such fault began
        self.store_kill_at = mp.Value("d", 0.0)  # monotonic: the last KILL of the lock store connection
        self.primary = mp.Value("i", 0)          # HA: the primary's node


class Client:
    """One client process: runs until the deadline, logs to its own file."""

    OPS = [("acquire", 28), ("try", 10), ("lease", 13), ("long_lease", 4), ("forever", 4),
           ("two", 5), ("convert", 7), ("all", 7), ("semaphore", 8), ("election", 7),
           ("kept", 7)]

    def __init__(self, slot, sock, deadline, logpath, shared):
        self.slot = slot
        self.sock_of = sock   # a socket path, or HA: one per node
        self.sent = 0.0       # monotonic: when the last statement was sent
        self.deadline = deadline
        self.log = open(logpath, "a", buffering=1)
        self.shared = shared
        self.rng = random.Random(os.getpid() * 7919 + int(time.time() * 1000))
        self.conn = None
        self.other = None     # a second connection, for owner keys
        self.me = None        # (conn_id, session_start) of this session
        self.holding = set()  # names this session believes it holds
        self.keyed = set()    # (key, name) of leases this client believes it holds
        self.op = None
        self.key = None       # the owner key of the current operation
        self.trail = []       # the last statements, for reports
        self.worst = 0.0      # the largest overrun of a timeout so far
        self.ops = [o for o, _ in self.OPS]
        self.weights = [w for _, w in self.OPS]

    # -- logging ------------------------------------------------------------
    def emit(self, **kw):
        self.log.write(json.dumps(kw) + "\n")

    def count(self, what):
        self.emit(k="c", w=what)

    def violation(self, text):
        self.emit(k="v", w=text)

    def granted(self, name, token, mode, leased):
        # s: when the call that got it was sent (HA: none while the replica is away)
        self.emit(k="g", n=name, t=token, m=mode, l=leased, c=self.slot, at=time.monotonic(),
                  s=self.sent)

    @property
    def sock(self):
        if isinstance(self.sock_of, str):
            return self.sock_of
        return self.sock_of[self.shared.primary.value]

    def lease_ack(self, key, name, token, expiry):
        """An owner-keyed lease acknowledged: it lasts at least until expiry (Unix s)."""
        self.keyed.add((key, name))
        self.emit(k="L", o=key, n=name, t=token, x=expiry, at=time.time())

    def lease_end(self, key, name):
        """Logged before a call that may end the lease."""
        self.keyed.discard((key, name))
        self.emit(k="E", o=key, n=name, at=time.time())

    # -- statements ---------------------------------------------------------
    def q(self, sql, args=()):
        cur = self.conn.cursor()
        self.trail.append("%.3f %s %r" % (time.time() % 1000, sql[:40], args[:2]))
        del self.trail[:-16]
        self.sent = time.monotonic()
        try:
            cur.execute(sql, args)
            return cur.fetchall()
        finally:
            cur.close()

    def one_value(self, sql, args=()):
        return self.q(sql, args)[0][0]

    def affected(self, sql, args=()):
        cur = self.conn.cursor()
        try:
            return cur.execute(sql, args)
        finally:
            cur.close()

    def restarting(self):
        return time.monotonic() < self.shared.unstable.value

    def timed(self, timeout, sql, args):
        started = time.monotonic()
        unstable = self.restarting()
        try:
            return self.one_value(sql, args)
        finally:
            took = time.monotonic() - started
            # a call that overlapped a server fault is excused (it may have
            # waited for a replica, or for a cut link to heal)
            if (timeout is not None and not unstable and not self.restarting()
                    and self.shared.fault_at.value < started):
                if took - timeout > self.worst:
                    self.worst = took - timeout
                    self.emit(k="w", d=self.worst)
                if took > timeout + SLACK:
                    self.violation("a call with timeout %.2fs took %.2fs: %s %r"
                                   % (timeout, took, sql, args))

    def live(self, token):
        return self.one_value("SELECT COUNT(*) FROM dlock.held WHERE token = %s", (token,)) > 0

    def mode_sql(self, m):
        if m == PR:
            return self.rng.choice(["shared", "PR", "pr"])
        if m == EX:
            return self.rng.choice(["exclusive", "EX"])
        return MODES[m]

    def reconnect(self):
        for c in (self.conn, self.other):
            if c is not None:
                try:
                    c.close()
                except MySQLdb.Error:
                    pass
        self.conn = self.other = None
        gen = self.shared.gen.value      # read before connecting (see Torture.faults)
        self.conn = connect(self.sock)
        self.holding = set()
        self.shared.connids[self.slot] = self.conn.thread_id()
        self.shared.conngen[self.slot] = gen
        # this session's identity in dlock.held (connection ids start again
        # after a server restart; the run is in session_start)
        probe = "probe/%d" % self.slot
        try:
            self.q("SELECT dlock_acquire(%s, 5)", (probe,))
            self.me = self.q("SELECT conn_id, session_start FROM dlock.held WHERE name = %s"
                             " AND owner IS NULL AND conn_id = CONNECTION_ID()", (probe,))[0]
            self.q("SELECT dlock_release(%s)", (probe,))
            self.q("DELETE FROM torture.active WHERE client = %s", (self.slot,))
        except MySQLdb.Error:
            self.conn.close()
            self.conn = None
            raise

    def session_rows(self):
        return self.q("SELECT name, token, `count` FROM dlock.held WHERE owner IS NULL"
                      " AND conn_id = %s AND session_start = %s AND NOT implied", self.me)

    # -- the guarded resource -----------------------------------------------
    def enter(self, name, token, mode, leased):
        """Exclusion and fencing checks for a grant of name in mode."""
        self.q("REPLACE INTO torture.active VALUES (%s, %s, %s, %s, NULL)",
               (self.slot, name, token, mode))
        family = [name] + ancestors(name)
        sql = ("SELECT a.client, a.name, a.token, a.mode FROM torture.active a"
               " JOIN dlock.held h ON h.token = a.token WHERE a.name IN (%s)"
               % ", ".join(["%s"] * len(family)))
        args = list(family)
        if name.startswith("/"):
            sql += " OR a.name LIKE %s"
            args.append(name + "/%")
        rows = self.q(sql, args)
        mine = any(r[0] == self.slot and r[2] == token for r in rows)
        if not mine:
            if not leased:
                self.violation("client %d's session grant of %s (token %d) is not in dlock.held"
                               % (self.slot, name, token))
            else:
                self.count("lease lost before entering")
            return
        for client, other, otoken, omode in rows:
            other = text_of(other)
            if client != self.slot and clash(name, mode, other, omode):
                self.violation("exclusion: client %d (token %d, %s) entered %s while client %d"
                               " (token %d, %s on %s) was inside; both in dlock.held"
                               % (self.slot, token, MODES[mode], name, client, otoken,
                                  MODES[omode], other))
        # fencing: on the name in its mode, on each ancestor in the intention
        parts = [(name, mode)]
        if intention(mode) is not None:
            parts += [(a, intention(mode)) for a in ancestors(name)]
        for n, m in parts:
            cond = "".join(" AND t%d < %d" % (c, token) for c in CONFLICTS[m])
            got = self.affected("UPDATE torture.guard SET t%d = GREATEST(t%d, %%s)"
                                " WHERE name = %%s%s" % (m, m, cond), (token, n))
            if got == 1:
                continue
            if leased and not self.live(token):
                self.count("fencing rejections (lease lost)")
                continue
            row = self.q("SELECT t0, t1, t2, t3, t4, t5 FROM torture.guard WHERE name = %s", (n,))
            self.violation("fencing: client %d's token %d (%s on %s, %s) is not above the"
                           " conflicting tokens on %s: %s"
                           % (self.slot, token, MODES[mode], name,
                              "lease" if leased else "session", n, row))
        hold = self.rng.choice([0, 0, 0.001, 0.003, 0.01])
        if hold:
            time.sleep(hold)

    def enter_sem(self, name, capacity, token, permits, leased):
        self.q("REPLACE INTO torture.active VALUES (%s, %s, %s, 0, %s)",
               (self.slot, name, token, permits))
        rows = self.q("SELECT a.client, a.token, a.permits FROM torture.active a"
                      " JOIN dlock.held h ON h.token = a.token WHERE a.name = %s", (name,))
        total = sum(r[2] for r in rows)
        if total > capacity:
            self.violation("semaphore %s: clients hold %d permits of %d: %s"
                           % (name, total, capacity, rows))
        stored, cap = self.q("SELECT IFNULL(SUM(permits), 0), MAX(capacity) FROM dlock.held"
                             " WHERE name = %s", (name,))[0]
        if stored > capacity or (cap is not None and cap != capacity):
            self.violation("semaphore %s: dlock.held has %s permits, capacity %s (of %d)"
                           % (name, stored, cap, capacity))
        if not any(r[0] == self.slot and r[1] == token for r in rows):
            if leased:
                self.count("lease lost before entering")
            else:
                self.violation("client %d's semaphore grant of %s (token %d) is not in dlock.held"
                               % (self.slot, name, token))
        hold = self.rng.choice([0, 0.001, 0.003, 0.01])
        if hold:
            time.sleep(hold)

    def leave(self):
        self.q("DELETE FROM torture.active WHERE client = %s", (self.slot,))

    def release(self, name, key=None):
        if key is not None:
            self.lease_end(key, name)
            return self.one_value("SELECT dlock_release(%s, %s)", (name, key))
        if self.one_value("SELECT dlock_release(%s)", (name,)) != 1:
            self.violation("release of held %s answered 0" % name)
        self.holding.discard(name)
        return 1

    def new_key(self):
        self.key = "c%d-%x" % (self.slot, self.rng.getrandbits(48))
        return self.key

    # -- names and modes ----------------------------------------------------
    def pick(self, kinds=("flat", "dlm", "path")):
        rng = self.rng
        r = rng.random()
        kind = "flat" if r < 0.6 else "dlm" if r < 0.8 else "path"
        if kind not in kinds:
            kind = kinds[0]
        if kind == "flat":
            name = rng.choice(HOT) if rng.random() < 0.7 else rng.choice(COLD)
            return name, PR if rng.random() < 0.25 else EX
        if kind == "dlm":
            return rng.choice(DLM), rng.choices(range(6), [1, 2, 2, 3, 2, 3])[0]
        return (rng.choices(PATHS, PATH_WEIGHTS)[0],
                rng.choices(range(6), [0, 1, 1, 3, 1, 4])[0])

    # -- operations ---------------------------------------------------------
    def op_acquire(self):
        rng = self.rng
        name, mode = self.pick()
        timeout = rng.choice([0.05, 0.2, 1.0, 3.0])
        t = self.timed(timeout, "SELECT dlock_acquire(%s, %s, NULL, %s)",
                       (name, timeout, self.mode_sql(mode)))
        if t is None:
            self.count("acquire timed out")
            return
        self.count("acquire granted")
        self.holding.add(name)
        self.granted(name, t, mode, False)
        self.enter(name, t, mode, False)
        if rng.random() < 0.2:
            weaker = rng.choice([m for m in range(6) if covers(mode, m)])
            started = time.monotonic()
            unstable = self.restarting()
            t2 = self.one_value("SELECT dlock_acquire(%s, 5, NULL, %s)",
                                (name, self.mode_sql(weaker)))
            if t2 is None and (unstable or self.restarting() or
                               self.shared.fault_at.value >= started):
                # its row waited for a replica's acknowledgement that a fault
                # kept away (HA): timed out, not granted; the first hold stays
                self.count("re-entrant timed out during a fault")
            else:
                if t2 != t:
                    self.violation("re-entrant acquire of %s (%s, held %s) gave token %s, not %s"
                                   % (name, MODES[weaker], MODES[mode], t2, t))
                if self.one_value("SELECT dlock_release(%s)", (name,)) != 1:
                    self.violation("re-entrant release of %s answered 0" % name)
                self.count("re-entrant")
        self.leave()
        self.release(name)

    def op_try(self):
        name, mode = self.pick()
        t = self.one_value("SELECT dlock_try_acquire(%s, NULL, %s)", (name, self.mode_sql(mode)))
        if t is None:
            self.count("try refused")
            return
        self.count("try granted")
        self.holding.add(name)
        self.granted(name, t, mode, False)
        self.enter(name, t, mode, False)
        self.leave()
        self.release(name)

    def op_lease(self):
        rng = self.rng
        name, mode = self.pick()
        key = self.new_key()
        ttl = rng.choice([0.3, 0.6, 2.0])
        started = time.time()
        t = self.timed(1.0, "SELECT dlock_acquire(%s, 1, %s, %s, %s)",
                       (name, ttl, self.mode_sql(mode), key))
        if t is None:
            self.count("lease timed out")
            return
        self.lease_ack(key, name, t, started + ttl)
        self.count("lease granted")
        self.granted(name, t, mode, True)
        self.enter(name, t, mode, True)
        if rng.random() < 0.5:
            try:
                expiry = self.one_value("SELECT dlock_renew(%s, %s, %s)", (name, ttl, key))
                self.lease_ack(key, name, t, utc_seconds(expiry))
                self.count("lease renewed")
            except MySQLdb.OperationalError as e:
                if e.args[0] != 1105 or "[DL001]" not in str(e.args[1]):
                    raise
                self.lease_end(key, name)
                self.count("renew of a lost lease (DL001)")
        self.leave()
        if rng.random() < 0.2:
            self.count("lease left to expire")
            return
        if rng.random() < 0.4:
            # an owner key is released from any connection
            if self.other is None:
                self.other = connect(self.sock)
            self.lease_end(key, name)
            cur = self.other.cursor()
            cur.execute("SELECT dlock_release(%s, %s)", (name, key))
            released = cur.fetchall()[0][0]
            cur.close()
            self.count("lease released from another connection")
        else:
            released = self.release(name, key)
        if released != 1:
            self.count("release of an expired lease (0)")

    def op_long_lease(self):
        """Leases of a few seconds on the client's own names, often left to
        run out: the ones a restart or a crash must keep."""
        rng = self.rng
        name = "long/%d/%d" % (self.slot, rng.randrange(LONG))
        key = self.new_key()
        ttl = rng.choice([3.0, 6.0, 10.0])
        started = time.time()
        t = self.timed(0.2, "SELECT dlock_acquire(%s, 0.2, %s, 'exclusive', %s)",
                       (name, ttl, key))
        if t is None:
            self.count("long lease timed out (an earlier one runs)")
            return
        until = started + ttl       # the lease lasts at least this long (Unix s)
        self.lease_ack(key, name, t, until)
        self.count("long lease granted")
        self.granted(name, t, EX, True)
        self.enter(name, t, EX, True)
        self.leave()
        if rng.random() < 0.3:
            until = utc_seconds(self.one_value("SELECT dlock_renew(%s, %s, %s)", (name, ttl, key)))
            self.lease_ack(key, name, t, until)
        if rng.random() < 0.6:
            self.count("long lease left to expire")
            return
        sent = time.time()
        if self.release(name, key) == 1:
            return
        # a grant or renewal answered late (its commit waited out a failover
        # or a cut replica) can acknowledge a lease that has run out by then:
        # only a release sent before the acknowledged expiry must find it
        if sent < until - 0.05:
            self.violation("release of long lease %s (token %d) answered 0, sent %.3f s before"
                           " its acknowledged expiry" % (name, t, until - sent))
        else:
            self.count("release of a long lease sent after its expiry (0)")

    def op_forever(self):
        # no timeout: only a grant or a kill ends it; cold names are never
        # held long, so a wait that lasts is a lost wake-up
        name = self.rng.choice(COLD)
        mode = PR if self.rng.random() < 0.25 else EX
        started = time.monotonic()
        unstable = self.restarting()
        t = self.one_value("SELECT dlock_acquire(%s, NULL, NULL, %s)", (name, self.mode_sql(mode)))
        took = time.monotonic() - started
        # (excused when it overlapped a server fault, as timed() does: one
        # that began during a failover waits for its end)
        if (took > WAIT_FOREVER and not unstable and not self.restarting()
                and self.shared.fault_at.value < started):
            self.violation("a wait without timeout for %s took %.1fs (sent %.1f s after the"
                           " last fault began)" % (name, took, started - self.shared.fault_at.value))
        self.count("acquire without timeout granted")
        self.holding.add(name)
        self.granted(name, t, mode, False)
        self.enter(name, t, mode, False)
        self.leave()
        self.release(name)

    def op_two(self):
        a, b = self.rng.sample(COLD, 2)
        ta = self.timed(1.0, "SELECT dlock_acquire(%s, 1)", (a,))
        if ta is None:
            self.count("acquire timed out")
            return
        self.holding.add(a)
        self.granted(a, ta, EX, False)
        tb = self.one_value("SELECT dlock_try_acquire(%s)", (b,))
        held = 1
        if tb is not None:
            self.holding.add(b)
            self.granted(b, tb, EX, False)
            held = 2
        n = self.one_value("SELECT dlock_release_all()")
        self.holding.clear()
        if n != held:
            self.violation("dlock_release_all() ended %s locks, not %d" % (n, held))
        self.count("release_all")

    def op_convert(self):
        rng = self.rng
        name, m1 = self.pick(("dlm", "path", "flat") if rng.random() < 0.5 else ("flat",))
        m2 = rng.choice([m for m in range(6) if m != m1])
        timeout = rng.choice([0.05, 0.3, 1.0])
        t = self.timed(timeout, "SELECT dlock_acquire(%s, %s, NULL, %s)",
                       (name, timeout, self.mode_sql(m1)))
        if t is None:
            self.count("acquire timed out")
            return
        self.holding.add(name)
        self.granted(name, t, m1, False)
        self.enter(name, t, m1, False)
        down = covers(m1, m2)
        if down:
            # claim the weaker mode first: others may come in at once
            self.q("UPDATE torture.active SET mode = %s WHERE client = %s AND name = %s",
                   (m2, self.slot, name))
        timeout = rng.choice([0.05, 0.3, 1.0])
        started, unstable = time.monotonic(), self.restarting()
        try:
            tc = self.timed(timeout, "SELECT dlock_convert(%s, %s, %s)",
                            (name, self.mode_sql(m2), timeout))
        except MySQLdb.OperationalError as e:
            if e.args[0] != 1213 or down:
                raise
            # two holders converting up wait for each other: one is told
            self.count("convert deadlock detected (1213)")
            tc = False
        what = "%s of %s from %s to %s" % ("down" if down else "up", name, MODES[m1], MODES[m2])
        if tc is None:
            # a down-conversion never waits for a holder, but its answer
            # waits for the replica's ack: excused when it overlapped a
            # server fault, as timed() excuses a late call
            if down and (unstable or self.restarting() or self.shared.fault_at.value >= started or
                         self.shared.store_kill_at.value >= started - STORE_STALL or
                         timeout < 0.3):
                # (a KILL of the lock store connection stalls the lock
                # manager while it reconnects, and on a loaded machine a
                # 50 ms timeout can pass in a stall of the scheduler)
                self.count("convert down held back by a fault or a stall")
            elif down:
                self.violation("a down-conversion timed out: " + what)
            else:
                self.count("convert up timed out")
        elif tc is False:
            pass
        elif tc == t:
            if not down:
                self.violation("an up-conversion kept its token %d: %s" % (t, what))
            self.count("convert down (same token)")
        else:
            if down:
                self.violation("a down-conversion changed the token %d to %s: %s" % (t, tc, what))
            self.count("convert up (new token)")
            self.granted(name, tc, m2, False)
            self.enter(name, tc, m2, False)
        self.leave()
        self.release(name)

    def op_all(self):
        rng = self.rng
        k = rng.choice([2, 2, 3])
        names = rng.sample(HOT + COLD[:20] + DLM + LEAVES, k)
        mode = rng.choice([EX, EX, PR, PR, CW, PW])
        timeout = rng.choice([0.1, 0.5, 2.0])
        r = self.timed(timeout, "SELECT dlock_acquire_all(%s, %s, NULL, %s)",
                       (json.dumps(names), timeout, self.mode_sql(mode)))
        if r is None:
            self.count("acquire_all timed out")
            return
        tokens = json.loads(text_of(r))
        if len(tokens) != k or len(set(tokens)) != k:
            self.violation("dlock_acquire_all(%s) answered %s" % (names, tokens))
        self.holding.update(names)
        for n, t in zip(names, tokens):
            self.granted(n, t, mode, False)
        for n, t in zip(names, tokens):
            self.enter(n, t, mode, False)
        self.count("acquire_all granted")
        self.leave()
        if rng.random() < 0.5:
            n = self.one_value("SELECT dlock_release_all()")
            self.holding.clear()
            if n != k:
                self.violation("dlock_release_all() after dlock_acquire_all(%s) ended %s, not %d"
                               % (names, n, k))
        else:
            for n in names:
                self.release(n)

    def op_semaphore(self):
        rng = self.rng
        name, cap = rng.choice(SEMS)
        permits = 1 if rng.random() < 0.7 else rng.randint(1, cap)
        keyed = rng.random() < 0.3
        key = self.new_key() if keyed else None
        ttl = rng.choice([0.5, 2.0]) if keyed else None
        started = time.time()
        if rng.random() < 0.3:
            t = self.one_value("SELECT dlock_try_semaphore(%s, %s, %s, %s, %s)",
                               (name, cap, permits, ttl, key))
            if t is None:
                self.count("semaphore try refused")
                return
        else:
            timeout = rng.choice([0.05, 0.3, 1.0])
            t = self.timed(timeout, "SELECT dlock_semaphore(%s, %s, %s, %s, %s, %s)",
                           (name, cap, permits, timeout, ttl, key))
            if t is None:
                self.count("semaphore timed out")
                return
        self.count("semaphore granted")
        self.granted(name, t, NL, keyed)    # NL: in no order check, but tokens are unique
        if keyed:
            self.lease_ack(key, name, t, started + ttl)
        else:
            self.holding.add(name)
        self.enter_sem(name, cap, t, permits, keyed)
        avail = self.one_value("SELECT dlock_semaphore_available(%s)", (name,))
        if keyed and not self.live(t):
            # its lease ran out meanwhile (a commit that waited for the
            # replica, a cut link): the count no longer includes it
            self.count("semaphore lease ran out before the count")
        elif avail is None or avail < 0 or avail > cap or (not keyed and avail > cap - permits):
            self.violation("dlock_semaphore_available(%s) = %s while client %d holds %d of %d"
                           % (name, avail, self.slot, permits, cap))
        self.leave()
        if self.release(name, key) != 1:
            self.count("release of an expired lease (0)")

    def op_election(self):
        rng = self.rng
        name = rng.choice(ELECT)
        if rng.random() < 0.1:
            try:
                r = self.one_value("SELECT dlock_proclaim(%s, 'usurper', %s)",
                                   (name, self.new_key()))
                self.violation("dlock_proclaim(%s) by an owner key that never campaigned"
                               " answered %s" % (name, r))
            except MySQLdb.OperationalError as e:
                if e.args[0] != 1105 or "[DL001]" not in str(e.args[1]):
                    raise
                self.count("proclaim by a non-leader refused (DL001)")
            return
        keyed = rng.random() < 0.35
        key = self.new_key() if keyed else None
        ttl = rng.choice([0.6, 2.0]) if keyed else None
        value = "v%d-%x" % (self.slot, rng.getrandbits(32))
        timeout = rng.choice([0.1, 0.5, 2.0])
        started = time.time()
        t = self.timed(timeout, "SELECT dlock_campaign(%s, %s, %s, %s, %s)",
                       (name, value, timeout, ttl, key))
        if t is None:
            self.count("campaign timed out")
            return
        self.count("campaign won")
        if keyed:
            self.lease_ack(key, name, t, started + ttl)
        else:
            self.holding.add(name)
        self.granted(name, t, EX, keyed)
        self.enter(name, t, EX, keyed)
        lead = text_of(self.one_value("SELECT dlock_leader(%s)", (name,)))
        if lead != value and (not keyed or self.live(t)):
            self.violation("dlock_leader(%s) = %r while client %d leads with %r (term %d)"
                           % (name, lead, self.slot, value, t))
        if rng.random() < 0.5:
            v2 = value + "p"
            try:
                tp = self.one_value("SELECT dlock_proclaim(%s, %s, %s)", (name, v2, key))
                if tp != t:
                    self.violation("dlock_proclaim(%s) answered term %s, not %d" % (name, tp, t))
                lead = text_of(self.one_value("SELECT dlock_leader(%s)", (name,)))
                if lead != v2 and (not keyed or self.live(t)):
                    self.violation("dlock_leader(%s) = %r after client %d proclaimed %r (term %d)"
                                   % (name, lead, self.slot, v2, t))
                value = v2
                self.count("proclaimed")
            except MySQLdb.OperationalError as e:
                if e.args[0] != 1105 or "[DL001]" not in str(e.args[1]) or not keyed:
                    raise
                self.count("proclaim after a lost lease (DL001)")
        if self.one_value("SELECT dlock_check(%s, %s)", (name, t)) != 1 and (
                not keyed or self.live(t)):
            self.violation("dlock_check(%s, %d) = 0 while client %d leads" % (name, t, self.slot))
        self.leave()
        if self.release(name, key) != 1:
            self.count("release of an expired lease (0)")
        lead = text_of(self.one_value("SELECT dlock_leader(%s)", (name,)))
        if lead == value:
            self.violation("dlock_leader(%s) still shows %r after client %d resigned (term %d)"
                           % (name, value, self.slot, t))

    def op_kept(self):
        rng = self.rng
        name, mode = self.pick(("flat", "dlm"))
        key = self.new_key()
        ttl = 1.5
        ticket = seen = None
        first = time.time()
        t = None
        calls = 0
        while calls < 8:
            timeout = rng.choice([0.05, 0.1, 0.2])
            t = self.timed(timeout, "SELECT dlock_acquire(%s, %s, %s, %s, %s, 1)",
                           (name, timeout, ttl, self.mode_sql(mode), key))
            calls += 1
            if t is not None:
                break
            self.count("kept place: a call returned NULL")
            rows = self.q("SELECT ticket FROM dlock.queue WHERE owner = %s AND name = %s"
                          " AND NOT implied", (key, name))
            if rows:
                # (a stall of the lock manager - HA: the replica away - may
                # outlast the place's lease)
                if ticket is not None and rows[0][0] != ticket and \
                        time.monotonic() - seen < ttl - 0.3 and not self.restarting():
                    self.violation("kept place of %s changed its ticket from %d to %d"
                                   % (name, ticket, rows[0][0]))
                ticket, seen = rows[0][0], time.monotonic()
            time.sleep(rng.choice([0, 0.01, 0.05]))
        if t is None:
            self.lease_end(key, name)
            self.one_value("SELECT dlock_release_all(%s)", (key,))
            left = self.one_value("SELECT (SELECT COUNT(*) FROM dlock.held WHERE owner = %s) +"
                                  " (SELECT COUNT(*) FROM dlock.queue WHERE owner = %s)",
                                  (key, key))
            if left:
                self.violation("dlock_release_all(owner) left %d rows of a kept place of %s"
                               % (left, name))
            self.count("kept place given up")
            return
        self.count("kept place granted (%s call)" % ("first" if calls == 1 else "a later"))
        self.lease_ack(key, name, t, first + ttl)
        self.granted(name, t, mode, True)
        self.enter(name, t, mode, True)
        self.leave()
        if self.release(name, key) != 1:
            self.count("release of an expired lease (0)")

    def one(self):
        self.op = self.rng.choices(self.ops, self.weights)[0]
        self.key = None
        getattr(self, "op_" + self.op)()
        if self.rng.random() < 0.15:
            # every operation gives back what it took
            rows = self.session_rows()
            if rows:
                self.violation("after %s client %d's session still holds %s%s"
                               % (self.op, self.slot, rows, self.picture_of(rows)))

    def picture_of(self, rows):
        """What the lock manager's picture says of stray rows of dlock.held
        (a row the picture lacks could never be released)."""
        try:
            return "; the lock manager: %s" % ", ".join(
                "%s token %d %s" % (text_of(r[0]), r[1],
                                    "live" if self.one_value("SELECT dlock_check(%s, %s)",
                                                             (r[0], r[1])) else "not live")
                for r in rows)
        except MySQLdb.Error as e:
            return "; the lock manager not asked: %s" % (e,)

    # -- errors -------------------------------------------------------------
    def after_failure(self, text, why):
        """A call the plugin reports killed (or failed) left no grant the
        session does not know of.  A kill the server reports after the
        function returned (its own message) can cost the session a grant it
        never saw: counted, and the error handler's dlock_release_all() gives
        it back."""
        if self.conn is None:
            return
        try:
            self.q("SET max_statement_time = 0")
            rows = self.session_rows()
            keyed = []
            if self.key is not None and self.op != "kept":
                keyed = self.q("SELECT name, token FROM dlock.held WHERE owner = %s"
                               " AND NOT implied", (self.key,))
        except MySQLdb.Error:
            return
        held = dict((text_of(r[0]), r[1:]) for r in rows)
        unknown = sorted(set(held) - self.holding)
        unknown += ["%s (owner key)" % text_of(r[0]) for r in keyed
                    if (self.key, text_of(r[0])) not in self.keyed]
        for name in unknown:
            if text.startswith("dlock_"):
                self.violation("a %s call left client %d holding %s (%s%s): %s; last statements %s"
                               % (why, self.slot, name, held.get(name),
                                  self.picture_of([(name,) + tuple(held[name])]) if name in held
                                  else "", text, self.trail))
            else:
                self.count("grant kept after a kill the server reported late")

    def cleanup(self):
        self.q("SET max_statement_time = 0")
        self.q("DELETE FROM torture.active WHERE client = %s", (self.slot,))
        if self.key is not None:
            for key, name in list(self.keyed):
                if key == self.key:
                    self.lease_end(key, name)
            self.emit(k="E", o=self.key, n="*", at=time.time())
            self.q("SELECT dlock_release_all(%s)", (self.key,))
        self.q("SELECT dlock_release_all()")
        self.holding.clear()

    def run(self):
        while time.monotonic() < self.deadline:
            try:
                if self.conn is None:
                    self.reconnect()
                limit = self.rng.choice([0.02, 0.1]) if self.rng.random() < 0.05 else 0
                self.q("SET max_statement_time = %s", (limit,))
                self.one()
                self.count("operations")
            except MySQLdb.Error as e:
                code = e.args[0] if e.args else None
                text = str(e.args[1]) if len(e.args) > 1 else str(e)
                if code in KILLED:
                    self.count("killed (%d)" % code)
                    self.after_failure(text, "killed")
                elif code in GONE or (code in (1105, REPLICA) and self.restarting()):
                    self.count("connection lost" if self.conn is not None
                               else "reconnect failed (server down)")
                    self.conn = self.other = None
                    time.sleep(0.2)
                elif code == 1105 and "lock store" in text:
                    self.count("plugin error: lock store (allowed)")
                    self.after_failure(text, "failed (lock store)")
                else:
                    self.violation("unexpected error %s in %s: %s" % (code, self.op, text))
                    if text.startswith("dlock_"):
                        self.after_failure(text, "failed (%s)" % code)
                try:
                    if self.conn is not None:
                        self.cleanup()
                except MySQLdb.Error:
                    self.conn = None
            except Exception:
                self.violation("client %d: %s" % (self.slot, traceback.format_exc()))
                self.conn = None
                time.sleep(0.1)
        try:
            if self.conn is not None:
                self.q("DELETE FROM torture.active WHERE client = %s", (self.slot,))
                self.q("SELECT dlock_release_all()")
                self.conn.close()
        except MySQLdb.Error:
            pass
        self.emit(k="done")


def client_process(slot, sock, deadline, logpath, shared, ns=None):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if ns:
        # this process's one thread lives in the client's namespace
        netns(ns).__enter__()
    Client(slot, sock, deadline, logpath, shared).run()


class Torture:
    def __init__(self, args):
        self.args = args
        self.dir = tempfile.mkdtemp(prefix="dlock-mytorture.")
        self.ha = args.ha
        # HA: node N's socket in DIR/nN (scripts/mysql_ha.sh), the clients
        # follow the primary
        self.socks = [os.path.join(self.dir, "n%d" % n, "sock") for n in (0, 1)]
        # netns mode: the clients reach node N at endpoints[N] from their
        # namespaces, a quarter of them from c2 (the one a client cut takes)
        self.netns = args.netns
        self.endpoints = None
        self.stats = collections.Counter()
        self.kills_of_server = 0
        self.procs = {}      # slot -> (process, logpath)
        self.logs = []
        self.shared = Shared(args.clients)
        self.grace = 5.0
        # findings of the fault thread
        self.session_bad = []
        self.session_ends = []      # seconds from a kill to its locks gone
        self.snapshot_bad = []
        self.snapshots = 0
        self.late_bad = []
        self.worst_late = 0.0
        self.lease_bad = []
        self.leases_checked = 0
        self.harness_bad = []
        self.rechecks = []
        # HA: (monotonic kill of the primary) per failover; (gone, back, what)
        # per time the primary had no replica
        self.failovers = []
        self.outages = []
        self.replica_faults = 0
        self.failover_steps = []

    @property
    def sock(self):
        return self.socks[self.shared.primary.value] if self.ha else os.path.join(self.dir, "sock")

    def server(self, *cmd, refusal_ok=False):
        """Run bench/mysql_server.sh or scripts/mysql_ha.sh; its output.  With
        refusal_ok, None when it refused (exit 3: a promotion of a replica
        not in step)."""
        script = HA_SCRIPT if self.ha else SERVER
        r = subprocess.run([script, cmd[0], self.dir] + [str(c) for c in cmd[1:]],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if refusal_ok and r.returncode == 3:
            return None
        if r.returncode != 0:
            raise RuntimeError("%s %s failed: %s%s" % (os.path.basename(script), cmd[0],
                                                       r.stdout, r.stderr))
        return r.stdout

    def addr(self, name):
        return self.server("addr", name).strip()

    def spawn(self, slot, deadline):
        logpath = os.path.join(self.dir, "client-%d-%d.log" % (slot, len(self.logs)))
        self.logs.append(logpath)
        ns = None
        if self.netns:
            ns = NETNS_PREFIX + self.client_ns(slot)
        p = mp.Process(target=client_process,
                       args=(slot, self.endpoints or (self.socks if self.ha else self.sock),
                             deadline, logpath, self.shared, ns), daemon=True)
        p.start()
        self.procs[slot] = (p, logpath)

    @staticmethod
    def client_ns(slot):
        return "c2" if slot % 4 == 3 else "c1"

    def admin(self):
        # a restart on a busy machine may take a while: a minute, then give up
        last = None
        for _ in range(600):
            try:
                return connect(self.sock)
            except MySQLdb.Error as e:
                last = e
                time.sleep(0.1)
        raise RuntimeError("cannot connect to the server: %s" % (last,))

    def unstable(self):
        return time.monotonic() < self.shared.unstable.value

    def begin_fault(self):
        """A server fault begins: calls that overlap it may outlast their
        timeouts (the server is down, or waits for its replica)."""
        self.shared.fault_at.value = time.monotonic()
        self.shared.unstable.value = float("inf")

    # -- checks while it runs -----------------------------------------------
    def await_session_end(self, cur, conn_id, what):
        """The session locks and the queue rows of a killed connection go at once."""
        started = time.monotonic()
        while True:
            cur.execute("SELECT (SELECT COUNT(*) FROM dlock.held WHERE conn_id = %s AND owner IS NULL)"
                        " + (SELECT COUNT(*) FROM dlock.queue WHERE conn_id = %s"
                        " AND kept_until_us IS NULL)", (conn_id, conn_id))
            left = cur.fetchone()[0]
            took = time.monotonic() - started
            if left == 0:
                self.session_ends.append(took)
                return
            if took > SESSION_END:
                cur.execute("SELECT 'held', name, token, mode FROM dlock.held WHERE conn_id = %s"
                            " AND owner IS NULL UNION ALL SELECT 'queue', name, ticket, mode"
                            " FROM dlock.queue WHERE conn_id = %s AND kept_until_us IS NULL",
                            (conn_id, conn_id))
                self.session_bad.append("%s: connection %d still has %s after %.1f s"
                                        % (what, conn_id, cur.fetchall()[:5], took))
                return
            time.sleep(0.02)

    def snapshot(self, cur):
        """dlock.held as the store shows it: no two owners in conflicting
        modes on one name, no semaphore over capacity, no lease left long
        past its expiry."""
        cur.execute("SELECT name, owner, conn_id, session_start, mode, implied, capacity,"
                    " permits, expires_us, token, FLOOR(UNIX_TIMESTAMP(NOW(6)) * 1000000)"
                    " FROM dlock.held")
        rows = cur.fetchall()
        self.snapshots += 1
        by_name = collections.defaultdict(list)
        now = None
        for name, owner, conn_id, start, mode, implied, cap, permits, exp, token, now in rows:
            who = ("key", owner) if owner is not None else ("session", conn_id, start)
            by_name[name].append((who, mode, cap, permits, token))
            if exp is not None and not self.unstable():
                late = (int(now) - exp) / 1e6
                self.worst_late = max(self.worst_late, late)
                if late > LEASE_SLACK:
                    self.late_bad.append("%s token %d (owner %s): %.2f s past its expiry"
                                         % (text_of(name), token, text_of(owner), late))
        for name, hs in by_name.items():
            cap = hs[0][2]
            if cap is not None:
                total = sum(h[3] or 0 for h in hs)
                if total > cap:
                    self.snapshot_bad.append("semaphore %s: %d permits held of %d: %s"
                                             % (text_of(name), total, cap, hs))
                continue
            for i, a in enumerate(hs):
                for b in hs[i + 1:]:
                    if a[0] != b[0] and b[1] in CONFLICTS[a[1]]:
                        self.snapshot_bad.append("%s: token %d (%s) and token %d (%s) held at once"
                                                 % (text_of(name), a[4], MODES[a[1]], b[4],
                                                    MODES[b[1]]))

    def expected_leases(self, t_down):
        """Owner-keyed leases acknowledged before t_down, not released (nor a
        release started) before it, and not run out by it: key -> (name,
        token, expiry)."""
        state = {}
        for path in self.logs:
            try:
                with open(path) as f:
                    lines = f.readlines()
            except OSError:
                continue
            for line in lines:
                try:
                    e = json.loads(line)
                except ValueError:
                    continue
                if e["k"] not in ("L", "E") or e["at"] >= t_down:
                    continue
                if e["k"] == "L":
                    state[(e["o"], e["n"])] = (e["t"], e["x"])
                elif e["n"] == "*":
                    for k in [k for k in state if k[0] == e["o"]]:
                        del state[k]
                else:
                    state.pop((e["o"], e["n"]), None)
        return dict((k, v) for k, v in state.items() if v[1] > t_down + 0.05)

    def lease_survival(self, cur, t_down, t_restart, kind):
        """No acknowledged owner-keyed lease is lost across a restart: each
        is in dlock.held with its token until its expiry (or the restart
        grace, which runs from the start)."""
        expected = self.expected_leases(t_down)
        self.stats["  leases live when the server went down (%s)" % kind] += len(expected)
        checked_at = time.time()
        cur.execute("SELECT owner, name, token, expires_us FROM dlock.held WHERE owner IS NOT NULL")
        rows = dict(((text_of(o), text_of(n)), (t, x)) for o, n, t, x in cur.fetchall())
        for (key, name), (token, expiry) in expected.items():
            if checked_at > max(expiry, t_restart + self.grace) - 0.3:
                continue        # it may have run out since
            self.leases_checked += 1
            got = rows.get((key, name))
            if got is None or got[0] != token:
                self.lease_bad.append("%s: lease %s of %s (token %d, acknowledged until %.3f,"
                                      " %.3f s after the check) is %s"
                                      % (kind, key, name, token, expiry, expiry - checked_at,
                                         "gone" if got is None else "token %d" % got[0]))
            elif got[1] is not None and got[1] / 1e6 < expiry - 0.005:
                self.lease_bad.append("%s: lease %s of %s (token %d) expires %.3f s before"
                                      " its acknowledged expiry"
                                      % (kind, key, name, token, expiry - got[1] / 1e6))

    # -- faults -------------------------------------------------------------
    def kill_client(self, cur, rng, waiting):
        if waiting:
            cur.execute("SELECT DISTINCT conn_id FROM dlock.queue WHERE kept_until_us IS NULL")
        else:
            cur.execute("SELECT DISTINCT conn_id FROM dlock.held")
        conns = set(x[0] for x in cur.fetchall())
        gen = self.shared.gen.value
        slots = [s for s in range(self.args.clients)
                 if self.shared.connids[s] in conns and self.shared.conngen[s] == gen]
        if not slots:
            return False
        slot = rng.choice(slots)
        conn_id = self.shared.connids[slot]
        p, _ = self.procs[slot]
        try:
            os.kill(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            return False
        p.join(5)
        self.shared.connids[slot] = 0
        what = "kill -9 of a client (%s)" % ("waiting" if waiting else "holding")
        self.stats["fault: " + what] += 1
        self.spawn(slot, self.deadline)
        self.await_session_end(cur, conn_id, what)
        return True

    def kill_waiter(self, cur, query_only):
        cur.execute("SELECT conn_id FROM dlock.queue WHERE kept_until_us IS NULL"
                    " ORDER BY RAND() LIMIT 1")
        row = cur.fetchone()
        if not row:
            return False
        try:
            cur.execute("KILL %s%d" % ("QUERY " if query_only else "", int(row[0])))
        except MySQLdb.Error:
            return False
        if query_only:
            self.stats["fault: KILL QUERY of a waiter"] += 1
        else:
            self.stats["fault: KILL of a waiting connection"] += 1
            self.await_session_end(cur, int(row[0]), "KILL of a waiting connection")
        return True

    def kill_store(self, cur, rng, query_only):
        busy = rng.random() < (0.8 if query_only else 0.5)
        for _ in range(100 if busy else 1):
            cur.execute("SELECT ID, COMMAND FROM information_schema.PROCESSLIST"
                        " WHERE USER = 'dlock_store'")
            rows = cur.fetchall()
            if not rows or not busy or rows[0][1] != "Sleep":
                break
            time.sleep(0.002)
        if len(rows) != 1:
            self.stats["lock store connections seen: %d" % len(rows)] += 1
            if not rows:
                return False
        try:
            cur.execute("KILL %s%d" % ("QUERY " if query_only else "", int(rows[0][0])))
        except MySQLdb.Error:
            return False
        self.shared.store_kill_at.value = time.monotonic()
        self.stats["fault: KILL%s of the lock store connection" % (" QUERY" if query_only else "")] += 1
        self.stats["  lock store connection killed while %s"
                   % ("idle" if rows[0][1] == "Sleep" else "busy")] += 1
        return True

    def restart(self, kind):
        self.begin_fault()
        if kind == "clean":
            self.server("stop")
            self.stats["fault: clean server restart"] += 1
        else:
            self.server("kill")
            self.kills_of_server += 1
            self.stats["fault: kill -9 of mariadbd, restart"] += 1
        t_down = time.time()
        t_restart = time.time()
        self.server("start", str(self.args.port))
        self.shared.gen.value += 1
        return self.back(t_down, t_restart, kind)

    def back(self, t_down, t_restart, kind):
        """The lock service is back after its server or primary went (down at
        t_down, up again at t_restart): calls are timed again 3 s later; every
        lease acknowledged before is checked now and once the restart grace
        has run.  The fault thread's new admin connection."""
        self.shared.unstable.value = time.monotonic() + 3
        admin = self.admin()
        cur = admin.cursor()
        self.lease_survival(cur, t_down, t_restart, kind)
        cur.close()
        self.rechecks.append((time.monotonic() + self.grace - 1, t_down, t_restart,
                              "%s (again after %.0f s)" % (kind, self.grace - 1)))
        return admin

    # -- HA faults ---------------------------------------------------------
    def failover(self):
        """kill -9 of the primary, promotion of the replica, the old primary
        rebuilt as the new replica (until then the new primary's commits, and
        so its grants, wait)."""
        self.begin_fault()
        old = self.shared.primary.value
        t0 = time.monotonic()
        self.server("kill", old)
        t_dead = time.monotonic()      # the old primary is gone: it answers nothing more
        # every release that may have been carried out was logged before this
        t_down = time.time()
        if self.server("promote", 1 - old, refusal_ok=True) is None:
            # the replica restarted behind and has not caught up: promoting
            # it would lose acknowledged grants; the primary comes back
            self.server("restart", old)
            self.stats["fault: kill -9 of the primary, promotion refused (replica not in"
                       " step), primary restarted"] += 1
            self.outages.append((t_dead, time.monotonic(), "primary killed, promotion refused"))
            self.shared.gen.value += 1
            return self.back(t_down, time.time(), "primary restart")
        self.failover_steps.append(["promotion %.1f s" % (time.monotonic() - t_dead)])
        t_restart = time.time()
        self.shared.primary.value = 1 - old
        self.shared.gen.value += 1
        self.failovers.append((t0, t_dead))
        self.stats["fault: failover (kill -9 of the primary, promotion, rebuild)"] += 1
        t_rejoin = time.monotonic()
        # no replica yet: a call sent after the kill is not granted before it is back
        self.outages.append((t_dead, t_rejoin, "failover, before the rebuilt replica"))
        self.server("rejoin", old)
        self.failover_steps[-1].append("rebuild %.1f s" % (time.monotonic() - t_rejoin))
        self.await_replica(serving=True)
        return self.back(t_down, t_restart, "failover")

    # -- network partitions (netns mode) ------------------------------------
    def replica_cut(self, rng):
        """The primary cut from its replica for 3-8 s while every client still
        reaches it: its commits wait, so it answers no grant meanwhile."""
        p = self.shared.primary.value
        self.begin_fault()
        self.server("cut", "n0", "n1")
        gone = time.monotonic()
        time.sleep(rng.uniform(3, 8))
        back = time.monotonic()
        self.server("heal", "n0", "n1")
        self.outages.append((gone, back, "primary n%d cut from its replica" % p))
        self.stats["fault: the primary cut from its replica for 3-8 s"] += 1
        self.await_replica()
        self.shared.unstable.value = time.monotonic() + 3

    def client_cut(self):
        """A quarter of the clients (namespace c2) cut from the primary for
        10 s: their leases run out while they cannot renew, others take the
        names, and their late writes must be fenced."""
        pn = "n%d" % self.shared.primary.value
        self.begin_fault()        # their calls wait for the link
        self.server("cut", "c2", pn)
        time.sleep(10)
        self.server("heal", "c2", pn)
        self.stats["fault: clients (c2) cut from the primary for 10 s"] += 1
        self.shared.unstable.value = time.monotonic() + 3

    def isolated_failover(self):
        """The primary cut from its replica and from c2 while c1's clients
        still reach it; the replica promoted without a fence 2 s later (the
        old primary is out of reach), c2's clients follow; after 3 s more the
        cut heals and the old primary is fenced and rebuilt.  No grant may be
        answered from the cut until the rebuilt replica is back: the old
        primary's commits wait for an acknowledgement that cannot come, the
        new primary's for a replica."""
        self.begin_fault()
        old = self.shared.primary.value
        new = 1 - old
        t0 = time.monotonic()
        self.server("cut", "n%d" % old, "n%d" % new)
        self.server("cut", "n%d" % old, "c2")
        t_cut = time.monotonic()      # from here no commit of the old primary is acknowledged
        t_down = time.time()
        time.sleep(2)
        t_promote = time.monotonic()
        if self.server("promote", new, "--no-fence", refusal_ok=True) is None:
            # not in step (see failover): the old primary stays, healed
            self.server("heal")
            self.stats["fault: the primary isolated, promotion refused (replica not in"
                       " step), healed"] += 1
            self.outages.append((t_cut, time.monotonic(), "primary isolated, promotion refused"))
            self.shared.unstable.value = time.monotonic() + 3
            return self.admin()
        self.failover_steps.append(["promotion %.1f s" % (time.monotonic() - t_promote)])
        t_restart = time.time()
        self.shared.primary.value = new
        self.shared.gen.value += 1
        self.failovers.append((t0, t_cut))
        self.stats["fault: the primary isolated (c1 still reaches it), failover"] += 1
        time.sleep(3)
        self.server("heal")
        t_rejoin = time.monotonic()
        self.server("rejoin", old)
        self.failover_steps[-1].append("rebuild %.1f s" % (time.monotonic() - t_rejoin))
        self.outages.append((t_cut, time.monotonic(),
                             "primary isolated, before the rebuilt replica"))
        self.await_replica(serving=True)
        return self.back(t_down, t_restart, "isolated failover")

    def await_replica(self, serving=False):
        """Until a commit on the primary is acknowledged again: a link healed
        after a cut carries packets only at TCP's next retransmission, seconds
        later, and until then every commit - the lock manager's reaping of
        expired leases too - waits.  serving: and until the lock manager of
        a new primary took over (it looks at its role once a second) and
        answers, before the checks of its timing resume."""
        started = time.monotonic()
        a = self.admin()
        try:
            cur = a.cursor()
            cur.execute("SET max_statement_time = 60")
            cur.execute("INSERT INTO torture.ping VALUES (1, 1) ON DUPLICATE KEY UPDATE n = n + 1")
            while serving:
                try:
                    cur.execute("SELECT dlock_holder('torture/ping')")
                    break
                except MySQLdb.Error as e:
                    if e.args[0] != REPLICA or time.monotonic() - started > 60:
                        raise
                    time.sleep(0.2)
            cur.close()
        finally:
            a.close()
        self.stats["  replica acknowledging again, seconds after the fault (worst)"] = max(
            self.stats["  replica acknowledging again, seconds after the fault (worst)"],
            round(time.monotonic() - started))

    def replica_fault(self, rng, kind):
        """The replica killed (-9) or stopped (SIGSTOP) for 1-3 s: the
        primary's commits wait, so it answers no grant meanwhile."""
        rep = 1 - self.shared.primary.value
        self.begin_fault()
        pause = rng.uniform(1, 3)
        if kind == "kill":
            self.server("kill", rep)
            gone = time.monotonic()
            time.sleep(pause)
            back = time.monotonic()
            self.server("restart", rep)
            self.stats["fault: kill -9 of the replica, restart"] += 1
        else:
            with open(os.path.join(self.dir, "n%d" % rep, "mariadbd.pid")) as f:
                pid = int(f.read())
            os.kill(pid, signal.SIGSTOP)
            gone = time.monotonic()
            time.sleep(pause)
            back = time.monotonic()
            os.kill(pid, signal.SIGCONT)
            self.stats["fault: SIGSTOP of the replica for 1-3 s"] += 1
        self.outages.append((gone, back, "replica %s" % ("killed" if kind == "kill" else "stopped")))
        self.replica_faults += 1
        self.await_replica()
        self.shared.unstable.value = time.monotonic() + 3

    def faults(self, deadline):
        try:
            self.fault_loop(deadline)
        except Exception:
            self.harness_bad.append("the fault thread failed: " + traceback.format_exc())

    def fault_loop(self, deadline):
        rng = random.Random(42)
        admin = self.admin()
        span = deadline - time.monotonic()
        # server restarts: a clean one at 1/3 and a crash at 2/3 of a quick
        # run; in longer runs every 40 s, alternating
        if self.ha:
            # HA: a failover and the replica's faults in turn, every 20 s;
            # a quick run one of each
            kinds = ["replica_kill", "failover", "replica_stop"]
            if self.netns:
                kinds += ["replica_cut", "client_cut", "isolated"]
            if span < 80 or self.args.quick:
                # spread over the first 75%: the last one (up to 15 s on a
                # busy machine) ends well before the clients
                restarts = [(time.monotonic() + span * 0.75 * (i + 1) / len(kinds), k)
                            for i, k in enumerate(kinds)]
            else:
                restarts = [(time.monotonic() + t, kinds[i % len(kinds)])
                            for i, t in enumerate(range(15, int(span) - 15, 20))]
        elif span < 80:
            restarts = [(time.monotonic() + span / 3, "clean"),
                        (time.monotonic() + 2 * span / 3, "crash")]
        else:
            restarts = [(time.monotonic() + t, "clean" if i % 2 == 0 else "crash")
                        for i, t in enumerate(range(20, int(span) - 15, 40))]
        kinds = [("kill_query_waiter", 30), ("kill_waiter", 20), ("kill9_holding", 9),
                 ("kill9_waiting", 9), ("store_kill", 5), ("store_kill_query", 3), ("none", 24)]
        done = collections.Counter()
        time.sleep(1)
        while time.monotonic() < deadline - 3:
            time.sleep(rng.uniform(0.2, 0.5))
            try:
                if restarts and time.monotonic() >= restarts[0][0]:
                    kind = restarts.pop(0)[1]
                    if kind == "replica_cut":
                        self.replica_cut(rng)
                        continue
                    if kind == "client_cut":
                        self.client_cut()
                        continue
                    if kind.startswith("replica_"):
                        self.replica_fault(rng, kind[8:])
                        continue
                    try:
                        admin.close()
                    except MySQLdb.Error:
                        pass
                    if kind == "isolated":
                        admin = self.isolated_failover()
                    elif kind == "failover":
                        admin = self.failover()
                    else:
                        admin = self.restart(kind)
                    continue
                cur = admin.cursor()
                self.snapshot(cur)
                while self.rechecks and self.rechecks[0][0] <= time.monotonic():
                    self.lease_survival(cur, *self.rechecks.pop(0)[1:])
                if self.unstable():
                    # until the lock manager has loaded, dlock.queue and
                    # dlock.held may show the last run's connection ids
                    cur.close()
                    continue
                missing = [k for k, _ in kinds if k != "none" and done[k] == 0]
                if missing and rng.random() < 0.5:
                    kind = rng.choice(missing)
                else:
                    kind = rng.choices([k for k, _ in kinds], [w for _, w in kinds])[0]
                ok = {"kill_query_waiter": lambda: self.kill_waiter(cur, True),
                      "kill_waiter": lambda: self.kill_waiter(cur, False),
                      "kill9_holding": lambda: self.kill_client(cur, rng, False),
                      "kill9_waiting": lambda: self.kill_client(cur, rng, True),
                      "store_kill": lambda: self.kill_store(cur, rng, False),
                      "store_kill_query": lambda: self.kill_store(cur, rng, True),
                      "none": lambda: False}[kind]()
                if ok:
                    done[kind] += 1
                cur.close()
            except MySQLdb.Error as e:
                self.stats["admin connection errors"] += 1
                if not self.unstable():
                    self.stats["admin error %s" % (e.args[0] if e.args else e)] += 1
                try:
                    admin.close()
                except MySQLdb.Error:
                    pass
                admin = self.admin()
        admin.close()

    # -- the end ------------------------------------------------------------
    def read_logs(self):
        grants = []
        violations = []
        worst = 0.0
        for path in self.logs:
            with open(path) as f:
                for line in f:
                    try:
                        e = json.loads(line)
                    except ValueError:
                        continue        # the last line of a client killed mid-write
                    if e["k"] == "c":
                        self.stats[e["w"]] += 1
                    elif e["k"] == "v":
                        violations.append(e["w"])
                    elif e["k"] == "g":
                        grants.append(e)
                    elif e["k"] == "w":
                        worst = max(worst, e["d"])
        return grants, violations, worst

    @staticmethod
    def token_order(grants):
        """Session-owned grants in conflicting modes (a path: also with the
        intentions on its ancestors) must be seen in token order."""
        per = collections.defaultdict(list)
        for g in grants:
            if g["l"]:
                continue
            per[g["n"]].append((g["at"], g["t"], g["m"], g["n"]))
            i = intention(g["m"])
            if i is not None:
                for a in ancestors(g["n"]):
                    per[a].append((g["at"], g["t"], i, g["n"]))
        bad = []
        for name, gs in per.items():
            gs.sort()
            top = {}     # mode -> (token, name) the largest seen so far
            for at, t, m, via in gs:
                for c in CONFLICTS[m]:
                    if c in top and top[c][0] >= t:
                        bad.append("%s: token %d (%s via %s) seen after token %d (%s via %s)"
                                   % (name, t, MODES[m], via, top[c][0], MODES[c], top[c][1]))
                if m not in top or top[m][0] < t:
                    top[m] = (t, via)
        return bad

    @staticmethod
    def token_twice(grants):
        seen = {}
        bad = []
        for g in grants:
            if g["t"] in seen:
                o = seen[g["t"]]
                bad.append("token %d granted for %s (client %d) and %s (client %d)"
                           % (g["t"], o["n"], o["c"], g["n"], g["c"]))
            else:
                seen[g["t"]] = g
        return bad

    def checks(self):
        if self.ha:
            # the manager can write again (a late fault's replica is back)
            self.await_replica(serving=True)
        admin = self.admin()
        cur = admin.cursor()
        results = []

        def one(sql):
            cur.execute(sql)
            return cur.fetchone()[0]

        # every client is gone: their session locks and waits end at once
        for _ in range(int(SESSION_END / 0.1)):
            if one("SELECT COUNT(*) FROM dlock.queue WHERE kept_until_us IS NULL") == 0 and one(
                    "SELECT COUNT(*) FROM dlock.held WHERE owner IS NULL") == 0:
                break
            time.sleep(0.1)
        results.append(("no queue rows of calls within %.0f s" % SESSION_END,
                        one("SELECT COUNT(*) FROM dlock.queue WHERE kept_until_us IS NULL"), 0))
        results.append(("no grants to dead connections within %.0f s" % SESSION_END,
                        one("SELECT COUNT(*) FROM dlock.held WHERE owner IS NULL"), 0))
        # kept places of killed clients run out with their lease (1.5 s)
        for _ in range(30):
            if one("SELECT COUNT(*) FROM dlock.queue") == 0:
                break
            time.sleep(0.1)
        results.append(("no kept place past its lease", one("SELECT COUNT(*) FROM dlock.queue"), 0))
        # sampled over 2 s: no lease outlives its expiry by more than LEASE_SLACK
        worst = 0
        for _ in range(8):
            worst = max(worst, one("SELECT COUNT(*) FROM dlock.held WHERE expires_us <"
                                   " UNIX_TIMESTAMP(NOW(6)) * 1000000 - %d"
                                   % int(LEASE_SLACK * 1e6)))
            self.snapshot(cur)
            time.sleep(0.25)
        results.append(("no lease past its expiry + %.0f s" % LEASE_SLACK, worst, 0))
        results.append(("guard tokens never negative",
                        one("SELECT COUNT(*) FROM torture.guard WHERE"
                            " LEAST(t0, t1, t2, t3, t4, t5) < 0"), 0))
        cur.close()
        admin.close()
        return results

    def server_log(self):
        """Crash reports in the error log beyond the kills we did ourselves,
        and how often the lock manager's batch failed."""
        text = ""
        for d in ([os.path.join(self.dir, "n0"), os.path.join(self.dir, "n1")] if self.ha
                  else [self.dir]):
            try:
                with open(os.path.join(d, "server.log"), errors="replace") as f:
                    text += f.read()
            except OSError:
                pass
        self.stats["server log: the manager held answers back for the replica's ack"] += \
            text.count("dlock: lock manager waits for the semi-synchronous replica")
        self.stats["server log: lock manager batch failed"] += text.count(
            "dlock: lock manager batch failed")
        return text.count("got signal") + text.count("Assertion")

    def run(self):
        a = self.args
        subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "mysql_udf")], check=True,
                       stdout=subprocess.DEVNULL)
        if self.netns:
            self.server("start", str(a.port), "--netns", NETNS_PREFIX)
            for c in ("c1", "c2"):
                self.server("client", c)
            self.endpoints = [(self.addr("n%d" % n), a.port + n) for n in (0, 1)]
        else:
            self.server("start", str(a.port))
        admin = self.admin()
        cur = admin.cursor()
        cur.execute("SELECT @@dlock_restart_grace")
        self.grace = cur.fetchone()[0] / 1000.0
        cur.execute("CREATE DATABASE torture")
        cur.execute("CREATE TABLE torture.guard (name VARBINARY(1024) PRIMARY KEY,"
                    " t0 BIGINT NOT NULL DEFAULT 0, t1 BIGINT NOT NULL DEFAULT 0,"
                    " t2 BIGINT NOT NULL DEFAULT 0, t3 BIGINT NOT NULL DEFAULT 0,"
                    " t4 BIGINT NOT NULL DEFAULT 0, t5 BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB")
        cur.execute("CREATE TABLE torture.ping (id INT PRIMARY KEY, n BIGINT) ENGINE=InnoDB")
        cur.execute("CREATE TABLE torture.active (client INT, name VARBINARY(1024), token BIGINT,"
                    " mode TINYINT, permits INT, PRIMARY KEY (client, name), KEY (name))"
                    " ENGINE=InnoDB")
        cur.executemany("INSERT INTO torture.guard (name) VALUES (%s)",
                        [(n,) for n in GUARDED] +
                        [("long/%d/%d" % (s, n),) for s in range(a.clients) for n in range(LONG)])
        cur.close()
        admin.close()

        started = time.monotonic()
        self.deadline = deadline = started + a.seconds
        for slot in range(a.clients):
            self.spawn(slot, deadline)
        f = threading.Thread(target=self.faults, args=(deadline,), daemon=True)
        f.start()
        f.join(a.seconds + 120)
        stuck = 0
        for slot, (p, _) in list(self.procs.items()):
            p.join(max(0.1, deadline + 3 * SLACK + WAIT_FOREVER - time.monotonic()))
            if p.is_alive():
                stuck += 1
                os.kill(p.pid, signal.SIGKILL)
                p.join(5)
        duration = time.monotonic() - started
        results = self.checks()
        grants, violations, worst_overrun = self.read_logs()
        order = self.token_order(grants)
        twice = self.token_twice(grants)
        # HA: no grant to a call sent while the primary had no replica, before
        # it was back; the failover time, the kill to the first grant
        outage_bad = []
        for gone, back, what in self.outages:
            for g in grants:
                if g.get("s", 0) > gone and g["at"] < back:
                    outage_bad.append("%s: token %d of %s granted %.2f s after the replica went"
                                      " and %.2f s before it was back (call sent %.2f s after)"
                                      % (what, g["t"], g["n"], g["at"] - gone, back - g["at"],
                                         g["s"] - gone))
        failover_times = []
        for t0, t_dead in self.failovers:
            after = [g["at"] for g in grants if g["at"] > t_dead]
            if after:
                failover_times.append(min(after) - t0)
            else:
                outage_bad.append("no grant after the failover at %.1f s" % (t0 - started))
        crashes = self.server_log()
        ops = self.stats["operations"]
        store_errors = self.stats["plugin error: lock store (allowed)"]
        store_kills = (self.stats["fault: KILL of the lock store connection"] +
                       self.stats["fault: KILL QUERY of the lock store connection"])
        allowed_store_errors = max(3, ops // 200)

        tally = Tally()
        faults = sum(v for k, v in self.stats.items() if k.startswith("fault:"))
        print("%-52s %10s" % ("operations and faults", "count"))
        for k in sorted(self.stats):
            print("%-52s %10d" % (k, self.stats[k]))
        print()
        bad_lists = [violations, order, twice, self.session_bad, self.snapshot_bad,
                     self.late_bad, self.lease_bad, outage_bad]
        print("| clients | duration | operations | grants | faults | violations |")
        print("|---|---|---|---|---|---|")
        print("| %d | %.0f s | %d | %d | %d | %d |" % (
            a.clients, duration, ops, len(grants), faults,
            sum(len(b) for b in bad_lists) + stuck))
        print()
        if self.ha:
            print("failovers: %d; failover time, the kill to the first grant on the new primary:"
                  " %s" % (len(self.failovers), ", ".join("%.2f s" % t for t in failover_times)))
            print("  (%s)" % "; ".join(", ".join(x) for x in self.failover_steps))
            print("acknowledged owner-keyed leases lost: %d (of %d checked)"
                  % (len(self.lease_bad), self.leases_checked))
            print()
        for what, got, want in results:
            tally.check(what, got == want, "(got %s)" % got, sep=" ")
        ends = sorted(self.session_ends)
        checks = [
            ("no exclusion, fencing, semaphore, leader, timeout or error violations"
             " (worst overrun of a timeout %.0f ms)" % (worst_overrun * 1000), violations),
            ("tokens of conflicting session grants grow in grant order", order),
            ("no token handed out twice", twice),
            ("session locks and queue rows of killed connections gone within %.0f s"
             " (%d checked, worst %.0f ms)" % (SESSION_END, len(ends), (ends[-1] if ends else 0) * 1000),
             self.session_bad),
            ("dlock.held never showed conflicting holders or a semaphore over capacity"
             " (%d snapshots)" % self.snapshots, self.snapshot_bad),
            ("no lease in dlock.held past its expiry + %.0f s while running (worst %.0f ms)"
             % (LEASE_SLACK, max(0, self.worst_late) * 1000), self.late_bad),
            ("no acknowledged owner-keyed lease lost across restarts and kill -9"
             " (%d checked)" % self.leases_checked, self.lease_bad),
            ("lock-store errors are rare (%d in %d operations, %d store kills)"
             % (store_errors, ops, store_kills),
             ["%d lock-store errors, more than %d" % (store_errors, allowed_store_errors)]
             if store_errors > allowed_store_errors else []),
            ("every client finished", ["%d clients stuck past the deadline" % stuck] if stuck else []),
            ("the fault thread ran to the end", self.harness_bad),
            ("the server crashed only when killed (%d kills)" % self.kills_of_server,
             ["%d crash reports in the error log, %d kills" % (crashes, self.kills_of_server)]
             if crashes > self.kills_of_server else []),
            ("enough operations ran", [] if ops >= 10 * a.clients else ["only %d operations" % ops]),
            ("every fault kind happened",
             [k for k in (HA_FAULT_KINDS + (NETNS_FAULT_KINDS if self.netns else [])
                          if self.ha else FAULT_KINDS) if self.stats[k] == 0]),
        ]
        if self.ha:
            checks.append(("the replica applied the primary's whole binary log, its SQL thread"
                           " runs", self.replica_in_step()))
            checks.append(("no grant answered to a call sent while the primary had no replica"
                           " (%d times: %d replica faults, %d failovers)"
                           % (len(self.outages), self.replica_faults, len(self.failovers)),
                           outage_bad))
        for what, bad in checks:
            tally.check(what, not bad)
            for b in bad[:10]:
                print("     ", b)
        print(tally.summary(SUITE[0]))
        return 0 if tally.failed == 0 else 1

    def replica_in_step(self):
        """[] if the replica caught up with the primary and replicates on;
        else what is wrong."""
        p = self.shared.primary.value
        try:
            a = connect(self.socks[p])
            r = connect(self.socks[1 - p])
            cur = a.cursor()
            cur.execute("SELECT @@gtid_binlog_pos")
            pos = cur.fetchone()[0]
            cur = r.cursor()
            cur.execute("SELECT MASTER_GTID_WAIT(%s, 60)", (pos,))
            waited = cur.fetchone()[0]
            cur = r.cursor(MySQLdb.cursors.DictCursor)
            cur.execute("SHOW SLAVE STATUS")
            st = cur.fetchone() or {}
            a.close()
            r.close()
        except MySQLdb.Error as e:
            return ["cannot ask the nodes: %s" % (e,)]
        if waited == 0 and st.get("Slave_SQL_Running") == "Yes":
            return []
        return ["replica n%d at %s, primary at %s; SQL thread %s: %s"
                % (1 - p, st.get("Gtid_Slave_Pos"), pos, st.get("Slave_SQL_Running"),
                   st.get("Last_SQL_Error"))]

    def cleanup(self):
        for p, _ in self.procs.values():
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
        subprocess.run([HA_SCRIPT if self.ha else SERVER, "stop", self.dir],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if os.environ.get("KEEP_DIR"):
            print("kept", self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


FAULT_KINDS = ["fault: KILL QUERY of a waiter", "fault: KILL of a waiting connection",
               "fault: kill -9 of a client (holding)", "fault: kill -9 of a client (waiting)",
               "fault: KILL of the lock store connection",
               "fault: KILL QUERY of the lock store connection",
               "fault: clean server restart", "fault: kill -9 of mariadbd, restart"]
HA_FAULT_KINDS = FAULT_KINDS[:6] + [
    "fault: failover (kill -9 of the primary, promotion, rebuild)",
    "fault: kill -9 of the replica, restart", "fault: SIGSTOP of the replica for 1-3 s"]
NETNS_FAULT_KINDS = ["fault: the primary cut from its replica for 3-8 s",
                     "fault: clients (c2) cut from the primary for 10 s",
                     "fault: the primary isolated (c1 still reaches it), failover"]
NETNS_PREFIX = os.environ.get("MYSQL_TORTURE_NETNS", "dlmt-")
SUITE = ["mysql-torture"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="35 s with 32 clients (make check)")
    ap.add_argument("--ha", action="store_true",
                    help="a primary with a semi-synchronous replica, failovers (scripts/mysql_ha.sh)")
    ap.add_argument("--netns", action="store_true",
                    help="with --ha: nodes and clients in network namespaces, partitions too")
    ap.add_argument("--seconds", type=float,
                    default=float(os.environ.get("MYSQL_TORTURE_SECONDS", 300)))
    ap.add_argument("--clients", type=int,
                    default=int(os.environ.get("MYSQL_TORTURE_CLIENTS", 48)))
    ap.add_argument("--port", type=int, default=int(os.environ.get("MYSQL_TORTURE_PORT", 3402)))
    args = ap.parse_args()
    if args.netns and not args.ha:
        ap.error("--netns needs --ha")
    if args.quick:
        args.seconds, args.clients = (45, 24) if args.ha else (35, 32)
        if args.netns:
            args.seconds = 120
    if args.ha:
        SUITE[0] = "mysql-torture-ha"
    t = Torture(args)

    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    try:
        return t.run()
    except (KeyboardInterrupt, RuntimeError, subprocess.CalledProcessError) as e:
        print("%s: aborted: %s" % (SUITE[0], e))
        for d in ([os.path.join(t.dir, "n0"), os.path.join(t.dir, "n1")] if t.ha else [t.dir]):
            try:
                with open(os.path.join(d, "server.log")) as f:
                    print("%s: end of %s:" % (SUITE[0], os.path.join(d, "server.log")))
                    for line in f.readlines()[-15:]:
                        print("     ", line.rstrip())
            except OSError:
                pass
        print("%s: 0 passed, 1 failed" % SUITE[0])
        return 1
    finally:
        t.cleanup()


if __name__ == "__main__":
    sys.exit(main())
