#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""Multi-session scenarios for dlock.

PostgreSQL's isolation tester cannot see a wait on dlock's latch (it only
recognises heavyweight-lock waits), so this runner drives named sessions
itself and decides that a session is waiting by looking at dlock.locks.

A scenario file (*.scen) is a list of steps, one per line:

    session s1 [s2 ...]      open sessions (autocommit)
    s1: SQL                  run SQL in s1 and print its result
    s1& SQL                  send SQL in s1 without waiting (it should block)
    wait s1                  until s1 has a request queued in dlock.locks
                             (a row with NOT granted and s1's pid, seen by a
                             separate observer connection); prints "s1 is
                             waiting", or "s1 is NOT waiting" once its SQL
                             has finished or after 15 s
    await s1                 collect and print the result of s1's pending SQL
                             ("STILL BLOCKED after 15 s" if it does not end)
    locks                    print dlock.locks, pids shown as session names
    notifies s1 [name ...]   print the notifications s1 has received (marked
                             when not sent by the lock manager's process); a
                             payload that is the notify key of a name listed
                             shows as "the key of NAME"
    sleep SECONDS
    cancel s1 | terminate s1 pg_cancel_backend / pg_terminate_backend
    disconnect s1            close the connection (s1 must not be busy)
    drop s1                  cut s1's socket under a running statement, as a
                             vanished client does
    kill -9 s1               SIGKILL s1's backend: PostgreSQL restarts every
                             backend, so every session's connection is lost
                             (crash scenarios only: regress/restart)
    reconnect s1 [s2 ...]    new connections once the server and the dlock
                             worker answer again
    # comment                copied to the output

disconnect, drop and terminate return once the backend is gone and holds
and waits for nothing session-owned any more (or after 15 s, and then the
next `locks` shows what stayed behind).
After the last step every session is closed; anything still in dlock.locks
then (a leak, or a lease the scenario did not release) is appended to the
transcript, so the scenario fails, and released before the next one.

The output (results, errors with SQLSTATE, warnings; pids, also earlier
pids of a reconnected session, replaced by session names) is compared with
<dir>/expected/<name>.out.
Results must not depend on pids, timestamps or token values: compare them
in SQL (`dlock_acquire('a') > 0`, `token > prev`).  --accept rewrites the
expected files from this run: read every changed one before keeping it.
Usage: run.py [--accept] [--dir DIR] [scenario ...]; DIR defaults to this
script's directory; connection from PG* variables; SCEN_TRACE=1 prints each
step to stderr as it starts.  Prints "scenarios: N passed, M failed" last.
"""
import difflib
import os
import re
import signal
import socket
import sys
import threading
import time

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from checklib import Tally  # noqa: E402
WAIT_LIMIT = 15.0


def connect():
    conn = psycopg2.connect(dbname=os.environ.get("PGDATABASE", "postgres"))
    conn.autocommit = True
    return conn


class Session:
    def __init__(self, name):
        self.name = name
        self.pids = []  # every backend this session has had, latest last
        self.thread = None
        self.outcome = None
        self.connect()

    def connect(self):
        self.conn = connect()
        with self.conn.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            self.pid = cur.fetchone()[0]
        self.pids.append(self.pid)

    def run(self, sql):
        """Execute sql; return the printable outcome lines."""
        lines = []
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql)
                if cur.description is not None:
                    for row in cur.fetchall():
                        lines.append("|".join("" if v is None else str(v) for v in row))
        except psycopg2.Error as e:
            if self.conn.closed or e.pgcode is None:
                # terminated or crashed backend: whether libpq read the FATAL
                # message before the socket closed is a race, so say only this
                lines.append("CONNECTION LOST")
            else:
                diag = e.diag
                lines.append("ERROR %s: %s" % (e.pgcode, diag.message_primary))
                if diag.message_detail:
                    lines.append("DETAIL: %s" % diag.message_detail)
        for notice in self.conn.notices if not self.conn.closed else []:
            lines.insert(0, notice.strip())
        if not self.conn.closed:
            del self.conn.notices[:]
        return lines

    def send(self, sql):
        def target():
            self.outcome = self.run(sql)
        self.outcome = None
        self.thread = threading.Thread(target=target, daemon=True)
        self.thread.start()

    def collect(self):
        if self.thread is None:
            return ["(nothing pending)"]
        self.thread.join(WAIT_LIMIT)
        if self.thread.is_alive():
            return ["STILL BLOCKED after %.0f s" % WAIT_LIMIT]
        self.thread = None
        return self.outcome


class Scenario:
    def __init__(self, path):
        self.path = path
        self.sessions = {}
        self.out = []
        self.observer = connect()

    def pid_names(self):
        return {pid: s.name for s in self.sessions.values() for pid in s.pids}

    def names_for_pids(self, text):
        for pid, name in sorted(self.pid_names().items(), key=lambda p: -len(str(p[0]))):
            text = re.sub(r"\b%d\b" % pid, name, text)
        return text

    def emit(self, lines, indent="  "):
        for line in lines:
            self.out.append(indent + self.names_for_pids(line))

    def observe(self, sql, args=()):
        with self.observer.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()

    def wait_gone(self, s):
        """until s's backend has exited and nothing session-owned of it is
        left in dlock.locks (its waits, owner-keyed or not, included)"""
        deadline = time.monotonic() + WAIT_LIMIT
        while time.monotonic() < deadline and self.observe(
                "SELECT 1 FROM pg_stat_activity WHERE pid = %s"
                " UNION ALL SELECT 1 FROM dlock.locks"
                "  WHERE pid = %s AND (owner IS NULL OR NOT granted)", (s.pid, s.pid)):
            time.sleep(0.01)

    def wait_ready(self):
        """until the server accepts connections and the dlock worker answers
        (after a crash restart it reloads its tables first)"""
        deadline = time.monotonic() + 60
        while True:
            try:
                if self.observer.closed:
                    self.observer = connect()
                self.observe("SELECT dlock_try_acquire('scenario-probe')")
                self.observe("SELECT dlock_release('scenario-probe')")
                return
            except psycopg2.Error:
                if time.monotonic() > deadline:
                    raise
                try:
                    self.observer.close()
                except psycopg2.Error:
                    pass
                time.sleep(0.1)

    def lock_rows(self):
        return self.observe(
            "SELECT name, mode, granted, position, owner, pid, count, conversion, implied"
            "  FROM dlock.locks ORDER BY name, granted DESC, position, token")

    def show_locks(self, rows=None):
        """dlock.locks, one line per holder or waiter, pids as session names"""
        rows = self.lock_rows() if rows is None else rows
        for name, mode, granted, pos, owner, pid, count, conversion, implied in rows:
            # a kept place no call waits for has no session
            who = ("nobody (kept)" if pid is None else
                   self.pid_names().get(pid, "pid %d" % pid))
            if granted:
                desc = "%s %s %s by %s%s count %d" % (
                    name, mode, "implied" if implied else "held", who,
                    " key " + owner if owner else "", count)
            else:
                desc = "%s %s %s #%d: %s%s" % (
                    name, mode, "converting" if conversion else
                    "waiting (implied)" if implied else "waiting", pos, who,
                    " key " + owner if owner else "")
            self.emit([desc])
        if not rows:
            self.emit(["(no locks)"])

    def step(self, line):
        if os.environ.get("SCEN_TRACE"):
            print("  [%s] %s" % (os.path.basename(self.path), line), file=sys.stderr, flush=True)
        m = re.match(r"^(\w+)(:|&)\s*(.*)$", line)
        if m and m.group(1) in self.sessions:
            s = self.sessions[m.group(1)]
            self.out.append(line)
            if m.group(2) == ":":
                self.emit(s.run(m.group(3)))
            else:
                s.send(m.group(3))
            return
        words = line.split()
        cmd, args = words[0], words[1:]
        self.out.append(line)
        if cmd == "session":
            for name in args:
                self.sessions[name] = Session(name)
        elif cmd == "wait":
            s = self.sessions[args[0]]
            deadline = time.monotonic() + WAIT_LIMIT
            while time.monotonic() < deadline:
                if self.observe("SELECT 1 FROM dlock.locks WHERE NOT granted AND pid = %s",
                                (s.pid,)):
                    break
                if s.thread is not None and not s.thread.is_alive():
                    break
                time.sleep(0.01)
            waiting = bool(self.observe(
                "SELECT 1 FROM dlock.locks WHERE NOT granted AND pid = %s", (s.pid,)))
            self.emit(["%s is waiting" % s.name if waiting else "%s is NOT waiting" % s.name])
        elif cmd == "await":
            self.emit(self.sessions[args[0]].collect())
        elif cmd == "locks":
            self.show_locks()
        elif cmd == "notifies":
            s = self.sessions[args[0]]
            s.conn.poll()
            manager = self.observe("SELECT dlock_manager_pid()")[0][0]
            # a payload is a lock's notify key: shown as the name it keys
            keys = {self.observe("SELECT dlock_notify_key(%s)", (n,))[0][0]: n for n in args[1:]}
            got = ["NOTIFY %s: %s%s" % (
                n.channel, "the key of %s" % keys[n.payload] if n.payload in keys else n.payload,
                "" if n.pid == manager else " (not from the lock manager)")
                   for n in s.conn.notifies]
            del s.conn.notifies[:]
            self.emit(got or ["(none)"])
        elif cmd == "sleep":
            time.sleep(float(args[0]))
        elif cmd in ("cancel", "terminate"):
            fn = "pg_cancel_backend" if cmd == "cancel" else "pg_terminate_backend"
            self.observe("SELECT %s(%%s)" % fn, (self.sessions[args[0]].pid,))
            if cmd == "terminate":
                # until the backend is gone, so the next step sees its end
                self.wait_gone(self.sessions[args[0]])
        elif cmd == "kill":
            if args[0] != "-9" or len(args) != 2:
                raise ValueError("only kill -9 SESSION: " + line)
            s = self.sessions[args[1]]
            os.kill(s.pid, signal.SIGKILL)
            # the postmaster now ends every backend; wait for that, not for
            # the restart (that is what reconnect is for)
            deadline = time.monotonic() + WAIT_LIMIT
            while time.monotonic() < deadline:
                try:
                    os.kill(s.pid, 0)
                except ProcessLookupError:
                    break
                time.sleep(0.01)
            for other in self.sessions.values():
                if other.thread is not None:
                    other.thread.join(WAIT_LIMIT)
        elif cmd == "reconnect":
            self.wait_ready()
            for name in args:
                s = self.sessions[name]
                if s.thread is not None and s.thread.is_alive():
                    raise ValueError("reconnect of a busy session: " + line)
                if not s.conn.closed:
                    s.conn.close()
                s.thread = None
                s.connect()
        elif cmd in ("disconnect", "drop"):
            s = self.sessions[args[0]]
            if cmd == "drop":
                sock = socket.socket(fileno=os.dup(s.conn.fileno()))
                sock.shutdown(socket.SHUT_RDWR)
                sock.close()
                if s.thread is not None:
                    s.thread.join(WAIT_LIMIT)
                    s.thread = None
            else:
                s.conn.close()
            self.wait_gone(s)
        else:
            raise ValueError("unknown step: " + line)

    def run(self):
        with open(self.path) as f:
            for raw in f:
                line = raw.rstrip("\n")
                if not line.strip():
                    continue
                if line.startswith("#"):
                    self.out.append(line)
                    continue
                self.step(line.strip())
        for s in self.sessions.values():
            if not s.conn.closed:
                if s.thread is not None and s.thread.is_alive():
                    self.observe("SELECT pg_cancel_backend(%s)", (s.pid,))
                    s.thread.join(5)
                s.conn.close()
        # Every session is closed now: its session locks and waits must go.
        # Whatever is left (owner-keyed leases a scenario did not release, or
        # a leak) is shown in the transcript, so it fails, and then released
        # so it cannot disturb the next scenario.
        deadline = time.monotonic() + 5
        rows = self.lock_rows()
        while rows and time.monotonic() < deadline:
            time.sleep(0.02)
            rows = self.lock_rows()
        if rows:
            self.out.append("(after every session ended, left behind:)")
            self.show_locks(rows)
            self.observe("SELECT dlock_release_all(owner) FROM (SELECT DISTINCT owner"
                         "  FROM dlock.locks WHERE owner IS NOT NULL) o")
        if not self.observer.closed:
            self.observer.close()
        return "\n".join(self.out) + "\n"


def main(argv):
    accept = "--accept" in argv
    base = HERE
    if "--dir" in argv:
        i = argv.index("--dir")
        base = os.path.abspath(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    names = [a[:-5] if a.endswith(".scen") else a for a in argv if not a.startswith("--")]
    names = [os.path.basename(n) for n in names]
    if not names:
        names = sorted(f[:-5] for f in os.listdir(base) if f.endswith(".scen"))
    tally = Tally()
    os.makedirs(os.path.join(base, "expected"), exist_ok=True)
    for name in names:
        started = time.monotonic()
        try:
            got = Scenario(os.path.join(base, name + ".scen")).run()
        except Exception as e:  # a broken runner step is a failed scenario
            got = "RUNNER ERROR: %r\n" % (e,)
        expected_path = os.path.join(base, "expected", name + ".out")
        if accept:
            with open(expected_path, "w") as f:
                f.write(got)
        expected = open(expected_path).read() if os.path.exists(expected_path) else ""
        took = time.monotonic() - started
        if not tally.check("%-24s %5.1f s" % (name, took), got == expected):
            sys.stdout.writelines(difflib.unified_diff(
                expected.splitlines(True), got.splitlines(True),
                "expected/%s.out" % name, "got"))
    print(tally.summary("scenarios"))
    return 0 if tally.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
