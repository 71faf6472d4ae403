#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""install.sql run again over the previous version keeps every lock (MariaDB).

A throwaway MariaDB with the current plugin (bench/mysql_server.sh, port
MY_UPGRADE_PORT, 3491) gets the previous version's objects
(sql/mysql/history/install-1.0.sql, after uninstall.sql); connections take
a session lock, an owner-keyed lease, a waiter, a kept place and a leader;
scripts/mysql_install.sh runs the current install.sql while they hold and
wait; every holder, token, lease end and kept place must be as before,
the waiting call still waiting (the reload decides it again, in its order,
with a new ticket) and then granted in line with a larger token, the new objects
working, and the objects equal a fresh install's (a second server, port +
1): the functions, the views' definitions, the tables' columns and keys,
the procedures, the event and the roles' grants.  Prints "ok"/"FAIL" lines
and last "mysql-upgrade: N passed, M failed".
"""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import MySQLdb

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "regress"))
from checklib import check, run  # noqa: E402
import mylib  # noqa: E402
from mylib import q  # noqa: E402
PORT = int(os.environ.get("MY_UPGRADE_PORT", "3491"))




def server(cmd, d, port=None):
    args = [os.path.join(ROOT, "bench", "mysql_server.sh"), cmd, d] + ([str(port)] if port else [])
    return subprocess.run(args, capture_output=True, text=True)


def connect(d):
    return mylib.connect(os.path.join(d, "sock"))


def client_file(d, path, before=""):
    with open(path) as f:
        return subprocess.run(["mariadb", "-S", os.path.join(d, "sock"), "-u", "root"],
                              input=before + f.read(), capture_output=True, text=True)


def install(d, script):
    """scripts/mysql_install.sh: the store account, its credentials, a script."""
    env = dict(os.environ, DLOCK_CNF=os.path.join(d, "dlock.cnf"))
    if script:
        env["DLOCK_INSTALL_SQL"] = script
    return subprocess.run([os.path.join(ROOT, "scripts", "mysql_install.sh"), "-S",
                           os.path.join(d, "sock"), "-u", "root"], env=env,
                          capture_output=True, text=True, timeout=120)


LOCKS = """SELECT name, mode, granted, owner, token, expires_at, value
             FROM dlock.locks ORDER BY name, granted DESC, token"""

DESCRIBE = [
    "SELECT name, ret, dl FROM mysql.func WHERE name LIKE 'dlock%' ORDER BY name",
    "SELECT TABLE_NAME, VIEW_DEFINITION, SECURITY_TYPE FROM information_schema.VIEWS "
    "WHERE TABLE_SCHEMA = 'dlock' ORDER BY TABLE_NAME",
    "SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, COLUMN_KEY "
    "FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'dlock' ORDER BY TABLE_NAME, ORDINAL_POSITION",
    "SELECT TABLE_NAME, ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'dlock' "
    "ORDER BY TABLE_NAME",
    "SELECT TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX, COLUMN_NAME, NON_UNIQUE FROM information_schema.STATISTICS "
    "WHERE TABLE_SCHEMA = 'dlock' ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX",
    "SELECT ROUTINE_NAME, ROUTINE_TYPE, ROUTINE_DEFINITION, SECURITY_TYPE FROM information_schema.ROUTINES "
    "WHERE ROUTINE_SCHEMA = 'dlock' ORDER BY ROUTINE_NAME",
    "SELECT EVENT_NAME, EVENT_DEFINITION, STATUS FROM information_schema.EVENTS "
    "WHERE EVENT_SCHEMA = 'dlock' ORDER BY EVENT_NAME",
    "SHOW GRANTS FOR dlock_user",
    "SHOW GRANTS FOR dlock_monitor",
    "SHOW GRANTS FOR dlock_admin",
]


def describe(c):
    return [sorted(q(c, s)) for s in DESCRIBE]


def main():
    top = tempfile.mkdtemp(prefix="dlock-myupgrade.")
    os.chmod(top, 0o755)
    a_dir, b_dir = os.path.join(top, "a"), os.path.join(top, "b")
    try:
        r = server("start", a_dir, PORT)
        check("a MariaDB with the current plugin", r.returncode == 0, r.stderr[-500:])
        if r.returncode != 0:
            return
        # the plugin stays loaded (as a server that loads it at start keeps it)
        r = client_file(a_dir, os.path.join(ROOT, "sql/mysql/uninstall.sql"),
                        "SET @dlock_keep_plugin = 1;\n")
        check("ran sql/mysql/uninstall.sql", r.returncode == 0, r.stderr[-500:])
        r = install(a_dir, os.path.join(ROOT, "sql/mysql/history/install-1.0.sql"))
        check("installed 1.0 (sql/mysql/history/install-1.0.sql)", r.returncode == 0, r.stderr[-500:])
        admin = connect(a_dir)
        check("the 1.0 objects: no dlock.stats",
              q(admin, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'dlock' "
                       "AND TABLE_NAME = 'stats'") == [(0,)])
        ok = None
        for _ in range(50):  # the manager reloads the tables the install made
            try:
                ok = q(admin, "SELECT dlock_acquire('up/probe', 2) > 0")[0][0]
                break
            except MySQLdb.Error:
                time.sleep(0.2)
        check("the 1.0 objects work: a grant", ok == 1)
        q(admin, "SELECT dlock_release('up/probe')")

        c1, c2 = connect(a_dir), connect(a_dir)
        t_session = q(c1, "SELECT dlock_acquire('up/session', 5)")[0][0]
        t_lease = q(admin, "SELECT dlock_acquire('up/lease', 5, 120, 'exclusive', 'up-k')")[0][0]
        term = q(admin, "SELECT dlock_campaign('up/leader', 'host-a:1', 5, 120, 'up-l')")[0][0]
        kept = q(admin, "SELECT dlock_acquire('up/lease', 0.1, 120, 'exclusive', 'up-kp', 1)")[0][0]
        check("a kept place in line behind the lease", kept is None)
        got = []
        t = threading.Thread(target=lambda: got.append(q(c2, "SELECT dlock_acquire('up/session', 60)")[0][0]))
        t.start()
        for _ in range(100):
            if q(admin, "SELECT COUNT(*) FROM dlock.locks WHERE name = 'up/session' AND NOT granted")[0][0]:
                break
            time.sleep(0.05)
        before = q(admin, LOCKS)
        check("before: holders, a waiter, a kept place, a leader (%d rows)" % len(before),
              len(before) >= 5, before)

        r = install(a_dir, None)
        check("the current install.sql over the 1.0 objects, while they hold and wait",
              r.returncode == 0, r.stderr[-500:])
        after = q(admin, LOCKS)
        # the reload decides waiting calls again, in their order, with new
        # tickets (docs/operations.md: Upgrading): compare the holders and kept places exactly
        kept_rows = [r for r in before if r[2] == 1 or r[3] is not None]
        check("after: every holder, token, lease end and kept place as before",
              [r for r in after if r[2] == 1 or r[3] is not None] == kept_rows,
              "\n  before %s\n  after  %s" % (before, after))
        waiting = 0
        for _ in range(100):
            waiting = q(admin, "SELECT COUNT(*) FROM dlock.locks WHERE name = 'up/session' "
                               "AND NOT granted")[0][0]
            if waiting:
                break
            time.sleep(0.05)
        check("after: the waiting call still waits", waiting == 1)
        check("the leader's value kept", q(admin, "SELECT dlock_leader('up/leader')") in
              ([("host-a:1",)], [(b"host-a:1",)]))
        check("the lease renews under its owner key",
              q(admin, "SELECT dlock_renew('up/lease', NULL, 'up-k') IS NOT NULL")[0][0] == 1)
        q(c1, "SELECT dlock_release('up/session')")
        t.join(30)
        check("the waiter is granted in line, with a larger token",
              len(got) == 1 and got[0] is not None and got[0] > t_session, (got, t_session))
        q(admin, "SELECT dlock_release('up/lease', 'up-k')")
        kp = q(admin, "SELECT dlock_acquire('up/lease', 1, 120, 'exclusive', 'up-kp', 1)")[0][0]
        check("the kept place is granted next, with a larger token", kp is not None and kp > t_lease,
              (kp, t_lease))
        check("the new objects work: dlock.stats",
              q(admin, "SELECT grants > 0 FROM dlock.stats")[0][0] == 1)
        check("the leader's term below every new token", term < kp)
        for c in (c1, c2):
            c.close()

        upgraded = describe(admin)
        r = server("start", b_dir, PORT + 1)
        check("a fresh MariaDB with the current install", r.returncode == 0, r.stderr[-500:])
        fresh = describe(connect(b_dir))
        diffs = [(DESCRIBE[i][:60], sorted(set(upgraded[i]) ^ set(fresh[i]))[:4])
                 for i in range(len(DESCRIBE)) if upgraded[i] != fresh[i]]
        check("the upgraded objects equal a fresh install's (functions, views, columns, keys, "
              "procedures, event, roles' grants)", not diffs, diffs)
    finally:
        for d in (a_dir, b_dir):
            server("stop", d)
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    run("mysql-upgrade", main)
