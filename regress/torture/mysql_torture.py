#!/usr/bin/python3
"""Torture run for the dlock MariaDB plugin: many client processes, random
operations, random faults, and a fencing-checked guarded resource, on one
throwaway MariaDB (bench/mysql_server.sh, innodb_flush_log_at_trx_commit=1).

Each client is a process with its own connection.  It loops over random
operations on a few hot and many cold names: blocking acquires with
timeouts, try-acquires, shared and exclusive modes, re-entrant acquires,
owner-keyed leases that are renewed or left to expire, two locks let go by
dlock_release_all().  Inside every grant it enters the guarded resource:

  * torture.active has one row per client inside a lock, with its token;
    entering while another live grant (its token still in dlock.held) of a
    conflicting mode is inside is an exclusion violation;
  * torture.guard keeps the last exclusive token per name; an exclusive
    holder writes it only if larger (UPDATE ... WHERE last_token < token).
    A session-owned holder that cannot is a violation (a token went
    backwards, or someone newer got in); a lease holder that cannot has
    legitimately lost its lease (counted, not a violation);
  * every grant is logged with the monotonic time it was seen; afterwards,
    per name, the tokens of session-owned grants in conflicting modes must
    grow in the order they were seen (across restarts and crashes too).

Faults, at random times: kill -9 of client processes (holding or waiting),
KILL QUERY and KILL of waiting connections, KILL of the plugin's own
connections to its lock store (idle or in the middle of a step), a clean
server restart, and a kill -9 of mariadbd followed by a restart.  After the clients stop the
invariants are checked: no queue rows, no grants to dead connections, no
lease past its expiry plus the reaper's interval, every blocking call ended
within its timeout plus slack, and the server only crashed when killed.

Usage: mysql_torture.py [--quick] [--seconds S] [--clients N] [--port P]
Prints a table and "mysql-torture: N passed, M failed".
"""
import argparse
import collections
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
# what the run needs, installed when missing (Debian packages only)
subprocess.run([os.path.join(ROOT, "scripts", "deps.sh"), "python3-mysqldb", "mariadb-server",
                "libmariadb-dev", "libmariadbd-dev"], check=True, stdout=subprocess.DEVNULL)
import MySQLdb  # noqa: E402  (after deps.sh has installed it)
SERVER = os.path.join(ROOT, "bench", "mysql_server.sh")
HOT = ["hot/%d" % i for i in range(3)]
COLD = ["cold/%d" % i for i in range(200)]
SLACK = 2.0     # a call may overrun its timeout by the reaper's 1 s and a re-check
REAP = 1.0      # the dlock.reaper event's interval

# errnos a client may see: its own statement killed (1317, 1927, 1969 for
# max_statement_time), the
# connection or server gone (2002, 2006, 2013, 1053), and, only while the
# server restarts, the plugin's own store connection failing (1105)
KILLED = (1317, 1927, 1969)
GONE = (2002, 2006, 2013, 1053)


def connect(sock, timeout=5):
    c = MySQLdb.connect(unix_socket=sock, user="root", connect_timeout=timeout)
    c.autocommit(True)
    return c


