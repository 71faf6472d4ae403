#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""Randomized API fuzzer for dlock.

Calls every dlock function with random, mostly bad arguments: NULLs, empty
and oversized names, odd bytes, malformed paths, unknown modes,
zero/negative/huge intervals, empty, long and control-character owner keys,
arrays with NULLs and duplicates.  Every call must either succeed or fail
with one of the documented SQLSTATEs; the server must never crash; and
afterwards nothing may be left queued or held by the fuzzing session.

Then the same calls (and some only an administrator may make) from two
ordinary login roles in two sessions, one bound to a prefix, the other
under a quota, sharing owner keys: refusals must be documented (42501,
53400 added), no role may hold outside its grant or over its quota.

Usage: fuzz.py CALLS   (connection from PG* variables)
Prints "fuzz: N passed, M failed".
"""
import os
import random
import sys

import psycopg2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checklib import Tally  # noqa: E402

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
DOCUMENTED = {"22004", "22023", "22007", "22008", "22015", "54000", "DL001", "DL002",
              "DL003", "DL004", "42809", "40P01", "57014", "2202E", "22P02", "22021"}

rng = random.Random(int(os.environ.get("FUZZ_SEED", "20261122")))


def name():
    return rng.choice([
        None, "", "a", "fz/" + str(rng.randrange(20)), "/fz/" + str(rng.randrange(5)),
        "/fz/" + str(rng.randrange(5)) + "/" + str(rng.randrange(5)),
        "/", "//", "/a//b", "/a/b/", "x" * rng.choice([1023, 1024, 1025, 5000]),
        "ümlaut/☃", "tab\tname", "quote'\"name", "back\\slash", "nul?",
    ])


def mode():
    return rng.choice([None, "", "exclusive", "shared", "EX", "pr", "NL", "cr", "CW", "PW",
                       "bogus", "EXCLUSIVE ", "shared;drop table x", "ex"])


def interval():
    return rng.choice([None, "0", "-1 s", "1 ms", "10 ms", "50 ms", "1 s", "1 day -25 hours",
                       "1000 years", "2000 years", "178000000 years", "1 month", "-infinity",
                       "infinity", "nonsense"])


def owner():
    return rng.choice([None, None, "", "k", "fz-owner", "k" * 255, "k" * 256, "ctl\x01key",
                       "del\x7f", "ünïcode-key", "fz-" + str(rng.randrange(5))])


def number():
    return rng.choice([None, 0, -1, 1, 2, 3, 5, 2 ** 31 - 1, -2 ** 31])


def value():
    return rng.choice([None, "", "host:5432", "v" * 1024, "v" * 1025, "ümlaut☃", "ctl\x01v"])


def keep():
    return rng.choice([None, False, True])


def call():
    fn = rng.randrange(18)
    if fn == 16:
        return "SELECT dlock_force_release(%s, %s, %s)", (name(), owner(), value())
    if fn == 17:
        return "SELECT dlock_force_release_all(%s, %s)", (owner(), value())
    if fn == 0:
        return "SELECT dlock_acquire(%s, %s, %s::interval, %s::interval, %s, %s)", \
            (name(), mode(), rng.choice([interval(), "10 ms"]), interval(), owner(), keep())
    if fn == 10:
        return "SELECT dlock_semaphore(%s, %s, %s, %s::interval, %s::interval, %s, %s)", \
            (name(), number(), number(), rng.choice([interval(), "10 ms"]), interval(), owner(),
             keep())
    if fn == 11:
        return "SELECT dlock_try_semaphore(%s, %s, %s, %s::interval, %s)", \
            (name(), number(), number(), interval(), owner())
    if fn == 12:
        return "SELECT dlock_semaphore_available(%s)", (name(),)
    if fn == 13:
        return "SELECT dlock_campaign(%s, %s, %s::interval, %s::interval, %s, %s)", \
            (name(), value(), rng.choice([interval(), "10 ms"]), interval(), owner(), keep())
    if fn == 14:
        return "SELECT dlock_proclaim(%s, %s, %s)", (name(), value(), owner())
    if fn == 15:
        return "SELECT * FROM dlock_leader(%s)", (name(),)
    if fn == 1:
        return "SELECT dlock_try_acquire(%s, %s, %s::interval, %s)", (name(), mode(), interval(), owner())
    if fn == 2:
        return "SELECT dlock_release(%s, %s)", (name(), owner())
    if fn == 3:
        return "SELECT dlock_renew(%s, %s::interval, %s)", (name(), interval(), owner())
    if fn == 4:
        return "SELECT dlock_release_all(%s)", (owner(),)
    if fn == 5:
        return "SELECT dlock_convert(%s, %s, %s::interval, %s)", \
            (name(), mode(), rng.choice([interval(), "10 ms"]), owner())
    if fn == 6:
        arr = rng.choice([None, [], [name() for _ in range(rng.randrange(1, 6))],
                          ["d", "d", "e"], ["m%d" % i for i in range(70)]])
        return "SELECT dlock_acquire_all(%s::text[], %s, %s::interval, %s::interval, %s, %s)", \
            (arr, mode(), rng.choice([interval(), "10 ms"]), interval(), owner(), keep())
    if fn == 7:
        return "SELECT dlock_check(%s, %s)", \
            (name(), rng.choice([None, 0, -1, 2 ** 63 - 1, rng.randrange(1, 100000)]))
    if fn == 8:
        return "SELECT * FROM dlock_holder(%s)", (name(),)
    return "SELECT dlock_new_owner()", ()


def attempt(cur, i, sql, args, allowed, bad):
    """One call: "ok", "rejected" (with a documented SQLSTATE, else noted in
    bad), or "lost" (the connection went: noted in bad)."""
    try:
        cur.execute(sql, args)
        cur.fetchall()
        return "ok"
    except psycopg2.Error as e:
        if e.pgcode is None:
            bad.append("call %d lost the connection: %s %r" % (i, sql, args))
            return "lost"
        if e.pgcode not in allowed:
            bad.append("undocumented SQLSTATE %s (%s) for %s %r"
                       % (e.pgcode, str(e).strip().splitlines()[0], sql, args))
        return "rejected"
    except ValueError:
        return "rejected"  # a NUL byte never reaches the server


# As ordinary roles: what the roles, grants, quotas and key binding add.
UNPRIVILEGED = DOCUMENTED | {"42501", "53400", "53200", "54000"}
FZ_KEYS = ["fz-%d" % i for i in range(5)]


def admin_call():
    """what only dlock_admin or the worker may do"""
    return rng.choice([
        ("SELECT dlock_grant(%s, %s)", ("/", "fz_other")),
        ("SELECT dlock_revoke(%s, %s)", ("/fz", "fz_app")),
        ("SELECT dlock_set_quota(%s, NULL, NULL)", ("fz_other",)),
        ("DELETE FROM dlock.grants", ()),
        ("UPDATE dlock.held SET expires_at = NULL", ()),
        ("SELECT count(*) FROM dlock.quotas", ()),
        ("SELECT dlock_force_release(%s, %s, %s)", ("/fz/a", None, "fuzz")),
        ("SELECT dlock_force_release_all(%s, %s)", (rng.choice(FZ_KEYS), "fuzz")),
        ("SELECT dlock_stats_reset()", ()),
    ])


def unprivileged(admin, calls):
    """Two login roles, one bound to the prefix /fz, the other under a
    quota of 5 named locks (2 per owner), each in its own session, calling
    at random with owner keys both know.  Every refusal must be documented;
    at every 100th call (seen as superuser) fz_app holds nothing outside its
    grant and fz_other no more named locks than its quota."""
    cur = admin.cursor()
    for r in ("fz_app", "fz_other"):
        cur.execute("DROP ROLE IF EXISTS %s" % r)
        cur.execute("CREATE ROLE %s LOGIN IN ROLE dlock_user" % r)
    cur.execute("SELECT dlock_grant('/fz', 'fz_app')")
    cur.execute("SELECT dlock_set_quota('fz_other', 5, 2)")
    sessions = []
    for r in ("fz_app", "fz_other"):
        c = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"), user=r)
        c.autocommit = True
        c.cursor().execute("SET statement_timeout = '2s'")
        sessions.append(c)
    ok = rejected = 0
    bad = []
    violations = []
    for i in range(calls):
        sql, args = admin_call() if rng.randrange(20) == 0 else call()
        with sessions[rng.randrange(2)].cursor() as k:
            result = attempt(k, i, sql, args, UNPRIVILEGED, bad)
        if result == "lost":
            break
        ok += result == "ok"
        rejected += result == "rejected"
        if i % 100 == 99:
            cur.execute("SELECT count(*) FROM dlock.held WHERE role = 'fz_app'::regrole"
                        " AND NOT implied AND name <> '/fz' AND name NOT LIKE '/fz/%%'")
            if cur.fetchone()[0]:
                violations.append("call %d: fz_app holds a name outside /fz" % i)
            cur.execute("SELECT count(*) FROM dlock.held WHERE role = 'fz_other'::regrole"
                        " AND NOT implied")
            n = cur.fetchone()[0]
            if n > 5:
                violations.append("call %d: fz_other holds %d named locks (quota 5)" % (i, n))
    checks = []
    for c in sessions:
        with c.cursor() as k:
            k.execute("SET statement_timeout = 0")
            k.execute("SELECT dlock_release_all()")
            for key in FZ_KEYS + ["fz-owner", "k", "ünïcode-key", "k" * 255]:
                try:
                    k.execute("SELECT dlock_release_all(%s)", (key,))
                except psycopg2.Error as e:
                    if e.pgcode != "42501":  # the other role's key
                        bad.append("release_all(%r): %s" % (key, e.pgcode))
        c.close()
    cur.execute("SELECT count(*) FROM dlock.held WHERE role IN ('fz_app'::regrole, 'fz_other'::regrole)")
    checks.append(("unprivileged: nothing left held by the two roles", cur.fetchone()[0] == 0))
    checks.append(("unprivileged: no lock outside the grant, none over the quota (%s)"
                   % ("; ".join(violations[:3]) or "checked every 100 calls"), not violations))
    checks.append(("unprivileged: every rejection documented, no connection lost", not bad))
    cur.execute("SELECT count(*) FROM dlock.grants WHERE role = 'fz_app'::regrole AND prefix = '/fz'")
    checks.append(("unprivileged: grants and quotas untouched by the roles",
                   cur.fetchone()[0] == 1))
    cur.execute("SELECT dlock_revoke('/fz', 'fz_app'), dlock_set_quota('fz_other', NULL, NULL)")
    cur.execute("DROP ROLE fz_app, fz_other")
    print("unprivileged, 2 sessions: %d calls: %d succeeded, %d rejected" % (calls, ok, rejected))
    for b in bad[:10]:
        print("  " + b)
    return checks


def main():
    conn = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("SET statement_timeout = '2s'")
    ok = rejected = 0
    bad = []
    for i in range(CALLS):
        sql, args = call()
        result = attempt(cur, i, sql, args, DOCUMENTED, bad)
        if result == "lost":
            break
        ok += result == "ok"
        rejected += result == "rejected"
        if i % 500 == 499:
            cur.execute("SELECT dlock_release_all()")
    checks = []
    try:
        cur.execute("SET statement_timeout = 0")
        cur.execute("SELECT dlock_release_all()")
        for k in ["fz-owner", "k", "ünïcode-key", "k" * 255] + ["fz-%d" % i for i in range(5)]:
            cur.execute("SELECT dlock_release_all(%s)", (k,))
        cur.execute("SELECT count(*) FROM dlock.locks WHERE pid = pg_backend_pid()")
        checks.append(("nothing left held or queued by the fuzzer", cur.fetchone()[0] == 0))
        cur.execute("SELECT count(*) FROM dlock.queue")
        checks.append(("no queue rows", cur.fetchone()[0] == 0))
        cur.execute("SELECT dlock_acquire('fz/after') > 0 AND dlock_release('fz/after')")
        checks.append(("the lock manager still serves", cur.fetchone()[0]))
    except psycopg2.Error as e:
        checks.append(("server still answers after fuzzing (%s)" % e, False))
    checks.append(("every rejection carried a documented SQLSTATE, no connection lost", not bad))
    try:
        checks += unprivileged(conn, max(CALLS // 2, 500))
    except psycopg2.Error as e:
        checks.append(("unprivileged phase ran (%s)" % e, False))
    print("%d calls: %d succeeded, %d rejected" % (CALLS, ok, rejected))
    for b in bad[:10]:
        print("  " + b)
    tally = Tally()
    for what, good in checks:
        tally.check(what, good)
    print(tally.summary("fuzz"))
    return 0 if tally.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
