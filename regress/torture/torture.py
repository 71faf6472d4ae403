#!/usr/bin/python3
"""Torture run for dlock: many clients, random operations, random faults,
and a fencing-checked guarded resource.

Each client loops over random operations on a few hot and many cold names:
blocking acquires with timeouts, try-acquires, shared and exclusive modes,
re-entrant acquires, owner-keyed leases that are renewed or left to expire,
multi-lock.  Inside every grant it enters the guarded resource:

  * torture_active holds one row per client inside a lock, with its token;
    entering while another live grant of a conflicting mode is inside is an
    exclusion violation (a row whose token is no longer held is stale: its
    client was killed, or its lease ran out);
  * torture_guard keeps the last exclusive token per name; an exclusive
    holder writes it only if larger (UPDATE ... WHERE last_token < token).
    A session-owned holder that cannot is a violation (a token went
    backwards or someone newer got in); a lease holder that cannot has
    legitimately lost its lease (counted, not a violation).

A fault thread cancels waiting backends, terminates client backends,
and terminates the dlock worker itself.  After the clients stop, the
invariants are checked: no queue rows, no grants to dead sessions, no lease
past its expiry, every blocking call ended within its timeout.

Usage: torture.py SECONDS CLIENTS   (connection from PG* variables)
Prints a table and "torture: N passed, M failed".
"""
import os
import random
import sys
import threading
import time

import psycopg2

SECONDS = float(sys.argv[1]) if len(sys.argv) > 1 else 30
CLIENTS = int(sys.argv[2]) if len(sys.argv) > 2 else 64
HOT = ["hot/%d" % i for i in range(3)]
COLD = ["cold/%d" % i for i in range(400)]
SLACK = 2.0  # seconds a call may overrun its timeout (reap interval, load)

lock = threading.Lock()
stats = {}
violations = []
deadlocks = []


def count(key, n=1):
    with lock:
        stats[key] = stats.get(key, 0) + n


def violation(text):
    with lock:
        violations.append(text)


def connect():
    c = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    c.autocommit = True
    return c


