#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""ALTER EXTENSION dlock UPDATE keeps every lock (regress/upgrade).

A throwaway cluster (scripts/pg_cluster.sh, port UPGRADE_PORT, 5591) gets
the previous version's SQL objects (CREATE EXTENSION dlock VERSION '1.0')
under the current library; sessions take session locks, an owner-keyed
lease, a waiter, a kept place and a leader; the extension is updated while
they hold and wait; then every holder, token, lease end, waiter, kept place
and the leader's value must be as before, the waiter must be granted in
line with a larger token, the new objects must work, and the updated
objects must equal a fresh install's (a second cluster, port + 1): every
member of the extension with its definition, privileges and comment.  Last:
SQL objects of a version the library does not know are refused with a
message that says what to do.  Prints "ok"/"FAIL" lines and last
"upgrade: N passed, M failed".
"""

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import psycopg2

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "regress"))
from checklib import check, run  # noqa: E402
PORT = int(os.environ.get("UPGRADE_PORT", "5591"))
OLD, NEW = "1.0", "1.2"




def connect(d, port):
    c = psycopg2.connect(host=d, port=port, user="postgres", dbname="postgres")
    c.autocommit = True
    return c


def q(c, sql, args=()):
    with c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchall() if cur.description else None


def cluster(cmd, d, port=None, version=None):
    env = dict(os.environ)
    if version:
        env["DLOCK_EXT_VERSION"] = version
    args = [os.path.join(ROOT, "scripts", "pg_cluster.sh"), cmd, d] + ([str(port)] if port else [])
    return subprocess.run(args, env=env, capture_output=True, text=True)


# every member of the extension, with what defines it
DESCRIBE = """
WITH m AS (
    SELECT d.classid, d.objid, pg_describe_object(d.classid, d.objid, 0) AS obj
      FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
     WHERE e.extname = 'dlock' AND d.deptype = 'e')