class Client:
    """One client process: runs until the deadline, logs to its own file."""

    def __init__(self, slot, sock, deadline, logpath, connids, unstable):
        self.slot = slot
        self.sock = sock
        self.deadline = deadline
        self.log = open(logpath, "a", buffering=1)
        self.connids = connids
        self.unstable = unstable
        self.rng = random.Random(os.getpid() * 7919 + int(time.time() * 1000))
        self.conn = None
        self.other = None    # a second connection, for owner keys
        self.holding = set()  # names this session believes it holds
        self.trail = []       # the last statements, for reports

    def emit(self, **kw):
        self.log.write(json.dumps(kw) + "\n")

    def count(self, what):
        self.emit(k="c", w=what)

    def violation(self, text):
        self.emit(k="v", w=text)

    def q(self, sql, args=()):
        cur = self.conn.cursor()
        self.trail.append("%.3f %s %r" % (time.time() % 1000, sql[:40], args[:2]))
        del self.trail[:-16]
        try:
            cur.execute(sql, args)
            return cur.fetchall()
        finally:
            cur.close()

    def one_value(self, sql, args=()):
        return self.q(sql, args)[0][0]

    def reconnect(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except MySQLdb.Error:
                pass
            self.conn = None
        self.conn = connect(self.sock)
        self.holding = set()
        self.connids[self.slot] = self.conn.thread_id()
        # this session's holder key (connection ids start again after a
        # server restart; grants to the dead process's sessions are not ours)
        probe = "probe/%d" % self.slot
        self.q("SELECT dlock_acquire(%s, 5)", (probe,))
        self.me = self.q("SELECT holder FROM dlock.held WHERE name = %s AND owner IS NULL"
                         " AND conn_id = CONNECTION_ID() ORDER BY token DESC LIMIT 1", (probe,))[0][0]
        self.q("SELECT dlock_release(%s)", (probe,))

    def timed(self, timeout, sql, args):
        started = time.monotonic()
        try:
            return self.one_value(sql, args)
        finally:
            took = time.monotonic() - started
            if timeout is not None and took > timeout + SLACK:
                self.violation("a call with timeout %.2fs took %.2fs: %s %r"
                               % (timeout, took, sql, args))

    def granted(self, name, token, mode, leased):
        self.emit(k="g", n=name, t=token, m=mode, l=leased, at=time.monotonic())

    def enter(self, name, token, mode, leased):
        """The guarded resource: exclusion and fencing checks."""
        conflicting = "TRUE" if mode == "exclusive" else "a.mode = 'exclusive'"
        rows = self.q("SELECT a.client, a.token FROM torture.active a"
                      " JOIN dlock.held h ON h.token = a.token"
                      " WHERE a.name = %%s AND a.client <> %%s AND %s" % conflicting,
                      (name, self.slot))
        if rows and not leased:
            self.violation("exclusion: client %d (token %d, %s) entered %s while client %d"
                           " (token %d) held it" % (self.slot, token, mode, name,
                                                    rows[0][0], rows[0][1]))
        self.q("REPLACE INTO torture.active VALUES (%s, %s, %s, %s)",
               (self.slot, name, token, mode))
        if mode == "exclusive":
            cur = self.conn.cursor()
            n = cur.execute("UPDATE torture.guard SET last_token = %s"
                            " WHERE name = %s AND last_token < %s", (token, name, token))
            cur.close()
            if n != 1:
                if leased:
                    self.count("fencing rejections (lease lost)")
                else:
                    last = self.one_value("SELECT last_token FROM torture.guard WHERE name = %s",
                                          (name,))
                    self.violation("fencing: client %d's token %d on %s is not above %s"
                                   % (self.slot, token, name, last))
        hold = self.rng.choice([0, 0, 0.001, 0.003, 0.01])
        if hold:
            time.sleep(hold)

    def leave(self):
        self.q("DELETE FROM torture.active WHERE client = %s", (self.slot,))

    def one(self):
        rng = self.rng
        op = rng.random()
        name = rng.choice(HOT) if rng.random() < 0.7 else rng.choice(COLD)
        mode = "shared" if rng.random() < 0.25 else "exclusive"
        if op < 0.45:
            timeout = rng.choice([0.05, 0.2, 1.0, 3.0])
            t = self.timed(timeout, "SELECT dlock_acquire(%s, %s, NULL, %s)",
                           (name, timeout, mode))
            if t is None:
                self.count("acquire timed out")
                return
            self.count("acquire granted")
            self.holding.add(name)
            self.granted(name, t, mode, False)
            self.enter(name, t, mode, False)
            if rng.random() < 0.2:
                t2 = self.one_value("SELECT dlock_acquire(%s, 5, NULL, %s)", (name, mode))
                if t2 != t:
                    self.violation("re-entrant acquire of %s gave token %s, not %s"
                                   % (name, t2, t))
                if self.one_value("SELECT dlock_release(%s)", (name,)) != 1:
                    self.violation("re-entrant release of %s answered 0" % name)
                self.count("re-entrant")
            self.leave()
            if self.one_value("SELECT dlock_release(%s)", (name,)) != 1:
                self.violation("release of held %s answered 0" % name)
            self.holding.discard(name)
        elif op < 0.65:
            t = self.one_value("SELECT dlock_try_acquire(%s, NULL, %s)", (name, mode))
            if t is None:
                self.count("try refused")
                return
            self.count("try granted")
            self.holding.add(name)
            self.granted(name, t, mode, False)
            self.enter(name, t, mode, False)
            self.leave()
            if self.one_value("SELECT dlock_release(%s)", (name,)) != 1:
                self.violation("release of held %s answered 0" % name)
            self.holding.discard(name)
        elif op < 0.87:
            key = "c%d-%d" % (self.slot, rng.randrange(1 << 40))
            ttl = rng.choice([0.3, 0.6, 2.0])
            t = self.timed(1.0, "SELECT dlock_acquire(%s, 1, %s, %s, %s)",
                           (name, ttl, mode, key))
            if t is None:
                self.count("lease timed out")
                return
            self.count("lease granted")
            self.granted(name, t, mode, True)
            self.enter(name, t, mode, True)
            if rng.random() < 0.5:
                try:
                    self.q("SELECT dlock_renew(%s, %s, %s)", (name, ttl, key))
                    self.count("lease renewed")
                except MySQLdb.OperationalError as e:
                    if e.args[0] != 1105 or "[DL001]" not in str(e.args[1]):
                        raise
                    self.count("renew of a lost lease (DL001)")
            self.leave()
            if rng.random() < 0.2:
                self.count("lease left to expire")
                return
            if rng.random() < 0.4:
                # an owner key is released from any connection
                if self.other is None:
                    self.other = connect(self.sock)
                cur = self.other.cursor()
                cur.execute("SELECT dlock_release(%s, %s)", (name, key))
                released = cur.fetchall()[0][0]
                cur.close()
                self.count("lease released from another connection")
            else:
                released = self.one_value("SELECT dlock_release(%s, %s)", (name, key))
            if released != 1:
                self.count("release of an expired lease (0)")
        elif op < 0.92:
            # no timeout: only a grant or a kill ends it; cold names are
            # never held long, so a wait that lasts is a lost wake-up
            name = rng.choice(COLD)
            started = time.monotonic()
            t = self.one_value("SELECT dlock_acquire(%s, NULL, NULL, %s)", (name, mode))
            took = time.monotonic() - started
            if took > 10:
                self.violation("a wait without timeout for %s took %.1fs" % (name, took))
            self.count("acquire without timeout granted")
            self.holding.add(name)
            self.granted(name, t, mode, False)
            self.enter(name, t, mode, False)
            self.leave()
            if self.one_value("SELECT dlock_release(%s)", (name,)) != 1:
                self.violation("release of held %s answered 0" % name)
            self.holding.discard(name)
        else:
            a, b = rng.sample(COLD, 2)
            ta = self.timed(1.0, "SELECT dlock_acquire(%s, 1)", (a,))
            if ta is None:
                self.count("acquire timed out")
                return
            self.holding.add(a)
            self.granted(a, ta, "exclusive", False)
            tb = self.one_value("SELECT dlock_try_acquire(%s)", (b,))
            held = 1
            if tb is not None:
                self.holding.add(b)
                self.granted(b, tb, "exclusive", False)
                held = 2
            n = self.one_value("SELECT dlock_release_all()")
            self.holding.clear()
            if n != held:
                self.violation("dlock_release_all() ended %s locks, not %d" % (n, held))
            self.count("release_all")

    def after_kill(self, text):
        """A call the plugin reports killed left no grant the session does not
        know of.  A kill the server reports after the function returned (its
        own message) can cost the session a grant it never saw: counted, and
        the error handler's dlock_release_all() gives it back."""
        try:
            self.q("SET max_statement_time = 0")
            rows = self.q("SELECT name, token, `count`, granted_at FROM dlock.held"
                          " WHERE holder = %s", (self.me,))
        except MySQLdb.Error:
            return
        held = dict((r[0].decode(), r[1:]) for r in rows)
        for name in set(held) - self.holding:
            if text.startswith("dlock_"):
                self.violation("a killed call left client %d holding %s (token, count,"
                               " granted: %s): %s; last statements %s"
                               % (self.slot, name, held[name], text, self.trail))
            else:
                self.count("grant kept after a kill the server reported late")

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
                restarting = time.monotonic() < self.unstable.value
                if code in KILLED:
                    self.count("killed (%d)" % code)
                    self.after_kill(text)
                elif code in GONE or (code == 1105 and restarting):
                    self.count("connection lost")
                    self.conn = self.other = None
                    time.sleep(0.1)
                else:
                    self.violation("unexpected error %s: %s" % (code, text))
                try:
                    if self.conn is not None:
                        self.q("SET max_statement_time = 0")
                        self.q("DELETE FROM torture.active WHERE client = %s", (self.slot,))
                        self.q("SELECT dlock_release_all()")
                        self.holding.clear()
                except MySQLdb.Error:
                    self.conn = None
        try:
            if self.conn is not None:
                self.q("DELETE FROM torture.active WHERE client = %s", (self.slot,))
                self.q("SELECT dlock_release_all()")
                self.conn.close()
        except MySQLdb.Error:
            pass
        self.emit(k="done")


def client_process(slot, sock, deadline, logpath, connids, unstable):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    Client(slot, sock, deadline, logpath, connids, unstable).run()


class Torture:
    def __init__(self, args):
        self.args = args
        self.dir = tempfile.mkdtemp(prefix="dlock-mytorture.")
        self.sock = os.path.join(self.dir, "sock")
        self.stats = collections.Counter()
        self.kills_of_server = 0
        self.procs = {}      # slot -> (process, logpath)
        self.logs = []
        self.lock = threading.Lock()
        self.connids = mp.Array("q", args.clients)
        self.unstable = mp.Value("d", 0.0)

    def server(self, *cmd):
        r = subprocess.run([SERVER, cmd[0], self.dir] + list(cmd[1:]),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0:
            raise RuntimeError("mysql_server.sh %s failed: %s" % (cmd[0], r.stdout))

    def spawn(self, slot, deadline):
        logpath = os.path.join(self.dir, "client-%d-%d.log" % (slot, len(self.logs)))
        self.logs.append(logpath)
        p = mp.Process(target=client_process,
                       args=(slot, self.sock, deadline, logpath, self.connids, self.unstable),
                       daemon=True)
        p.start()
        self.procs[slot] = (p, logpath)

    def admin(self):
        for _ in range(100):
            try:
                return connect(self.sock)
            except MySQLdb.Error:
                time.sleep(0.1)
        raise RuntimeError("cannot connect to the server")

    def faults(self, deadline):
        rng = random.Random(42)
        admin = self.admin()
        span = deadline - time.monotonic()
        # server restarts: a clean one at 1/3 and a crash at 2/3 of a quick
        # run; in longer runs every 40 s, alternating
        if span < 80:
            restarts = [(time.monotonic() + span / 3, "clean"),
                        (time.monotonic() + 2 * span / 3, "crash")]
        else:
            restarts = [(time.monotonic() + t, "clean" if i % 2 == 0 else "crash")
                        for i, t in enumerate(range(20, int(span) - 15, 40))]
        time.sleep(1)
        while time.monotonic() < deadline - 3:
            time.sleep(rng.uniform(0.2, 0.5))
            try:
                if restarts and time.monotonic() >= restarts[0][0]:
                    kind = restarts.pop(0)[1]
                    self.unstable.value = float("inf")
                    try:
                        admin.close()
                    except MySQLdb.Error:
                        pass
                    if kind == "clean":
                        self.server("stop")
                        self.stats["fault: clean server restart"] += 1
                    else:
                        self.server("kill")
                        self.kills_of_server += 1
                        self.stats["fault: kill -9 of mariadbd, restart"] += 1
                    self.server("start", str(self.args.port))
                    self.unstable.value = time.monotonic() + 3
                    admin = self.admin()
                    continue
                r = rng.random()
                cur = admin.cursor()
                if r < 0.35:
                    cur.execute("SELECT conn_id FROM dlock.locks WHERE NOT granted"
                                " ORDER BY RAND() LIMIT 1")
                    row = cur.fetchone()
                    if row:
                        try:
                            cur.execute("KILL QUERY %d" % int(row[0]))
                            self.stats["fault: KILL QUERY of a waiter"] += 1
                        except MySQLdb.Error:
                            pass
                elif r < 0.55:
                    cur.execute("SELECT conn_id FROM dlock.locks WHERE NOT granted"
                                " ORDER BY RAND() LIMIT 1")
                    row = cur.fetchone()
                    if row:
                        try:
                            cur.execute("KILL %d" % int(row[0]))
                            self.stats["fault: KILL of a waiting connection"] += 1
                        except MySQLdb.Error:
                            pass
                elif r < 0.62:
                    # the plugin's own connections to its lock store
                    cur.execute("SELECT ID FROM information_schema.PROCESSLIST"
                                " WHERE USER = 'dlock_store'"
                                " ORDER BY COMMAND = 'Sleep', RAND() LIMIT 1")
                    row = cur.fetchone()
                    if row:
                        try:
                            cur.execute("KILL %d" % int(row[0]))
                            self.stats["fault: KILL of a plugin store connection"] += 1
                        except MySQLdb.Error:
                            pass
                elif r < 0.8:
                    waiting = rng.random() < 0.5
                    cur.execute("SELECT DISTINCT conn_id FROM dlock.locks WHERE granted = %s",
                                (0 if waiting else 1,))
                    conns = set(x[0] for x in cur.fetchall())
                    slots = [s for s in range(self.args.clients) if self.connids[s] in conns]
                    if slots:
                        slot = rng.choice(slots)
                        p, _ = self.procs[slot]
                        try:
                            os.kill(p.pid, signal.SIGKILL)
                        except ProcessLookupError:
                            continue
                        p.join(5)
                        self.connids[slot] = 0
                        self.stats["fault: kill -9 of a client (%s)"
                                   % ("waiting" if waiting else "holding")] += 1
                        self.spawn(slot, deadline)
                cur.close()
            except MySQLdb.Error:
                try:
                    admin.close()
                except MySQLdb.Error:
                    pass
                admin = self.admin()
        admin.close()

    def read_logs(self):
        grants = collections.defaultdict(list)
        violations = []
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
                        grants[e["n"]].append(e)
        return grants, violations

    @staticmethod
    def token_order(grants):
        """Session-owned grants in conflicting modes must be seen in token order."""
        bad = []
        for name, gs in grants.items():
            gs = sorted((g for g in gs if not g["l"]), key=lambda g: g["at"])
            last_ex = None       # the last exclusive grant seen
            max_any = None       # the largest token seen so far
            for g in gs:
                if g["m"] == "exclusive":
                    if max_any is not None and g["t"] <= max_any["t"]:
                        bad.append("%s: exclusive token %d seen after token %d"
                                   % (name, g["t"], max_any["t"]))
                    last_ex = g
                elif last_ex is not None and g["t"] <= last_ex["t"]:
                    bad.append("%s: shared token %d seen after exclusive token %d"
                               % (name, g["t"], last_ex["t"]))
                if max_any is None or g["t"] > max_any["t"]:
                    max_any = g
        return bad

    def checks(self):
        admin = self.admin()
        cur = admin.cursor()
        results = []

        def one(sql):
            cur.execute(sql)
            return cur.fetchone()[0]

        # the reaper ends the locks and requests of killed clients in ~1-2 s
        for _ in range(50):
            if one("SELECT COUNT(*) FROM dlock.queue") == 0 and one(
                    "SELECT COUNT(*) FROM dlock.held WHERE owner IS NULL") == 0:
                break
            time.sleep(0.1)
        results.append(("no queue rows", one("SELECT COUNT(*) FROM dlock.queue"), 0))
        # every client is gone: a session-owned grant left is one to a dead session
        results.append(("no grants to dead connections",
                        one("SELECT COUNT(*) FROM dlock.held WHERE owner IS NULL"), 0))
        # sampled over 2 s: no lease outlives its expiry by more than the
        # reaper's interval plus one second of slack
        worst = 0
        for _ in range(8):
            worst = max(worst, one("SELECT COUNT(*) FROM dlock.held WHERE expires_at <"
                                   " NOW(6) - INTERVAL %f SECOND" % (REAP + 1.0)))
            time.sleep(0.25)
        results.append(("no lease past its expiry + %.0f s" % (REAP + 1.0), worst, 0))
        results.append(("guard tokens never negative",
                        one("SELECT COUNT(*) FROM torture.guard WHERE last_token < 0"), 0))
        cur.close()
        admin.close()
        return results

    def crashes_in_log(self):
        """Crash reports in the error log beyond the kills we did ourselves."""
        try:
            with open(os.path.join(self.dir, "server.log"), errors="replace") as f:
                text = f.read()
        except OSError:
            return 0
        return text.count("got signal") + text.count("Assertion")

    def run(self):
        a = self.args
        subprocess.run(["make", "-s", "-C", os.path.join(ROOT, "mysql_udf")], check=True,
                       stdout=subprocess.DEVNULL)
        self.server("start", str(a.port))
        admin = self.admin()
        cur = admin.cursor()
        cur.execute("CREATE DATABASE torture")
        cur.execute("CREATE TABLE torture.guard (name VARBINARY(1024) PRIMARY KEY,"
                    " last_token BIGINT NOT NULL) ENGINE=InnoDB")
        cur.execute("CREATE TABLE torture.active (client INT PRIMARY KEY,"
                    " name VARBINARY(1024), token BIGINT, mode VARCHAR(16)) ENGINE=InnoDB")
        cur.executemany("INSERT INTO torture.guard VALUES (%s, 0)", [(n,) for n in HOT + COLD])
        cur.close()
        admin.close()

        started = time.monotonic()
        deadline = started + a.seconds
        for slot in range(a.clients):
            self.spawn(slot, deadline)
        f = threading.Thread(target=self.faults, args=(deadline,), daemon=True)
        f.start()
        f.join(a.seconds + 120)
        stuck = 0
        for slot, (p, _) in list(self.procs.items()):
            p.join(max(0.1, deadline + 3 * SLACK + 5 - time.monotonic()))
            if p.is_alive():
                stuck += 1
                os.kill(p.pid, signal.SIGKILL)
                p.join(5)
        duration = time.monotonic() - started
        time.sleep(REAP + 1.5)
        results = self.checks()
        grants, violations = self.read_logs()
        order = self.token_order(grants)
        crashes = self.crashes_in_log()

        passed = failed = 0
        faults = sum(v for k, v in self.stats.items() if k.startswith("fault:"))
        print("%-44s %10s" % ("operations and faults", "count"))
        for k in sorted(self.stats):
            print("%-44s %10d" % (k, self.stats[k]))
        print()
        print("| clients | duration | operations | grants | faults | violations |")
        print("|---|---|---|---|---|---|")
        print("| %d | %.0f s | %d | %d | %d | %d |" % (
            a.clients, duration, self.stats["operations"],
            sum(len(g) for g in grants.values()), faults,
            len(violations) + len(order) + stuck))
        print()
        for what, got, want in results:
            ok = got == want
            print("%s %s%s" % ("ok  " if ok else "FAIL", what, "" if ok else " (got %s)" % got))
            passed += ok
            failed += not ok
        checks = [
            ("no exclusion, fencing, timeout or error violations", violations),
            ("tokens of conflicting session grants grow in grant order", order),
            ("every client finished", ["%d clients stuck past the deadline" % stuck] if stuck else []),
            ("the server crashed only when killed (%d kills)" % self.kills_of_server,
             ["%d crash reports in the error log, %d kills" % (crashes, self.kills_of_server)]
             if crashes > self.kills_of_server else []),
            ("enough operations ran", [] if self.stats["operations"] >= 10 * a.clients
             else ["only %d operations" % self.stats["operations"]]),
            ("every fault kind happened", [k for k in FAULT_KINDS if self.stats[k] == 0]),
        ]
        for what, bad in checks:
            print("%s %s" % ("ok  " if not bad else "FAIL", what))
            for b in bad[:10]:
                print("     ", b)
            passed += not bad
            failed += bool(bad)
        print("mysql-torture: %d passed, %d failed" % (passed, failed))
        return 0 if failed == 0 else 1

    def cleanup(self):
        for p, _ in self.procs.values():
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)
        subprocess.run([SERVER, "stop", self.dir], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        if os.environ.get("KEEP_DIR"):
            print("kept", self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)


FAULT_KINDS = ["fault: KILL QUERY of a waiter", "fault: KILL of a waiting connection",
               "fault: kill -9 of a client (holding)", "fault: kill -9 of a client (waiting)",
               "fault: KILL of a plugin store connection",
               "fault: clean server restart", "fault: kill -9 of mariadbd, restart"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="35 s with 32 clients (make check)")
    ap.add_argument("--seconds", type=float,
                    default=float(os.environ.get("MYSQL_TORTURE_SECONDS", 300)))
    ap.add_argument("--clients", type=int,
                    default=int(os.environ.get("MYSQL_TORTURE_CLIENTS", 48)))
    ap.add_argument("--port", type=int, default=int(os.environ.get("MYSQL_TORTURE_PORT", 3402)))
    args = ap.parse_args()
    if args.quick:
        args.seconds, args.clients = 35, 32
    t = Torture(args)

    def stop(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, stop)
    try:
        return t.run()
    except (KeyboardInterrupt, RuntimeError, subprocess.CalledProcessError) as e:
        print("mysql-torture: aborted: %s" % (e,))
        print("mysql-torture: 0 passed, 1 failed")
        return 1
    finally:
        t.cleanup()


if __name__ == "__main__":
    sys.exit(main())