class Client(threading.Thread):
    def __init__(self, cid, deadline):
        super().__init__(daemon=True)
        self.cid = cid
        self.deadline = deadline
        self.rng = random.Random(cid * 7919 + int(time.time()))
        self.conn = None
        self.pid = None

    def q(self, sql, args=()):
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall() if cur.description else None

    def reconnect(self):
        try:
            if self.conn is not None:
                self.conn.close()
        except psycopg2.Error:
            pass
        self.conn = connect()
        self.pid = self.q("SELECT pg_backend_pid()")[0][0]

    def enter(self, name, token, mode, leased):
        """The guarded resource: exclusion and fencing checks."""
        conflicting = "true" if mode == "exclusive" else "a.mode = 'exclusive'"
        rows = self.q(
            "SELECT a.client, a.token FROM torture_active a"
            " JOIN dlock.held h ON h.token = a.token"
            " WHERE a.name = %%s AND a.client <> %%s AND (%s)" % conflicting,
            (name, self.cid))
        if rows and not leased:
            violation("exclusion: client %d (token %d, %s) entered %s while client %d"
                      " (token %d) held it" % (self.cid, token, mode, name, rows[0][0], rows[0][1]))
        self.q("INSERT INTO torture_active VALUES (%s, %s, %s, %s)"
               " ON CONFLICT (client) DO UPDATE SET name = EXCLUDED.name,"
               " token = EXCLUDED.token, mode = EXCLUDED.mode",
               (self.cid, name, token, mode))
        if mode == "exclusive":
            n = self.q("UPDATE torture_guard SET last_token = %s WHERE name = %s"
                       " AND last_token < %s RETURNING 1", (token, name, token))
            if not n:
                if leased:
                    count("fencing rejections (lease lost)")
                else:
                    last = self.q("SELECT last_token FROM torture_guard WHERE name = %s", (name,))
                    violation("fencing: client %d's token %d on %s is not above %s"
                              % (self.cid, token, name, last))
        hold = self.rng.choice([0, 0, 0.001, 0.003])
        if hold:
            time.sleep(hold)

    def leave(self):
        self.q("DELETE FROM torture_active WHERE client = %s", (self.cid,))

    def timed(self, timeout, sql, args):
        started = time.monotonic()
        r = self.q(sql, args)
        took = time.monotonic() - started
        if timeout is not None and took > timeout + SLACK:
            violation("a call with timeout %.2fs took %.2fs: %s" % (timeout, took, sql))
        return r

    def one(self):
        rng = self.rng
        op = rng.random()
        name = rng.choice(HOT) if rng.random() < 0.7 else rng.choice(COLD)
        mode = "shared" if rng.random() < 0.25 else "exclusive"
        if op < 0.45:
            timeout = rng.choice([0.05, 0.2, 1.0])
            t = self.timed(timeout, "SELECT dlock_acquire(%s, %s, timeout => %s)",
                           (name, mode, "%f s" % timeout))[0][0]
            if t is None:
                count("acquire timed out")
                return
            count("acquire granted")
            self.enter(name, t, mode, False)
            if rng.random() < 0.2:  # re-entrant
                t2 = self.q("SELECT dlock_acquire(%s, %s)", (name, mode))[0][0]
                if t2 != t:
                    violation("re-entrant acquire of %s gave token %s, not %s" % (name, t2, t))
                self.q("SELECT dlock_release(%s)", (name,))
                count("re-entrant")
            self.leave()
            if not self.q("SELECT dlock_release(%s)", (name,))[0][0]:
                violation("release of held %s answered false" % name)
        elif op < 0.65:
            t = self.q("SELECT dlock_try_acquire(%s, %s)", (name, mode))[0][0]
            if t is None:
                count("try refused")
                return
            count("try granted")
            self.enter(name, t, mode, False)
            self.leave()
            self.q("SELECT dlock_release(%s)", (name,))
        elif op < 0.85:
            key = "c%d-%d" % (self.cid, rng.randrange(1 << 30))
            ttl = rng.choice([0.3, 0.6, 2.0])
            t = self.timed(1.0, "SELECT dlock_acquire(%s, %s, timeout => '1 s', ttl => %s, owner => %s)",
                           (name, mode, "%f s" % ttl, key))[0][0]
            if t is None:
                count("lease timed out")
                return
            count("lease granted")
            self.enter(name, t, mode, True)
            if rng.random() < 0.5:
                try:
                    self.q("SELECT dlock_renew(%s, owner => %s)", (name, key))
                    count("lease renewed")
                except psycopg2.Error as e:
                    if e.pgcode != "DL001":
                        raise
                    count("renew of a lost lease (DL001)")
            self.leave()
            if rng.random() < 0.2:
                count("lease left to expire")
            else:
                self.q("SELECT dlock_release(%s, owner => %s)", (name, key))
        else:
            names = sorted(set(rng.sample(COLD, 3) + [rng.choice(HOT)]))
            r = self.timed(1.0, "SELECT dlock_acquire_all(%s, timeout => '1 s')", (names,))[0][0]
            if r is None:
                count("multi timed out")
                return
            count("multi granted")
            for n, t in zip(names, r):
                self.enter(n, t, "exclusive", False)
                self.leave()
            self.q("SELECT dlock_release_all()")

    def run(self):
        while time.monotonic() < self.deadline:
            try:
                if self.conn is None or self.conn.closed:
                    self.reconnect()
                if self.rng.random() < 0.05:
                    self.q("SET statement_timeout = %s", ("%dms" % self.rng.choice([20, 100]),))
                else:
                    self.q("SET statement_timeout = 0")
                self.one()
                count("operations")
            except psycopg2.Error as e:
                code = getattr(e, "pgcode", None)
                if code == "57014":
                    count("cancelled (57014)")
                elif code == "40P01":
                    count("deadlock (40P01)")
                    with lock:
                        deadlocks.append(e.diag.message_detail)
                elif code in ("57P01", None):
                    count("connection lost")
                elif code == "55000":
                    count("55000: " + (e.diag.message_primary or "")[:40])
                else:
                    violation("unexpected error %s: %s" % (code, str(e).strip()))
                try:
                    if not self.conn.closed:
                        self.q("SET statement_timeout = 0")
                        self.q("DELETE FROM torture_active WHERE client = %s", (self.cid,))
                        self.q("SELECT dlock_release_all()")
                except psycopg2.Error:
                    self.conn.close()
        try:
            self.q("SET statement_timeout = 0")
            self.q("SELECT dlock_release_all()")
            self.conn.close()
        except psycopg2.Error:
            pass