SELECT m.obj,
       CASE m.classid
         WHEN 'pg_proc'::regclass THEN
           (SELECT pg_get_functiondef(p.oid) || ' acl=' || coalesce(p.proacl::text, '')
              FROM pg_proc p WHERE p.oid = m.objid)
         WHEN 'pg_class'::regclass THEN
           (SELECT c.relkind::text || ' acl=' || coalesce(c.relacl::text, '') ||
                   coalesce(' view=' || pg_get_viewdef(c.oid), '') ||
                   ' cols=' || coalesce((SELECT string_agg(a.attname || ':' || format_type(a.atttypid, a.atttypmod)
                                                           || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
                                                           || coalesce(' default ' || pg_get_expr(ad.adbin, ad.adrelid), ''),
                                                           ', ' ORDER BY a.attnum)
                                           FROM pg_attribute a
                                           LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
                                          WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '') ||
                   ' constraints=' || coalesce((SELECT string_agg(pg_get_constraintdef(k.oid), '; ' ORDER BY k.conname)
                                                  FROM pg_constraint k WHERE k.conrelid = c.oid), '') ||
                   ' indexes=' || coalesce((SELECT string_agg(pg_get_indexdef(i.indexrelid), '; ' ORDER BY 1)
                                              FROM pg_index i WHERE i.indrelid = c.oid), '') ||
                   ' triggers=' || coalesce((SELECT string_agg(pg_get_triggerdef(t.oid), '; ' ORDER BY t.tgname)
                                               FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal), '')
              FROM pg_class c WHERE c.oid = m.objid)
         WHEN 'pg_namespace'::regclass THEN
           (SELECT 'acl=' || coalesce(n.nspacl::text, '') FROM pg_namespace n WHERE n.oid = m.objid)
         ELSE ''
       END AS def,
       coalesce(obj_description(m.objid, (SELECT relname FROM pg_class WHERE oid = m.classid)), '') AS comment
  FROM m
 ORDER BY m.obj
"""

LOCKS = """SELECT name, mode, granted, owner, token, expires_at, value
             FROM dlock.locks ORDER BY name, granted DESC, token"""


def main():
    top = tempfile.mkdtemp(prefix="dlock-upgrade.")
    os.chmod(top, 0o755)
    a_dir, b_dir = os.path.join(top, "a"), os.path.join(top, "b")
    threads = []
    try:
        r = cluster("start", a_dir, PORT, OLD)
        check("a cluster with the %s SQL objects under the current library" % OLD, r.returncode == 0,
              r.stderr[-500:])
        if r.returncode != 0:
            return
        admin = connect(a_dir, PORT)
        check("extension version %s" % OLD, q(admin, "SELECT extversion FROM pg_extension "
                                               "WHERE extname = 'dlock'") == [(OLD,)])
        check("the %s objects work: a grant" % OLD,
              q(admin, "SELECT dlock_acquire('up/probe') > 0")[0][0] is True)
        q(admin, "SELECT dlock_release('up/probe')")

        # holders, a waiter, a kept place and a leader, while the update runs
        s1, s2 = connect(a_dir, PORT), connect(a_dir, PORT)
        t_session = q(s1, "SELECT dlock_acquire('up/session')")[0][0]
        t_lease = q(admin, "SELECT dlock_acquire('up/lease', ttl => '120 s', owner => 'up-k')")[0][0]
        t_shared = q(s1, "SELECT dlock_acquire('/up/tree/leaf', 'shared')")[0][0]
        term = q(admin, "SELECT dlock_campaign('up/leader', 'host-a:1', ttl => '120 s', owner => 'up-l')")[0][0]
        kept = q(admin, "SELECT dlock_acquire('up/lease', timeout => '100 ms', ttl => '120 s', "
                        "owner => 'up-kp', keep_place => true)")[0][0]
        check("a kept place in line behind the lease", kept is None)
        got = []
        t = threading.Thread(target=lambda: got.append(q(s2, "SELECT dlock_acquire('up/session')")[0][0]))
        t.start()
        threads.append(t)
        for _ in range(100):
            if q(admin, "SELECT count(*) FROM dlock.locks WHERE name = 'up/session' AND NOT granted")[0][0]:
                break
            time.sleep(0.05)
        before = q(admin, LOCKS)
        check("before: holders, a waiter, a kept place, a leader (%d rows)" % len(before), len(before) >= 7,
              before)

        q(admin, "ALTER EXTENSION dlock UPDATE")
        check("ALTER EXTENSION dlock UPDATE to %s" % NEW,
              q(admin, "SELECT extversion FROM pg_extension WHERE extname = 'dlock'") == [(NEW,)])
        after = q(admin, LOCKS)
        check("after: every holder, token, lease end, waiter and kept place as before", after == before,
              "\n  before %s\n  after  %s" % (before, after))
        check("the leader and its value kept",
              q(admin, "SELECT value, token FROM dlock_leader('up/leader')") == [("host-a:1", term)])
        check("the lease renews under its owner key",
              q(admin, "SELECT dlock_renew('up/lease', owner => 'up-k') IS NOT NULL")[0][0] is True)
        q(s1, "SELECT dlock_release('up/session')")
        t.join(30)
        check("the waiter is granted in line, with a larger token",
              len(got) == 1 and got[0] is not None and got[0] > t_session, (got, t_session))
        q(admin, "SELECT dlock_release('up/lease', 'up-k')")
        kp = q(admin, "SELECT dlock_acquire('up/lease', timeout => '1 s', ttl => '120 s', "
                      "owner => 'up-kp', keep_place => true)")[0][0]
        check("the kept place is granted next, with a larger token", kp is not None and kp > t_lease,
              (kp, t_lease))
        check("the new objects work: dlock.stats and dlock_force_release",
              q(admin, "SELECT grants > 0 FROM dlock.stats")[0][0] is True and
              q(admin, "SELECT dlock_force_release('/up/tree/leaf', reason => 'upgrade test')")[0][0] == 1)
        check("a token of the old shared holder below every new one", t_shared < kp)
        for c in (s1, s2):
            c.close()

        # the updated objects equal a fresh install's
        upgraded = q(admin, DESCRIBE)
        r = cluster("start", b_dir, PORT + 1)
        check("a fresh cluster with %s" % NEW, r.returncode == 0, r.stderr[-500:])
        fresh = q(connect(b_dir, PORT + 1), DESCRIBE)
        diff = sorted(set(upgraded) ^ set(fresh))
        check("the updated extension equals a fresh %s install (%d members, definitions, privileges, "
              "comments)" % (NEW, len(fresh)), upgraded == fresh, diff[:6])

        # a version the library does not know
        q(admin, "UPDATE pg_extension SET extversion = '9.9' WHERE extname = 'dlock'")
        q(admin, "SELECT pg_terminate_backend(dlock_manager_pid())")
        msg = ""
        try:
            q(connect(a_dir, PORT), "SELECT dlock_acquire('up/after', timeout => '20 s')")
        except psycopg2.Error as e:
            msg = str(e)
        check("SQL objects of an unknown version refused, saying what to do",
              "does not know the SQL objects of version 9.9" in msg and "ALTER EXTENSION dlock UPDATE" in msg,
              msg[:300])
        q(admin, "UPDATE pg_extension SET extversion = %s WHERE extname = 'dlock'", (NEW,))
        q(admin, "SELECT pg_terminate_backend(dlock_manager_pid())")
        ok = None
        for _ in range(60):
            try:
                ok = q(connect(a_dir, PORT), "SELECT dlock_acquire('up/after', timeout => '5 s') > 0")[0][0]
                break
            except psycopg2.Error:
                time.sleep(0.5)
        check("back to a known version: locks again", ok is True)
    finally:
        for d in (a_dir, b_dir):
            cluster("stop", d)
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    run("upgrade", main)
