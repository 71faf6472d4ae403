#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""The Python client against real servers (clients/python/test.sh starts them).

Each check prints "ok   <what>" or "FAIL <what>: <why>"; the last line is
"clients-python: N passed, M failed".  The servers come from the
environment clients/testenv.sh writes (DLOCK_TEST_*).  Every backend —
psycopg 3, psycopg2, MySQLdb, PyMySQL — runs the same checks: tokens,
exclusion of processes with fencing, lease loss (refused renewal, a killed
connection that cannot come back, an admin's release), cancellation,
no release of another holder's lock, semaphores, elections, bad input; and
pooled waits through a real pgbouncer with fewer server connections than
waiters.
"""

import asyncio
import fcntl
import os
import signal
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# dlock comes from the wheel installed in test.sh's venv (run with -P: the
# script's directory, which holds the source, is not on sys.path)
sys.path.append(os.path.join(ROOT, "regress"))
import dlock  # noqa: E402
from checklib import TALLY  # noqa: E402

ENV = os.environ
PG = dict(host=ENV.get("DLOCK_TEST_PG_HOST"), port=ENV.get("DLOCK_TEST_PG_PORT"),
          user="postgres", dbname="postgres")
BOUNCER = dict(host=ENV.get("DLOCK_TEST_BOUNCER_HOST"), port=ENV.get("DLOCK_TEST_BOUNCER_PORT"),
               user="postgres", dbname="postgres")
MY_SOCKET = ENV.get("DLOCK_TEST_MY_SOCKET")

class Backend:
    """One driver: how to connect, and what the admin sees."""

    def __init__(self, name, connect, pg, connect_as=None):
        self.name, self.connect, self.pg = name, connect, pg
        self.connect_as = connect_as  # (user=..., dbname=...): another account or database
        self._admin = None

    def admin(self):
        if self._admin is None:
            self._admin = self.connect()
            if self.pg:
                self._admin.autocommit = True
            else:
                self._admin.autocommit(True)
        return self._admin

    def query(self, sql, params=()):
        cur = self.admin().cursor()
        try:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description else []
        finally:
            cur.close()

    def rows(self, name):
        """Holders and waiters of name (kept places too)."""
        return list(self.query("SELECT owner, granted FROM dlock.locks WHERE name = %s", (name,)))

    def admin_release(self, name, key):
        return self.query("SELECT dlock_release(%s, %s)", (name, key))[0][0]

    def kill_connection(self, conn):
        """End a connection from the server side, as a crash of its link would."""
        if self.pg:
            pid = conn.info.backend_pid if hasattr(conn, "info") and hasattr(conn.info, "backend_pid") \
                else conn.get_backend_pid()
            self.query("SELECT pg_terminate_backend(%s)", (pid,))
        else:
            cur = conn.cursor()
            cur.execute("SELECT CONNECTION_ID()")
            cid = cur.fetchone()[0]
            cur.close()
            self.query("KILL %s" % int(cid))  # an integer we read, not input

    def server_error(self):
        if self.name == "psycopg":
            import psycopg
            return psycopg.Error
        if self.name == "psycopg2":
            import psycopg2
            return psycopg2.Error
        if self.name == "MySQLdb":
            import MySQLdb
            return MySQLdb.Error
        import pymysql
        return pymysql.Error


def backends():
    out = []
    import psycopg
    out.append(Backend("psycopg", lambda: psycopg.connect(autocommit=True, **PG), True,
                       lambda **kw: psycopg.connect(autocommit=True, **dict(PG, **kw))))
    import psycopg2
    out.append(Backend("psycopg2", lambda: psycopg2.connect(**PG), True,
                       lambda **kw: psycopg2.connect(**dict(PG, **kw))))
    import MySQLdb
    out.append(Backend("MySQLdb", lambda: MySQLdb.connect(unix_socket=MY_SOCKET, user="root"), False,
                       lambda user: MySQLdb.connect(unix_socket=MY_SOCKET, user=user)))
    import pymysql
    out.append(Backend("PyMySQL", lambda: pymysql.connect(unix_socket=MY_SOCKET, user="root"), False,
                       lambda user: pymysql.connect(unix_socket=MY_SOCKET, user=user)))
    return out


def check(what, fn, *args):
    t0 = time.monotonic()
    try:
        fn(*args)
    except Exception as e:
        TALLY.check(what, False, e)
        traceback.print_exc(limit=4, file=sys.stdout)
    else:
        TALLY.check("%s (%.1f s)" % (what, time.monotonic() - t0), True)
    sys.stdout.flush()


def expect(cond, msg):
    if not cond:
        raise AssertionError(msg)


def wait_until(pred, seconds, step=0.02):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


# ------------------------------------------------------------- the checks

def t_tokens(b):
    name = "py/%s/tokens" % b.name
    tokens = []
    for _ in range(3):
        with dlock.lock(b.connect, name, ttl=10, timeout=5) as held:
            expect(isinstance(held.token, int) and held.token > 0, "token %r" % held.token)
            expect(len(b.rows(name)) == 1, "one holder in dlock.locks while held")
            tokens.append(held.token)
    expect(tokens == sorted(set(tokens)), "tokens increase: %s" % tokens)
    expect(b.rows(name) == [], "released after the block: %s" % b.rows(name))


def worker(backend_name, name, rounds, store):
    """One process of the exclusion check: fencing-checked critical sections."""
    b = next(x for x in backends() if x.name == backend_name)
    bad = 0
    for _ in range(rounds):
        with dlock.lock(b.connect, name, ttl=10, timeout=60) as held:
            inside = store + ".inside"
            try:
                os.mkdir(inside)  # fails if another holder is inside
            except FileExistsError:
                bad += 1
                print("overlap: token %d entered while another was inside" % held.token)
                continue
            with open(store, "a+") as f:
                fcntl.flock(f, fcntl.LOCK_EX)
                f.seek(0)
                seen = [int(x) for x in f.read().split()]
                if seen and held.token <= seen[-1]:
                    bad += 1
                    print("fencing: token %d after %d" % (held.token, seen[-1]))
                f.write("%d\n" % held.token)
            time.sleep(0.003)
            os.rmdir(inside)
    print("violations %d" % bad)
    sys.exit(1 if bad else 0)


def t_exclusion(b, tmp):
    name = "py/%s/exclusion" % b.name
    store = os.path.join(tmp, "fence-" + b.name)
    if os.path.exists(store):
        os.unlink(store)
    procs, rounds = 4, 15
    ps = [subprocess.Popen([sys.executable, "-P", __file__, "--worker", b.name, name, str(rounds), store],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
          for _ in range(procs)]
    outs = [p.communicate(timeout=240)[0] for p in ps]
    for p, out in zip(ps, outs):
        expect(p.returncode == 0, "worker exit %s: %s" % (p.returncode, out.strip()[-500:]))
    with open(store) as f:
        tokens = [int(x) for x in f.read().split()]
    expect(len(tokens) == procs * rounds, "%d critical sections, expected %d" % (len(tokens), procs * rounds))
    expect(tokens == sorted(set(tokens)), "tokens strictly increasing in entry order")


def t_refused(b):
    """An admin's release: the next renewal is refused, the holder is told."""
    name = "py/%s/refused" % b.name
    told = []
    with dlock.lock(b.connect, name, ttl=3, on_lost=lambda h: told.append(time.monotonic()),
                    raise_on_lost=False) as held:
        expect(b.admin_release(name, held.owner) in (True, 1), "admin release of the key")
        t0 = time.monotonic()
        expect(held.lost_event.wait(1.0 + 2.5), "lost within a renewal period (1 s) + margin")
        expect(held.lost and "no longer has" in held.lost_reason, "reason: %s" % held.lost_reason)
        expect(len(told) == 1 and told[0] - t0 < 3.5, "on_lost called once: %s" % told)
        try:
            held.check()
            raise AssertionError("check() did not raise after the loss")
        except dlock.LeaseLost:
            pass
    expect(b.rows(name) == [], "nothing left")


def t_killed_and_back(b):
    """A killed connection that can come back: renewed on a new one, not lost."""
    name = "py/%s/killed" % b.name
    conns = []

    def factory():
        c = b.connect()
        conns.append(c)
        return c
    with dlock.lock(factory, name, ttl=3) as held:
        b.kill_connection(conns[-1])
        time.sleep(3.5)  # past the first lease: only renewals keep it
        expect(not held.lost, "not lost: %s" % held.lost_reason)
        expect(len(conns) >= 2, "renewed over a new connection")
        expect([r[0] for r in b.rows(name)] == [held.owner], "still the holder")
    expect(b.rows(name) == [], "released")


def t_killed_for_good(b):
    """The holder's connection is killed and no new one can be had: lost
    once the lease could have ended, and the work is told."""
    name = "py/%s/stalled" % b.name
    conns = []
    gate = threading.Event()

    def factory():
        if conns:
            gate.wait(30)  # the server is unreachable
            raise OSError("unreachable")
        c = b.connect()
        conns.append(c)
        return c
    t_start = time.monotonic()
    # ttl 5: the lease is given up at 4.5 s, half a second before it could
    # end, which a stalled 2-core machine keeps
    with dlock.lock(factory, name, ttl=5, raise_on_lost=False) as held:
        b.kill_connection(conns[0])
        expect(held.lost_event.wait(5 + 2.5), "lost within the lease + margin")
        took = time.monotonic() - t_start
        expect(took < 5.0, "lost before the lease could end (%.2f s)" % took)
        gate.set()
    expect(wait_until(lambda: b.rows(name) == [], 5), "gone on the server (released or run out)")


def t_body_raises(b):
    name = "py/%s/raises" % b.name
    try:
        with dlock.lock(b.connect, name, ttl=10):
            raise KeyError("boom")
    except KeyError:
        pass
    expect(b.rows(name) == [], "released after the body raised")


def t_timeout(b):
    name = "py/%s/timeout" % b.name
    with dlock.lock(b.connect, name, ttl=10):
        t0 = time.monotonic()
        try:
            with dlock.lock(b.connect, name, ttl=10, timeout=1.2):
                raise AssertionError("granted while held")
        except dlock.Timeout:
            pass
        took = time.monotonic() - t0
        expect(1.1 < took < 4, "timed out after %.2f s" % took)
        expect(len(b.rows(name)) == 1, "only the holder left: %s" % b.rows(name))
        try:
            with dlock.lock(b.connect, name, ttl=10, timeout=0):
                raise AssertionError("try granted while held")
        except dlock.Timeout:
            pass
    expect(b.rows(name) == [], "nothing left")


def t_interrupted_wait(b):
    """An exception raised into a waiting call (a signal handler, as Ctrl-C
    does) withdraws the request: no kept place is left in line."""
    name = "py/%s/interrupted" % b.name

    class Alarm(Exception):
        pass

    def on_alarm(signum, frame):
        raise Alarm()
    old = signal.signal(signal.SIGALRM, on_alarm)
    try:
        with dlock.lock(b.connect, name, ttl=30) as holder:
            signal.setitimer(signal.ITIMER_REAL, 1.0)
            try:
                with dlock.lock(b.connect, name, ttl=30):
                    raise AssertionError("granted while held")
            except Alarm:
                pass
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            expect([r[0] for r in b.rows(name)] == [holder.owner],
                   "only the holder left: %s" % b.rows(name))
    finally:
        signal.signal(signal.SIGALRM, old)
    expect(b.rows(name) == [], "nothing left")


def t_not_anothers(b):
    """After a loss, leaving the block never frees the next holder's lock."""
    name = "py/%s/anothers" % b.name
    first = dlock.lock(b.connect, name, ttl=3, raise_on_lost=False)
    a = first.__enter__()
    b.admin_release(name, a.owner)
    second = dlock.lock(b.connect, name, ttl=10, timeout=5)
    other = second.__enter__()
    try:
        expect(a.lost_event.wait(4), "the first holder was told")
        first.__exit__(None, None, None)  # leaves after the other took the lock
        rows = b.rows(name)
        expect([r[0] for r in rows] == [other.owner], "the other still holds: %s" % rows)
        expect(other.token > a.token, "a larger token for the next holder")
    finally:
        second.__exit__(None, None, None)
    expect(b.rows(name) == [], "nothing left")


def t_semaphore(b):
    name = "py/%s/sem" % b.name
    with dlock.semaphore(b.connect, name, 2, ttl=10) as s1, \
            dlock.semaphore(b.connect, name, 2, ttl=10) as s2:
        expect(s2.token > s1.token, "tokens")
        try:
            with dlock.semaphore(b.connect, name, 2, ttl=10, timeout=0.5):
                raise AssertionError("a third permit of 2")
        except dlock.Timeout:
            pass
        expect(len(b.rows(name)) == 2, "two holders, no waiter left: %s" % b.rows(name))
    expect(b.rows(name) == [], "nothing left")


def t_leader(b):
    name = "py/%s/election" % b.name
    with dlock.leader(b.connect, name, "host-a:1", ttl=10) as lead:
        got = dlock.current_leader(b.connect, name)
        expect(got is not None and got[0] == "host-a:1", "leader's value: %s" % (got,))
        if b.pg:
            expect(got[1] == lead.token, "term = token")
        lead.proclaim("host-a:2")
        expect(dlock.current_leader(b.connect, name)[0] == "host-a:2", "proclaimed")
        try:
            with dlock.leader(b.connect, name, "host-b:1", ttl=10, timeout=0.5):
                raise AssertionError("two leaders")
        except dlock.Timeout:
            pass
    expect(dlock.current_leader(b.connect, name) is None, "nobody leads after the block")
    with dlock.leader(b.connect, name, "host-b:1", ttl=10) as second:
        expect(second.token > lead.token, "a later term")


def t_bad_input(b):
    try:
        dlock.lock(b.connect, "", ttl=10)
        raise AssertionError("empty name accepted")
    except ValueError:
        pass
    try:
        dlock.lock(b.connect, "x", ttl=0)
        raise AssertionError("ttl 0 accepted")
    except ValueError:
        pass
    name = "py/%s/badmode" % b.name
    try:
        with dlock.lock(b.connect, name, ttl=10, mode="sideways"):
            raise AssertionError("unknown mode granted")
    except dlock.DatabaseError as e:
        expect("mode" in str(e).lower(), "the server's message names the mode: %s" % e)
        expect(repr(name) in str(e) and e.name == name, "the error names the lock: %s" % e)
        expect(isinstance(e.__cause__, b.server_error()), "the driver's error as cause: %r" % e.__cause__)
    expect(b.rows(name) == [], "nothing left")


def t_mysql_plain_refused(b):
    c = b.connect()
    try:
        dlock.lock(c, "x").__enter__()
        raise AssertionError("a plain %s connection accepted" % b.name)
    except TypeError as e:
        expect("factory" in str(e), "the error says what to pass: %s" % e)
    finally:
        c.close()


# ------------------------------------- explicit calls, decorator, loss in a with

def t_explicit(b):
    """acquire()/renew()/locked()/release() on the Lock object."""
    name = "py/%s/explicit" % b.name
    lk = dlock.lock(b.connect, name, ttl=3, timeout=5)
    expect(not lk.locked(), "not locked before acquire()")
    held = lk.acquire()
    expect(held is not None and held.token > 0, "acquire() returns the Held: %r" % held)
    expect(lk.locked() and [r[0] for r in b.rows(name)] == [held.owner], "locked() and held")
    try:
        lk.acquire()
        raise AssertionError("a second acquire() of the same object accepted")
    except dlock.Error as e:
        expect(repr(name) in str(e), "the error names the lock: %s" % e)
    other = dlock.lock(b.connect, name, ttl=3)
    t0 = time.monotonic()
    expect(other.acquire(timeout=0.5) is None, "another acquire(timeout=0.5) gives None")
    expect(time.monotonic() - t0 < 3 and not other.locked(), "and is not locked")
    time.sleep(1.5)
    lk.renew()  # explicit; then the lease must last ttl from now
    time.sleep(1.6)
    expect(lk.locked() and len(b.rows(name)) == 1, "still held after renew()")
    expect(lk.release() is True, "release() True: held to the end")
    expect(not lk.locked() and b.rows(name) == [], "released")
    try:
        lk.release()
        raise AssertionError("release() of a released lock accepted")
    except dlock.Error:
        pass
    # lost: renew() raises LeaseLost, locked() is False, release() False
    held = lk.acquire()
    expect(held is not None, "acquired again")
    b.admin_release(name, held.owner)
    try:
        lk.renew()
        raise AssertionError("renew() after an admin's release did not raise")
    except dlock.LeaseLost as e:
        expect(repr(name) in str(e), "LeaseLost names the lock: %s" % e)
    expect(held.lost and not lk.locked(), "lost, not locked()")
    expect(lk.release() is False, "release() False after a loss")
    expect(b.rows(name) == [], "nothing left")


def t_decorator(b):
    """@dlock.lock(...): every call holds its own lease; calls from threads
    never overlap; the function's result and exceptions pass through."""
    name = "py/%s/decorated" % b.name
    inside, overlaps, seen = [0], [0], []
    mu = threading.Lock()

    @dlock.lock(b.connect, name, ttl=10, timeout=30)
    def work(x):
        """Doubles x under the lock."""
        with mu:
            inside[0] += 1
            overlaps[0] += inside[0] > 1
        seen.append(len(b.rows(name)) >= 1)
        time.sleep(0.05)
        with mu:
            inside[0] -= 1
        if x < 0:
            raise KeyError(x)
        return 2 * x
    results = []
    ts = [threading.Thread(target=lambda i=i: results.append(work(i))) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(60)
    expect(sorted(results) == [0, 2, 4, 6], "results: %s" % results)
    expect(overlaps[0] == 0 and all(seen) and len(seen) == 4, "one at a time, held: %s" % seen)
    expect(work.__name__ == "work" and "Doubles" in work.__doc__, "functools.wraps")
    try:
        work(-1)
        raise AssertionError("the exception was swallowed")
    except KeyError:
        pass
    expect(b.rows(name) == [], "nothing left")


def t_with_raises_on_lost(b):
    """A sync with block whose lease was lost inside raises LeaseLost as it
    ends (default); raise_on_lost=False ends it quietly."""
    name = "py/%s/with-lost" % b.name
    try:
        with dlock.lock(b.connect, name, ttl=3) as held:
            b.admin_release(name, held.owner)
            expect(held.lost_event.wait(3.5), "lost within a renewal period + margin")
        raise AssertionError("the with block ended quietly after a loss")
    except dlock.LeaseLost as e:
        expect(repr(name) in str(e), "LeaseLost names the lock: %s" % e)
    with dlock.lock(b.connect, name, ttl=3, raise_on_lost=False) as held:
        b.admin_release(name, held.owner)
        expect(held.lost_event.wait(3.5), "lost")
    try:
        with dlock.lock(b.connect, name, ttl=3) as held:
            b.admin_release(name, held.owner)
            held.lost_event.wait(3.5)
            raise KeyError("the body's own")
    except KeyError:
        pass  # the body's exception, not LeaseLost
    expect(b.rows(name) == [], "nothing left")


def t_async_explicit(b):
    """asyncio: acquire_async/renew_async/release_async; a decorated
    coroutine function; an async with whose lease was lost while the body
    did not await raises LeaseLost."""
    import psycopg
    name = "py/%s/async-explicit" % b.name

    async def factory():
        return await psycopg.AsyncConnection.connect(**PG)

    async def main():
        lk = dlock.lock(factory, name, ttl=3, timeout=5)
        held = await lk.acquire_async()
        expect(held is not None and lk.locked(), "acquired")
        await lk.renew_async()
        expect(await asyncio.to_thread(b.rows, name) != [], "held")
        expect(await lk.release_async() is True, "released, held to the end")
        expect(await asyncio.to_thread(b.rows, name) == [], "nothing left")
        held = await lk.acquire_async()
        await asyncio.to_thread(b.admin_release, name, held.owner)
        try:
            await lk.renew_async()
            raise AssertionError("renew_async() after a loss did not raise")
        except dlock.LeaseLost:
            pass
        expect(await lk.release_async() is False, "release_async() False after a loss")

        @dlock.lock(factory, name, ttl=5, timeout=10)
        async def job(x):  # holders only (dlock.locks shows the waiters too)
            return (x, sum(1 for r in await asyncio.to_thread(b.rows, name) if r[1]))
        got = await asyncio.gather(job(1), job(2), job(3))
        expect(sorted(got) == [(1, 1), (2, 1), (3, 1)], "each call alone under the lock: %s" % got)
        expect(await asyncio.to_thread(b.rows, name) == [], "nothing left")
    asyncio.run(main())


# ------------------------------------------------------------ errors

def t_errors_pg(b):
    """Driver errors as dlock's, naming the lock, with the fix as a hint,
    the driver's error as __cause__, the first error (the acquire's, not
    the clean-up's)."""
    b.query("DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'dlock_nopriv') "
            "THEN CREATE ROLE dlock_nopriv LOGIN; END IF; END$$")
    if not b.query("SELECT 1 FROM pg_database WHERE datname = 'dlock_elsewhere'"):
        b.query("CREATE DATABASE dlock_elsewhere")
    connect = b.connect_as
    name = "py/%s/errors" % b.name
    for timeout in (None, 0):
        try:
            with dlock.lock(lambda: connect(user="dlock_nopriv"), name, ttl=10, timeout=timeout):
                raise AssertionError("granted without dlock_user")
        except dlock.PermissionDenied as e:
            expect(e.name == name and repr(name) in str(e), "names the lock: %s" % e)
            expect("GRANT dlock_user" in str(e) and "dlock_user" in e.hint, "the hint: %s" % e)
            expect(isinstance(e.__cause__, b.server_error()), "cause %r" % e.__cause__)
            expect("dlock_try_acquire" in str(e.__cause__) if timeout == 0 else
                   "dlock_acquire" in str(e.__cause__), "the first error: %s" % e.__cause__)
            expect(e.code == "42501", "SQLSTATE %s" % e.code)
    try:
        with dlock.lock(lambda: connect(dbname="dlock_elsewhere"), name, ttl=10):
            raise AssertionError("granted in a database without dlock")
    except dlock.NotInstalled as e:
        expect(repr(name) in str(e) and "dlock.database" in str(e), "names the lock, the hint: %s" % e)
        expect(isinstance(e.__cause__, b.server_error()) and "dlock_acquire" in str(e.__cause__),
               "cause %r" % e.__cause__)
    try:
        dlock.current_leader(lambda: connect(dbname="dlock_elsewhere"), name)
        raise AssertionError("a leader read where dlock is not installed")
    except dlock.NotInstalled as e:
        expect(repr(name) in str(e), "names the election: %s" % e)


def t_errors_mysql(b):
    """MariaDB: no dlock_user → PermissionDenied; the plugin's function
    missing → NotInstalled with the install hint (put back after)."""
    b.query("CREATE USER IF NOT EXISTS 'dlock_nopriv'@'localhost'")
    name = "py/%s/errors" % b.name
    try:
        with dlock.lock(lambda: b.connect_as(user="dlock_nopriv"), name, ttl=10):
            raise AssertionError("granted without dlock_user")
    except dlock.PermissionDenied as e:
        expect(repr(name) in str(e) and "dlock_user" in e.hint, "names the lock, the hint: %s" % e)
        expect(isinstance(e.__cause__, b.server_error()), "cause %r" % e.__cause__)
        expect("dlock_acquire" in str(e.__cause__), "the first error: %s" % e.__cause__)
    b.query("DROP FUNCTION dlock_try_acquire")
    try:
        with dlock.lock(b.connect, name, ttl=10, timeout=0):
            raise AssertionError("granted by a missing function")
    except dlock.NotInstalled as e:
        expect(repr(name) in str(e) and "mysql_install.sh" in str(e), "names the lock, the hint: %s" % e)
        expect(isinstance(e.__cause__, b.server_error()), "cause %r" % e.__cause__)
    finally:
        b.query("CREATE FUNCTION dlock_try_acquire RETURNS INTEGER SONAME 'dlock_udf.so'")
    with dlock.lock(b.connect, name, ttl=10, timeout=0):
        pass  # put back


# ------------------------------------------------------------ observe

def t_observe(b, label, source, listen, poll, bound):
    """An observer sees the next leader within `bound` seconds after the
    leader resigns and after an admin's force release."""
    name = "py/%s/observe-%s" % (b.name, label)
    stop = threading.Event()
    seen = []  # (monotonic time, leader)
    errors = []

    def observer():
        try:
            for ld in dlock.observe(source, name, poll=poll, listen=listen, stop=stop):
                seen.append((time.monotonic(), ld))
        except Exception as e:
            errors.append(repr(e))
    th = threading.Thread(target=observer)
    th.start()
    expect(wait_until(lambda: seen, 10), "the first answer")
    expect(seen[0][1] is None, "nobody leads at first: %s" % seen)
    b_in = threading.Event()
    b_out = threading.Event()
    b_held = []

    def second():
        with dlock.leader(b.connect, name, "host-b", ttl=6, raise_on_lost=False) as h:
            b_held.append(h)
            b_in.set()
            h.lost_event.wait(30)
        b_out.set()
    with dlock.leader(b.connect, name, "host-a", ttl=30):
        expect(wait_until(lambda: seen[-1][1] is not None and seen[-1][1].value == "host-a", bound + 5),
               "host-a seen: %s" % seen)
        tb = threading.Thread(target=second)
        tb.start()
        time.sleep(0.3)  # host-b waits in line
        t_resign = time.monotonic()
    # resigned
    expect(wait_until(lambda: seen[-1][1] is not None and seen[-1][1].value == "host-b", bound + 5),
           "host-b seen after host-a resigned: %s" % seen)
    took = next(t for t, ld in seen if ld is not None and ld.value == "host-b") - t_resign
    expect(took < bound, "seen %.2f s after the resignation (bound %.1f s)" % (took, bound))
    expect(b_in.wait(5), "host-b leads")
    if b.pg:
        expect(seen[-1][1].term == b_held[0].token, "term = host-b's token")
    t_force = time.monotonic()
    b.query("SELECT dlock_force_release(%s, NULL, 'observe test')", (name,))
    expect(wait_until(lambda: seen[-1][1] is None, bound + 5), "nobody seen after the force release: %s" % seen)
    took = seen[-1][0] - t_force
    expect(took < bound, "seen %.2f s after the force release (bound %.1f s)" % (took, bound))
    stop.set()
    th.join(max(poll or 0.5, 5) + 5)
    expect(not th.is_alive(), "the observer ends when stopped")
    expect(not errors, "errors: %s" % errors)
    b_out.wait(35)


# ------------------------------------------------------------ packaging

def t_installed(b):
    """dlock comes from the installed wheel, typed, at the extension's version."""
    import importlib.metadata
    expect(os.path.realpath(dlock.__file__).startswith(os.path.realpath(sys.prefix)),
           "imported from the venv (%s), not the source tree" % dlock.__file__)
    expect(os.path.exists(os.path.join(os.path.dirname(dlock.__file__), "py.typed")), "py.typed")
    with open(os.path.join(ROOT, "pg_ext", "dlock.control")) as f:
        control = next(line.split("=")[1].strip().strip("'") for line in f
                       if line.startswith("default_version"))
    expect(dlock.__version__ == control, "__version__ %s = dlock.control's %s" % (dlock.__version__, control))
    dist = importlib.metadata.version("dlock-client")
    expect(dist == control, "the installed distribution's version %s = %s" % (dist, control))
    import typing
    hints = typing.get_type_hints(dlock.lock)
    expect("return" in hints and "ttl" in hints, "type hints on the public API: %s" % hints)


def t_docs_snippet(b):
    """docs/clients.md's Python lines (between its python-snippet markers)
    run as they are with the installed package, against the test server."""
    import re
    with open(os.path.join(ROOT, "docs", "clients.md")) as f:
        text = f.read()
    part = text.split("<!-- python-snippet:begin -->")[1].split("<!-- python-snippet:end -->")[0]
    code = re.search(r"```python\n(.*?)```", part, re.S).group(1)
    env = dict(os.environ, PGHOST=PG["host"], PGPORT=str(PG["port"]))
    p = subprocess.run([sys.executable, "-P", "-c", code], env=env, capture_output=True,
                       text=True, timeout=60, cwd="/")
    expect(p.returncode == 0, "exit %d: %s" % (p.returncode, (p.stdout + p.stderr)[-800:]))
    m = re.search(r"orders/42 held, fencing token (\d+)", p.stdout)
    expect(m and int(m.group(1)) > 0, "prints the token: %r" % p.stdout)
    expect("leader: None" in p.stdout, "prints the leader: %r" % p.stdout)
    expect(b.rows("orders/42") == [], "released")


# ------------------------------------------------------------ sources

def t_pg_plain_connection(b):
    """A psycopg connection shared with the renewals, in a transaction of
    the caller's that stays open and uncommitted by dlock."""
    c = b.connect()
    c.autocommit = False
    name = "py/%s/plain" % b.name
    cur = c.cursor()
    cur.execute("SELECT 1")  # the caller's transaction
    with dlock.lock(c, name, ttl=3) as held:
        time.sleep(2.5)  # renewed twice on the caller's connection
        expect(not held.lost, "not lost")
        expect(len(b.rows(name)) == 1, "held")
    status = c.info.transaction_status if hasattr(c, "info") and hasattr(c.info, "transaction_status") \
        else c.get_transaction_status()
    expect(int(status) != 0, "the caller's transaction is still open")
    c.rollback()
    c.close()
    expect(b.rows(name) == [], "released")


def t_psycopg2_pool(b):
    from psycopg2.pool import ThreadedConnectionPool
    pool = ThreadedConnectionPool(1, 2, **PG)
    name = "py/psycopg2/pool"
    try:
        with dlock.lock(pool, name, ttl=3) as held:
            time.sleep(1.5)
            expect(not held.lost and len(b.rows(name)) == 1, "held, renewed through the pool")
        expect(b.rows(name) == [], "released")
    finally:
        pool.closeall()


def t_pgbouncer(b, use_pool):
    """8 waiters through pgbouncer in transaction mode with 2 server
    connections: all granted in turn, never two at once (waits do not pin
    the server connections: each call is short and keeps its place)."""
    import psycopg
    name = "py/bouncer/%s" % ("pool" if use_pool else "factory")
    kw = dict(BOUNCER, autocommit=True, prepare_threshold=None)
    pool = None
    if use_pool:
        from psycopg_pool import ConnectionPool
        conninfo = psycopg.conninfo.make_conninfo(**{k: v for k, v in BOUNCER.items()})
        pool = ConnectionPool(conninfo, min_size=1, max_size=4,
                              kwargs=dict(autocommit=True, prepare_threshold=None))
        source = pool
    else:
        def source():
            return psycopg.connect(**kw)
    inside, overlaps, tokens, errors = [0], [0], [], []
    mu = threading.Lock()

    def client():
        try:
            for _ in range(2):
                with dlock.lock(source, name, ttl=20, timeout=90, poll=0.2) as held:
                    with mu:
                        inside[0] += 1
                        overlaps[0] += inside[0] > 1
                        tokens.append(held.token)
                    time.sleep(0.05)
                    with mu:
                        inside[0] -= 1
        except Exception as e:
            errors.append(repr(e))
    t0 = time.monotonic()
    ts = [threading.Thread(target=client) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    took = time.monotonic() - t0
    if pool:
        pool.close()
    expect(not errors, "errors: %s" % errors[:3])
    expect(len(tokens) == 16 and overlaps[0] == 0, "16 grants, %d overlaps" % overlaps[0])
    expect(tokens == sorted(set(tokens)), "tokens increase in grant order")
    expect(took < 90, "done in %.1f s" % took)
    expect(b.rows(name) == [], "nothing left")


# ------------------------------------------------------------- asyncio

async def _a_lost_cancels(source, b, name):
    done = asyncio.Event()

    async def guarded():
        async with dlock.lock(source, name, ttl=3) as held:
            await asyncio.to_thread(b.admin_release, name, held.owner)
            done.set()
            await asyncio.sleep(30)  # cancelled by the loss
    task = asyncio.create_task(guarded())
    await done.wait()
    t0 = time.monotonic()
    try:
        await asyncio.wait_for(task, 1.0 + 2.5)
        raise AssertionError("the guarded task ran on")
    except dlock.LeaseLost:
        pass
    expect(time.monotonic() - t0 < 3.5, "cancelled within a renewal period + margin")


async def _a_cancel_wait(source, b, name):
    async with dlock.lock(source, name, ttl=30) as holder:
        async def waiter():
            async with dlock.lock(source, name, ttl=30):
                raise AssertionError("granted while held")
        task = asyncio.create_task(waiter())
        await asyncio.sleep(1.0)  # waiting, with its place kept between calls
        rows = await asyncio.to_thread(b.rows, name)
        expect(len(rows) == 2, "the waiter is in line: %s" % rows)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        rows = await asyncio.to_thread(b.rows, name)
        expect([r[0] for r in rows] == [holder.owner], "the waiter withdrawn at once: %s" % rows)
    # cancelled while holding: released
    entered = asyncio.Event()

    async def holding():
        async with dlock.lock(source, name, ttl=30):
            entered.set()
            await asyncio.sleep(30)
    task = asyncio.create_task(holding())
    await entered.wait()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    expect(await asyncio.to_thread(b.rows, name) == [], "released after the cancel")


def t_async(b, kind):
    """asyncio: the guarded task is cancelled on loss (LeaseLost); a
    cancelled wait or hold leaves nothing behind."""
    import psycopg

    async def main():
        if kind == "connection":
            source = await psycopg.AsyncConnection.connect(autocommit=True, **PG)
        elif kind == "factory":
            async def source():
                return await psycopg.AsyncConnection.connect(**PG)
        elif kind == "pool":
            from psycopg_pool import AsyncConnectionPool
            source = AsyncConnectionPool(psycopg.conninfo.make_conninfo(**PG), min_size=1,
                                         max_size=3, kwargs=dict(autocommit=True), open=False)
            await source.open()
        else:  # a sync factory, its calls in threads (the MySQL drivers)
            source = b.connect
        try:
            await _a_lost_cancels(source, b, "py/%s/async-%s/lost" % (b.name, kind))
            await _a_cancel_wait(source, b, "py/%s/async-%s/cancel" % (b.name, kind))
        finally:
            if kind in ("connection", "pool"):
                await source.close()
    asyncio.run(main())


def main():
    tmp = sys.argv[1] if len(sys.argv) > 1 else "/tmp"
    bs = backends()
    check("the installed wheel: imported from the venv, py.typed, type hints, version = dlock.control's",
          t_installed, bs[0])
    check("docs/clients.md's Python lines, as they are, with the installed package", t_docs_snippet, bs[0])
    for b in bs:
        check("%s: acquire()/renew()/locked()/release(); renew() after a loss raises LeaseLost" % b.name,
              t_explicit, b)
        check("%s: @dlock.lock decorator: 4 threads one at a time, results and exceptions pass" % b.name,
              t_decorator, b)
        check("%s: a with block whose lease was lost raises LeaseLost at its end (raise_on_lost)" % b.name,
              t_with_raises_on_lost, b)
        if b.pg:
            check("%s: errors: no dlock_user → PermissionDenied, no extension → NotInstalled; hints, lock named, cause, first error" % b.name,
                  t_errors_pg, b)
        else:
            check("%s: errors: no dlock_user → PermissionDenied, plugin function missing → NotInstalled" % b.name,
                  t_errors_mysql, b)
        check("%s: tokens positive and increasing, released after the block" % b.name, t_tokens, b)
        check("%s: 4 processes × 15 grants, never two inside, fencing tokens increasing" % b.name,
              t_exclusion, b, tmp)
        check("%s: an admin's release: the next renewal is refused, lost and on_lost within a renewal period" % b.name,
              t_refused, b)
        check("%s: the holder's connection killed, a new one to be had: renewed, not lost" % b.name,
              t_killed_and_back, b)
        check("%s: the holder's connection killed, none to be had: lost before the lease could end" % b.name,
              t_killed_for_good, b)
        check("%s: the body raised: released" % b.name, t_body_raises, b)
        check("%s: timeout and try: dlock.Timeout, nothing left in line" % b.name, t_timeout, b)
        check("%s: an exception raised into a wait withdraws it" % b.name, t_interrupted_wait, b)
        check("%s: after a loss, leaving never frees the next holder's lock" % b.name, t_not_anothers, b)
        check("%s: semaphore of 2: a third permit times out, nothing left" % b.name, t_semaphore, b)
        check("%s: election: value, term, proclaim, one leader, a later term next" % b.name, t_leader, b)
        check("%s: bad input: ValueError or the server's error, nothing left" % b.name, t_bad_input, b)
        if b.pg:
            check("%s: a plain connection inside the caller's transaction" % b.name,
                  t_pg_plain_connection, b)
        else:
            check("%s: a plain connection is refused (not thread-safe)" % b.name,
                  t_mysql_plain_refused, b)
    pg3, pg2 = bs[0], bs[1]
    check("psycopg: observe over LISTEN dlock_leader (poll 30 s): next leader within 2 s of a resign and of a force release",
          t_observe, pg3, "listen", pg3.connect, None, 30, 2.0)
    check("psycopg2: observe over LISTEN dlock_leader (poll 30 s): next leader within 2 s of a resign and of a force release",
          t_observe, pg2, "listen", pg2.connect, None, 30, 2.0)
    import psycopg

    def bouncer():
        return psycopg.connect(autocommit=True, prepare_threshold=None, **BOUNCER)
    def t_pooler_detected():
        from dlock import _sql
        for connect, direct in ((pg3.connect, True), (bouncer, False)):
            c = connect()
            try:
                expect(_sql.direct_to_server(c) is direct, "%s: direct=%s" % (c.info.port, direct))
            finally:
                c.close()
    check("observe's choice: LISTEN on a direct connection, polling through pgbouncer (its port is not the server's)",
          t_pooler_detected)
    check("psycopg through pgbouncer: observe falls back to polling (0.3 s): next leader within 2 s",
          t_observe, pg3, "pgbouncer", bouncer, None, 0.3, 2.0)
    for b in bs[2:]:
        check("%s: observe polls dlock_leader (0.3 s): next leader within 2 s of a resign and of a force release" % b.name,
              t_observe, b, "poll", b.connect, None, 0.3, 2.0)
    check("psycopg asyncio: acquire_async/renew_async/release_async, a decorated coroutine function",
          t_async_explicit, pg3)
    check("psycopg2: a ThreadedConnectionPool as the source", t_psycopg2_pool, pg2)
    for kind in ("connection", "factory", "pool"):
        check("psycopg asyncio (%s): lost → task cancelled, LeaseLost; cancelled wait/hold leave nothing" % kind,
              t_async, pg3, kind)
    for b in bs[2:]:
        check("%s asyncio (sync factory in threads): lost → task cancelled; cancels leave nothing" % b.name,
              t_async, b, "threads")
    check("pgbouncer (2 server connections): 8 waiters with their own connections, 16 grants in turn",
          t_pgbouncer, pg3, False)
    check("pgbouncer (2 server connections): 8 waiters sharing a psycopg_pool of 4, 16 grants in turn",
          t_pgbouncer, pg3, True)
    print(TALLY.summary("clients-python"))
    sys.exit(1 if TALLY.failed else 0)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
    else:
        main()