def faults(deadline, clients):
    admin = connect()
    rng = random.Random(42)
    time.sleep(1)
    while time.monotonic() < deadline - 1:
        time.sleep(rng.uniform(0.2, 0.6))
        kind = rng.random()
        with admin.cursor() as cur:
            if kind < 0.5:
                cur.execute("SELECT pg_cancel_backend(pid) FROM dlock.locks"
                            " WHERE NOT granted ORDER BY random() LIMIT 1")
                if cur.fetchall():
                    count("fault: cancel a waiting backend")
            elif kind < 0.9:
                victim = rng.choice(clients)
                if victim.pid:
                    cur.execute("SELECT pg_terminate_backend(%s)", (victim.pid,))
                    count("fault: terminate a client backend")
            else:
                cur.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                            " WHERE backend_type = 'dlock lock manager'")
                count("fault: terminate the dlock worker")
    admin.close()


def main():
    admin = connect()
    with admin.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS torture_guard, torture_active")
        cur.execute("CREATE TABLE torture_guard (name text PRIMARY KEY, last_token bigint NOT NULL)")
        cur.execute("CREATE TABLE torture_active (client int PRIMARY KEY, name text, token bigint, mode text)")
        cur.execute("INSERT INTO torture_guard SELECT n, 0 FROM unnest(%s::text[]) n", (HOT + COLD,))
    deadline = time.monotonic() + SECONDS
    clients = [Client(i, deadline) for i in range(CLIENTS)]
    for c in clients:
        c.start()
    f = threading.Thread(target=faults, args=(deadline, clients), daemon=True)
    f.start()
    for c in clients:
        c.join(SECONDS + 60)
        if c.is_alive():
            violation("client %d did not finish" % c.cid)
    f.join(10)

    # quiescence: every client is gone; wait for the worker and the reaper
    checks = []
    time.sleep(2.5)
    with admin.cursor() as cur:
        def check(what, sql, expected):
            for _ in range(50):
                cur.execute(sql)
                got = cur.fetchone()[0]
                if got == expected:
                    break
                time.sleep(0.1)
            checks.append((what, got == expected, got))
        check("no queue rows", "SELECT count(*) FROM dlock.queue", 0)
        check("no grants to dead sessions",
              "SELECT count(*) FROM dlock.held h WHERE owner IS NULL AND NOT EXISTS"
              " (SELECT 1 FROM pg_stat_activity a WHERE a.pid = h.pid"
              " AND a.backend_start = h.backend_start)", 0)
        check("no lease past its expiry",
              "SELECT count(*) FROM dlock.held WHERE expires_at < now() - interval '1 s'", 0)
        check("fencing tokens never went backwards (guard rows >= 0)",
              "SELECT count(*) FROM torture_guard WHERE last_token < 0", 0)
        cur.execute("DROP TABLE torture_guard, torture_active")
    admin.close()

    passed = failed = 0
    print("%-44s %10s" % ("operations and faults", "count"))
    for k in sorted(stats):
        print("%-44s %10d" % (k, stats[k]))
    print("clients %d, %.0f s" % (CLIENTS, SECONDS))
    for what, ok, got in checks:
        print("%s %s%s" % ("ok  " if ok else "FAIL", what, "" if ok else " (got %s)" % got))
        passed += ok
        failed += not ok
    for d in deadlocks[:5]:
        print("deadlock reported:", d)
    for v in violations[:20]:
        print("VIOLATION", v)
    if violations:
        failed += 1
        print("FAIL %d violations" % len(violations))
    else:
        passed += 1
        print("ok   no exclusion, fencing or timeout violations")
    if stats.get("operations", 0) < CLIENTS:
        failed += 1
        print("FAIL too few operations ran")
    else:
        passed += 1
    print("torture: %d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
