#!/usr/bin/python3
"""Randomized API fuzzer for dlock.

Calls every dlock function with random, mostly bad arguments: NULLs, empty
and oversized names, odd bytes, malformed paths, unknown modes,
zero/negative/huge intervals, empty, long and control-character owner keys,
arrays with NULLs and duplicates.  Every call must either succeed or fail
with one of the documented SQLSTATEs; the server must never crash; and
afterwards nothing may be left queued or held by the fuzzing session.

Usage: fuzz.py CALLS   (connection from PG* variables)
Prints "fuzz: N passed, M failed".
"""
import os
import random
import sys

import psycopg2

CALLS = int(sys.argv[1]) if len(sys.argv) > 1 else 3000
DOCUMENTED = {"22004", "22023", "22007", "22008", "22015", "54000", "DL001", "DL002",
              "DL003", "40P01", "57014", "2202E", "22P02", "22021"}

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


def call():
    fn = rng.randrange(8)
    if fn == 0:
        return "SELECT dlock_acquire(%s, %s, %s::interval, %s::interval, %s)", \
            (name(), mode(), rng.choice([interval(), "10 ms"]), interval(), owner())
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
        return "SELECT dlock_acquire_all(%s::text[], %s, %s::interval, %s::interval, %s)", \
            (arr, mode(), rng.choice([interval(), "10 ms"]), interval(), owner())
    return "SELECT dlock_new_owner()", ()


def main():
    conn = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    conn.autocommit = True
    cur = conn.cursor()
    cur.execute("SET statement_timeout = '2s'")
    ok = rejected = 0
    bad = []
    for i in range(CALLS):
        sql, args = call()
        try:
            cur.execute(sql, args)
            cur.fetchall()
            ok += 1
        except psycopg2.Error as e:
            if e.pgcode is None:
                bad.append("call %d lost the connection: %s %r" % (i, sql, args))
                break
            if e.pgcode not in DOCUMENTED:
                bad.append("undocumented SQLSTATE %s (%s) for %s %r"
                           % (e.pgcode, str(e).strip().splitlines()[0], sql, args))
            rejected += 1
        except ValueError:
            rejected += 1  # a NUL byte never reaches the server
        if i % 500 == 499:
            cur.execute("SELECT dlock_release_all()")
    passed = failed = 0
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
    print("%d calls: %d succeeded, %d rejected" % (CALLS, ok, rejected))
    for b in bad[:10]:
        print("  " + b)
    for what, good in checks:
        print("%s %s" % ("ok  " if good else "FAIL", what))
        passed += good
        failed += not good
    print("fuzz: %d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
