#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""A lock manager that is alive but does not answer, and settings that a
database owner can impose on it.  Each check once failed:

  stopped-worker: with the worker stopped (SIGSTOP: alive, answering
      nobody), a wait ends by its timeout, by pg_cancel_backend and by
      pg_terminate_backend; once it runs again, the abandoned requests are
      gone and the sessions work.  (Waits used to go on for good.)
  standby-gone: with synchronous_standby_names naming a standby that is not
      there (an isolated primary), a session's and an owner-keyed acquire
      with a timeout return NULL in time and a try-acquire waits until it is
      cancelled (a session's grant was once answered at once); when the
      commit goes through later, the grants nobody was told of are released
      again by the sessions' next calls.
  cut-wait: PostgreSQL ends a commit's wait for the synchronous standby
      early and returns as if it were confirmed; with the standby gone, a
      pg_cancel_backend or pg_terminate_backend of the lock manager, a fast
      shutdown whose SIGTERM reaches it first, or synchronous_standby_names
      cleared while its commit waits give the caller no token (each once
      answered one); a cleared setting gives the grant back (40003).
  hostile-settings: default_transaction_read_only, statement_timeout and
      lock_timeout set with ALTER DATABASE / ALTER ROLE do not reach the
      worker.  (It failed every batch, 55,909 log lines in 10 minutes.)
  failing-load: a failure that persists (a trigger that fails the worker's
      reload) is retried with growing pauses, logged a few times and not in
      a loop, and requests fail with its message instead of hanging.
  long-detail: a deadlock DETAIL of over 1 KiB in two-byte characters is cut
      on a character boundary (a LATIN1 client got 22021 instead of 40P01).
  synchronous-commit-off: with synchronous_commit = off for the database,
      a new block of tickets is still flushed before a token of it is
      handed out (the WAL writer is stopped, so only that flush can save
      it), and after a crash no token is handed out twice.

Usage: stuck.py DIR PORT [PART ...]   (its own cluster in DIR, started and
stopped here; run as root: it signals the server's processes; PART: one of
the functions below, to run only some)
Prints "ok"/"FAIL" lines and "stuck: N passed, M failed".
"""
import os
import signal
import subprocess
import sys
import threading
import time
import traceback

import psycopg2

from pgcheck import connect, q, report, until, worker_pid

HERE = os.path.dirname(os.path.abspath(__file__))
CLUSTER = os.path.join(HERE, "..", "..", "scripts", "pg_cluster.sh")
DIR, PORT = sys.argv[1], sys.argv[2]
LOG = os.path.join(DIR, "server.log")
checks = []

# A wait ends this long after its timeout (or cancel) at most, on a stalled
# machine too: the backend waits 0.5 s for a verdict and then leaves.
MARGIN = 5.0


def check(what, ok, detail=""):
    checks.append((what, bool(ok), detail))


def conn():
    # the role's and database's settings below must not reach the test's
    # sessions: startup options win over them before any statement runs (a
    # SET would itself run under a 1 ms statement_timeout)
    return connect(host=DIR, port=PORT, user="postgres", dbname="postgres",
                   options="-c statement_timeout=0 -c lock_timeout=0"
                           " -c default_transaction_read_only=off")


def wait_ready(timeout=30):  # noqa: E302 (Call is defined below)
    """Until a try-acquire goes through (a new worker has loaded)."""
    def probe():
        try:
            call = Call("SELECT dlock_try_acquire('probe') > 0 AND dlock_release('probe')")
        except psycopg2.Error:
            return False
        ok = call.done(5) and call.result is True
        if ok:
            call.c.close()
        return ok
    return until(probe, timeout, 0.1)


def restart_worker(obs):
    old = worker_pid(obs)
    q(obs, "SELECT pg_terminate_backend(%s)", (old,))
    until(lambda: worker_pid(obs) not in (None, old), 30, 0.05)
    return wait_ready()


class Call:
    """One statement on its own connection in a thread, timed."""

    def __init__(self, sql, args=(), c=None):
        self.c = c or conn()
        self.pid = self.c.get_backend_pid()
        self.result = self.error = None
        self.elapsed = None
        self.t = threading.Thread(target=self.run, args=(sql, args), daemon=True)
        self.t.start()

    def run(self, sql, args):
        start = time.monotonic()
        try:
            self.result = q(self.c, sql, args)[0][0]
        except psycopg2.Error as e:
            self.error = e.pgcode or "connection lost"
        self.elapsed = time.monotonic() - start

    def done(self, timeout):
        self.t.join(timeout)
        return not self.t.is_alive()


def waiting(obs, pid):
    return q(obs, "SELECT count(*) > 0 FROM dlock.locks WHERE pid = %s AND NOT granted",
             (pid,))[0][0]


def stopped_worker(obs):
    holder = conn()
    q(holder, "SELECT dlock_acquire('st/x')")
    timed = Call("SELECT dlock_acquire('st/x', timeout => '2 s')")
    cancelled = Call("SELECT dlock_acquire('st/x')")
    terminated = Call("SELECT dlock_acquire('st/x')")
    for call in (timed, cancelled, terminated):
        until(lambda: waiting(obs, call.pid), 15)
    wpid = worker_pid(obs)
    os.kill(wpid, signal.SIGSTOP)
    try:
        q(obs, "SELECT pg_cancel_backend(%s)", (cancelled.pid,))
        q(obs, "SELECT pg_terminate_backend(%s)", (terminated.pid,))
        ended = [call.done(2 + MARGIN) for call in (timed, cancelled, terminated)]
        check("stopped worker: a wait ends by its timeout",
              ended[0] and timed.error is None and timed.result is None,
              "still waiting" if not ended[0] else "%r %r after %.1f s" % (
                  timed.result, timed.error, timed.elapsed))
        check("stopped worker: a wait ends by pg_cancel_backend",
              ended[1] and cancelled.error == "57014",
              "still waiting" if not ended[1] else "%r %r" % (cancelled.result, cancelled.error))
        check("stopped worker: a wait ends by pg_terminate_backend",
              ended[2] and until(lambda: not q(obs, "SELECT count(*) FROM pg_stat_activity"
                                                    " WHERE pid = %s", (terminated.pid,))[0][0], 10),
              "still there")
        # the session whose wait timed out: its next call waits for the
        # abandoned request, and gives up by its own timeout too
        nxt = Call("SELECT dlock_acquire('st/y', timeout => '1 s')", c=timed.c)
        check("stopped worker: the next call of that session ends by its timeout",
              nxt.done(1 + MARGIN) and nxt.result is None and nxt.error is None,
              "%r %r" % (nxt.result, nxt.error))
    finally:
        os.kill(wpid, signal.SIGCONT)
    check("worker running again: abandoned requests gone, only the holder left",
          until(lambda: q(obs, "SELECT array_agg(pid) FROM dlock.locks WHERE name = 'st/x'")[0][0]
                == [q(holder, "SELECT pg_backend_pid()")[0][0]], 15),
          "%r" % (q(obs, "SELECT array_agg(pid || ' ' || granted) FROM dlock.locks")[0][0],))
    a = Call("SELECT dlock_acquire('st/y', timeout => '10 s') > 0", c=timed.c)
    b = Call("SELECT dlock_try_acquire('st/z') > 0", c=cancelled.c)
    check("worker running again: the sessions work",
          a.done(10 + MARGIN) and b.done(MARGIN) and a.result and b.result,
          "%r %r %r %r" % (a.result, a.error, b.result, b.error))
    for c in (holder, timed.c, cancelled.c):
        if Call("SELECT dlock_release_all()", c=c).done(MARGIN):
            c.close()


def standby_gone(obs):
    # a block of tickets now: its flush would wait for the standby anyway
    q(obs, "SELECT dlock_try_acquire('st/prime') > 0 AND dlock_release('st/prime')")
    q(obs, "ALTER SYSTEM SET synchronous_standby_names = 'nosuchstandby'")
    q(obs, "SELECT pg_reload_conf()")
    time.sleep(0.5)
    # a session's grant must wait for the standby too: an isolated old
    # primary would otherwise go on granting session locks that the
    # promoted standby grants again (it once answered in 0.1 s)
    session = Call("SELECT dlock_acquire('st/session', timeout => '3 s')")
    trying = Call("SELECT dlock_try_acquire('st/try')")
    ended = session.done(3 + MARGIN)
    check("standby gone: a session's acquire returns NULL by its timeout",
          ended and session.error is None and session.result is None,
          "still waiting" if not ended else "%r %r after %.1f s" % (
              session.result, session.error, session.elapsed))
    # a try has no timeout: like any write on this primary it waits until
    # it is cancelled (statement_timeout, pg_cancel_backend)
    check("standby gone: a session's try-acquire waits", not trying.done(0),
          "%r %r after %s s" % (trying.result, trying.error, trying.elapsed))
    q(obs, "SELECT pg_cancel_backend(%s)", (trying.pid,))
    ended = trying.done(MARGIN)
    check("standby gone: ... and ends by pg_cancel_backend", ended and trying.error == "57014",
          "still waiting" if not ended else "%r %r" % (trying.result, trying.error))
    call = Call("SELECT dlock_acquire('st/sync', ttl => '10 min', owner => 'ks', timeout => '3 s')")
    ended = call.done(3 + MARGIN)
    check("standby gone: an owner-keyed acquire returns NULL by its timeout",
          ended and call.error is None and call.result is None,
          "still waiting" if not ended else "%r %r after %.1f s" % (
              call.result, call.error, call.elapsed))
    q(obs, "ALTER SYSTEM RESET synchronous_standby_names")
    q(obs, "SELECT pg_reload_conf()")
    # the commit goes through now; the grant nobody was told of is undone
    # by the caller's next call, before anything it asks
    q(call.c, "SELECT dlock_try_acquire('st/other') > 0 AND dlock_release('st/other')")
    gone = until(lambda: q(obs, "SELECT count(*) = 0 FROM dlock.locks WHERE name = 'st/sync'")[0][0],
                 15)
    check("standby back: the grant the caller never saw is released", gone,
          "%r" % (q(obs, "SELECT array_agg(owner) FROM dlock.locks WHERE name = 'st/sync'")[0][0],))
    check("standby back: the caller's session works",
          q(call.c, "SELECT dlock_acquire('st/sync', ttl => '1 min', owner => 'ks') > 0")[0][0], "")
    q(call.c, "SELECT dlock_release_all('ks')")
    call.c.close()
    for c in (session.c, trying.c):
        q(c, "SELECT dlock_try_acquire('st/other') > 0 AND dlock_release('st/other')")
    gone = until(lambda: q(obs, "SELECT count(*) = 0 FROM dlock.locks"
                                " WHERE name IN ('st/session', 'st/try')")[0][0], 15)
    check("standby back: the session grants nobody was told of are released", gone,
          "%r" % (q(obs, "SELECT array_agg(name || ' ' || pid) FROM dlock.locks")[0][0],))
    session.c.close()
    trying.c.close()


def standby(obs, names):
    """synchronous_standby_names for the cluster ('' resets it)."""
    if names:
        q(obs, "ALTER SYSTEM SET synchronous_standby_names = %s", (names,))
    else:
        q(obs, "ALTER SYSTEM RESET synchronous_standby_names")
    q(obs, "SELECT pg_reload_conf()")
    time.sleep(0.5)   # the checkpointer publishes it to the walsenders


def worker_wait(obs):
    pid = worker_pid(obs)
    return pid and q(obs, "SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (pid,))[0][0]


def commit_waits(obs, call):
    """The caller's request is decided and its batch's commit waits for the standby."""
    return until(lambda: worker_wait(obs) == "SyncRep", 15) and not call.done(0)


def no_token(call, timeout):
    ended = call.done(timeout)
    return ended and call.result is None, "still waiting" if not ended else \
        "%r %r after %.1f s" % (call.result, call.error, call.elapsed)


def cut_wait(obs):
    """PostgreSQL ends a commit's wait for the synchronous standby early and
    returns as if it were confirmed: at a cancel, a terminate, a fast
    shutdown, or when synchronous_standby_names is cleared.  The lock
    manager's callers must not get a token its standby never received
    (each of these answered one once).  Last: it restarts the server."""
    q(obs, "SELECT dlock_try_acquire('cut/prime') > 0 AND dlock_release('cut/prime')")

    # a cancel of the lock manager: the wait goes on
    standby(obs, "nosuchstandby")
    call = Call("SELECT dlock_acquire('cut/cancel', ttl => '5 min', owner => 'kc',"
                " timeout => '4 s')")
    waits = commit_waits(obs, call)
    q(obs, "SELECT pg_cancel_backend(%s)", (worker_pid(obs),))
    ok, detail = no_token(call, 4 + MARGIN)
    check("standby gone, the lock manager's commit waits: pg_cancel_backend of it gives the"
          " caller no token", waits and ok, detail if waits else "the commit did not wait")
    check("... and its wait for the standby goes on",
          until(lambda: worker_wait(obs) == "Extension", 5), "%r" % worker_wait(obs))
    standby(obs, "")
    check("setting cleared: the grant nobody was told of is released again",
          until(lambda: q(obs, "SELECT count(*) = 0 FROM dlock.locks"
                               " WHERE name = 'cut/cancel'")[0][0], 15),
          "%r" % (q(obs, "SELECT array_agg(owner) FROM dlock.locks")[0][0],))
    call.c.close()

    # a terminate: the lock manager ends, nothing of the batch answered;
    # its successor's load waits for the standby in turn
    standby(obs, "nosuchstandby")
    call = Call("SELECT dlock_acquire('cut/term', ttl => '5 min', owner => 'kt',"
                " timeout => '4 s')")
    waits = commit_waits(obs, call)
    old = worker_pid(obs)
    q(obs, "SELECT pg_terminate_backend(%s)", (old,))
    ok, detail = no_token(call, 4 + MARGIN)
    check("pg_terminate_backend of the lock manager while its commit waits: the caller gets"
          " no token", waits and ok, detail if waits else "the commit did not wait")
    later = Call("SELECT dlock_acquire('cut/later', timeout => '2 s')")
    ok, detail = no_token(later, 2 + MARGIN)
    check("... and its successor answers nothing while the standby is away",
          ok and until(lambda: worker_pid(obs) not in (None, old), 1), detail)
    standby(obs, "")
    check("setting cleared: the lock manager serves again", wait_ready(), "")
    # the lease was committed here and never confirmed; its successor got
    # the answer to release, and gives the grant back as the one that
    # waited would have
    check("... and gives back the grant its predecessor could not answer",
          until(lambda: q(obs, "SELECT count(*) = 0 FROM dlock.locks"
                               " WHERE name = 'cut/term'")[0][0], 15),
          "%r" % (q(obs, "SELECT array_agg(owner) FROM dlock.locks")[0][0],))
    for c in (call.c, later.c):
        q(c, "SELECT dlock_release_all()")
        c.close()

    # the setting changed while the commit waits: another standby named,
    # still waiting; the setting cleared: the grant is given back, 40003
    for owner in ("'kn'", "NULL"):
        standby(obs, "nosuchstandby")
        call = Call("SELECT dlock_acquire('cut/names', ttl => '5 min', owner => %s,"
                    " timeout => '30 s')" % owner)
        waits = commit_waits(obs, call)
        standby(obs, "otherstandby")
        time.sleep(1)
        check("%s acquire: synchronous_standby_names names another standby while the commit"
              " waits: no answer" % ("an owner-keyed" if owner != "NULL" else "a session's"),
              waits and not call.done(0), "%r %r" % (call.result, call.error))
        standby(obs, "")
        ended = call.done(MARGIN)
        check("... the setting cleared: no token, 40003 (the grant was never confirmed)",
              ended and call.error == "40003", "still waiting" if not ended else
              "%r %r" % (call.result, call.error))
        other = q(obs, "SELECT dlock_try_acquire('cut/names', ttl => '1 min', owner => 'ko')")[0][0]
        check("... and the name is free again", other is not None,
              "%r" % (q(obs, "SELECT array_agg(owner || ' ' || pid) FROM dlock.locks")[0][0],))
        q(obs, "SELECT dlock_release('cut/names', owner => 'ko')")
        if ended:
            q(call.c, "SELECT dlock_release_all()")
            call.c.close()

    # a fast shutdown: its SIGTERM may reach the lock manager before the
    # caller's backend (Patroni demotes with one; it once answered two
    # grants).  That order, fixed: the postmaster held while the lock
    # manager gets its signal, then the shutdown.
    standby(obs, "nosuchstandby")
    call = Call("SELECT dlock_acquire('cut/stop', ttl => '5 min', owner => 'kf',"
                " timeout => '30 s')")
    waits = commit_waits(obs, call)
    with open(os.path.join(DIR, "data", "postmaster.pid")) as f:
        postmaster = int(f.readline())
    os.kill(postmaster, signal.SIGSTOP)
    try:
        os.kill(worker_pid(obs), signal.SIGTERM)
        time.sleep(2)
        answered = call.done(0)
        os.kill(postmaster, signal.SIGINT)     # the fast shutdown
    finally:
        os.kill(postmaster, signal.SIGCONT)
    ended = call.done(30)
    check("a fast shutdown while the lock manager's commit waits: the caller gets no token",
          waits and not answered and ended and call.result is None,
          "answered %r %r" % (call.result, call.error))
    until(lambda: not os.path.exists(os.path.join(DIR, "data", "postmaster.pid")), 30)
    env = dict(os.environ, PG_FSYNC="on")
    subprocess.run([CLUSTER, "start", DIR, PORT], env=env)
    obs = conn()
    standby(obs, "")
    check("after the restart: the unanswered lease is its owner's to release",
          wait_ready() and q(obs, "SELECT dlock_release('cut/stop', owner => 'kf')")[0][0], "")
    return obs


def log_lines(text):
    with open(LOG, errors="replace") as f:
        return sum(text in line for line in f)


def failure_lines():
    """The worker's lines about a failed batch or load, in any wording."""
    with open(LOG, errors="replace") as f:
        return sum("dlock lock manager: " in line and " failed" in line for line in f)


def hostile_settings(obs):
    q(obs, "ALTER DATABASE postgres SET default_transaction_read_only = on")
    q(obs, "ALTER ROLE postgres SET statement_timeout = '1ms'")
    q(obs, "ALTER ROLE postgres IN DATABASE postgres SET lock_timeout = '1ms'")
    q(obs, "ALTER DATABASE postgres SET idle_in_transaction_session_timeout = '1ms'")
    failed_before = failure_lines()
    try:
        ok = restart_worker(obs)
        c = conn()
        idle = True
        for sql in ("SELECT dlock_acquire('st/h', ttl => '1 min', owner => 'kh') > 0",
                    "SELECT dlock_renew('st/h', owner => 'kh') > now()",
                    "SELECT dlock_release('st/h', owner => 'kh')",
                    "SELECT dlock_acquire('st/h') > 0",
                    "SELECT dlock_release('st/h')"):
            if not ok:
                break
            call = Call(sql, c=c)
            idle = call.done(10 + MARGIN)
            ok = idle and call.result is True
        check("read-only default, 1 ms statement and lock timeouts for the database and role:"
              " the worker works", ok, "")
        failures = failure_lines() - failed_before
        check("... and logs no failed batch", failures == 0,
              "%d failure lines in the log" % failures)
        if idle:
            c.close()
    finally:
        q(obs, "ALTER DATABASE postgres RESET ALL")
        q(obs, "ALTER ROLE postgres RESET ALL")
        q(obs, "ALTER ROLE postgres IN DATABASE postgres RESET ALL")
    restart_worker(obs)


def failing_load(obs):
    q(obs, """CREATE FUNCTION public.poison() RETURNS trigger LANGUAGE plpgsql AS
              $$BEGIN RAISE EXCEPTION 'dlock test: queue is poisoned'; END$$""")
    q(obs, "CREATE TRIGGER poison BEFORE DELETE ON dlock.queue"
           " FOR EACH STATEMENT EXECUTE FUNCTION public.poison()")
    before = failure_lines()
    old = worker_pid(obs)
    q(obs, "SELECT pg_terminate_backend(%s)", (old,))
    until(lambda: worker_pid(obs) not in (None, old), 30, 0.05)
    time.sleep(4)
    lines = failure_lines() - before
    # 10 ms after each failure would be hundreds; growing pauses: about 9
    check("failing load: retried with growing pauses, a few log lines in 4 s",
          1 <= lines <= 12, "%d lines" % lines)
    call = Call("SELECT dlock_acquire('st/p')")
    ended = call.done(5 + MARGIN)
    check("failing load: a request fails with the reason instead of waiting",
          ended and call.error == "XX000", "still waiting" if not ended else
          "%r %r" % (call.result, call.error))
    q(obs, "DROP TRIGGER poison ON dlock.queue")
    q(obs, "DROP FUNCTION public.poison()")
    check("failing load: works again once the cause is gone", wait_ready(), "")
    check("failing load: the recovery is logged",
          until(lambda: log_lines("working again after") > 0, 10), "")
    call.c.close()


def walwriter_pid():
    out = subprocess.run(["pgrep", "-f", "postgres: walwriter"], capture_output=True, text=True)
    for pid in out.stdout.split():
        try:
            if os.readlink("/proc/%s/cwd" % pid).startswith(os.path.realpath(DIR)):
                return int(pid)
        except OSError:
            pass
    return None


def synchronous_commit_off(obs):
    """Last: it crashes the server (obs is lost)."""
    q(obs, "CREATE EXTENSION IF NOT EXISTS pg_walinspect")
    q(obs, "ALTER DATABASE postgres SET synchronous_commit = off")
    restart_worker(obs)
    c = conn()
    ww = walwriter_pid()
    check("synchronous_commit off: the WAL writer found", ww is not None, "")
    if ww is None:
        return
    # stop it only where it waits for work: stopped while it holds the WAL
    # write lock (flushing), it would stop every committer, the worker too
    for _ in range(500):
        os.kill(ww, signal.SIGSTOP)
        if q(obs, "SELECT wait_event FROM pg_stat_activity WHERE pid = %s", (ww,))[0][0] \
                == "WalWriterMain":
            break
        os.kill(ww, signal.SIGCONT)
        time.sleep(0.01)
    try:
        # the last acquire takes ticket 'hi', which reserves the next block
        start = q(c, "SELECT pg_current_wal_insert_lsn()")[0][0]
        last = q(c, "SELECT max(dlock_acquire('async/' || i)) FROM generate_series(1,"
                    " (SELECT hi FROM dlock.ticket_counter) - dlock_acquire('async/0')) i")[0][0]
        # the commit of that block is flushed (other WAL may not be: 18's
        # readers prune pages on access and log it asynchronously)
        flushed = q(c, "SELECT count(*) = 1 FROM pg_get_wal_records_info(%s,"
                       " pg_current_wal_flush_lsn()) WHERE resource_manager = 'Transaction'"
                       " AND record_type LIKE 'COMMIT%%'"
                       " AND xid = (SELECT xmin FROM dlock.ticket_counter)::text::xid",
                    (start,))[0][0]
        check("synchronous_commit off for the database: a new block of tickets is flushed"
              " before its first token is handed out", flushed, "its commit is not flushed")
        # crash at once: the stopped WAL writer flushes nothing more
        os.kill(ww, signal.SIGKILL)
    finally:
        try:
            os.kill(ww, signal.SIGCONT)
        except ProcessLookupError:
            pass
    c.close()
    ready = wait_ready(60)
    obs = conn()
    q(obs, "ALTER DATABASE postgres RESET synchronous_commit")
    ready = ready and restart_worker(obs)
    c = conn()
    check("synchronous_commit off, crash right after a new block: new token beyond every old one",
          ready and q(c, "SELECT dlock_acquire('async/after') > %s", (last,))[0][0], "")
    q(c, "SELECT dlock_release_all()")
    c.close()
    obs.close()


def long_detail(obs):
    """A deadlock DETAIL longer than the 1 KiB answer buffer, of names in
    two-byte characters (600 bytes each), to clients reading LATIN1: cut on
    a character boundary, the client gets 40P01, not a conversion error
    (22021) for half a character."""
    a, b = conn(), conn()
    for c in (a, b):
        c.set_client_encoding("LATIN1")
    q(a, "SELECT dlock_acquire(repeat(chr(233), 300))")
    q(b, "SELECT dlock_acquire(repeat(chr(252), 300))")
    waiter = Call("SELECT dlock_acquire(repeat(chr(252), 300))", c=a)
    until(lambda: waiting(obs, waiter.pid), 15)
    try:
        q(b, "SELECT dlock_acquire(repeat(chr(233), 300))")
        got = "granted"
    except psycopg2.Error as e:
        got = "%s %d" % (e.pgcode, len(e.diag.message_detail or ""))
    q(b, "SELECT dlock_release_all()")
    check("a long deadlock DETAIL in two-byte characters reaches a LATIN1 client",
          got.startswith("40P01 ") and int(got.split()[1]) > 400, got)
    waiter.done(MARGIN)
    q(a, "SELECT dlock_release_all()")
    a.close()
    b.close()


PARTS = (long_detail, stopped_worker, standby_gone, cut_wait, hostile_settings, failing_load,
         synchronous_commit_off)   # cut_wait restarts the server, the last crashes it


def main():
    env = dict(os.environ, PG_FSYNC="on", PG_EXTRA_CONF="dlock.reap_interval = '100ms'")
    if subprocess.run([CLUSTER, "start", DIR, PORT], env=env).returncode != 0:
        print("stuck: 0 passed, 1 failed")
        return 1
    try:
        obs = conn()
        for part in PARTS:
            if len(sys.argv) <= 3 or part.__name__ in sys.argv[3:]:
                obs = part(obs) or obs
    except Exception as e:  # a check that could not run is a failure
        check("the checks ran to the end", False, "%s: %s at %s" % (
            type(e).__name__, str(e).strip(),
            " < ".join("%s:%d" % (f.name, f.lineno)
                       for f in reversed(traceback.extract_tb(e.__traceback__)))))
    finally:
        subprocess.run([CLUSTER, "stop", DIR])
    return report("stuck", checks)


if __name__ == "__main__":
    sys.exit(main())
