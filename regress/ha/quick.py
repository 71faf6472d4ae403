#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""dlock on a Patroni cluster (scripts/ha.sh, three nodes, etcd, strict
synchronous mode), each node in a network namespace of its own and clients
in theirs.  The quick checks of `make check`:

  standby: a dlock call on a replica fails at once with 25006.
  failover: kill -9 of the leader's Patroni and PostgreSQL.  A lease
      acknowledged before is renewed by its key on the promoted node with
      the same token; a session lock of the old leader is free there; the
      next grant has a larger token than any before; the Python client
      (clients/python) keeps its lease across the failover, renewing it on
      the new leader, and releases it there.  The time from the
      kill to the renewal is printed.
  client partition: a client holding a lease is cut from the leader.  Its
      lease runs out and the lock goes to another client with a larger
      token; once the link is back, the stale holder's fenced write
      changes nothing and its renewal fails with DL001.
  isolated primary: the leader is cut from the other nodes (and so from
      etcd's majority) while a client still reaches it.  Nothing it is
      asked for during the cut is granted (its commits wait for a
      synchronous standby it cannot reach); the promoted node grants the
      same names; the tokens of the old leader's clients never come back.

Usage: quick.py DIR   (the cluster in DIR and the namespaces dlhq-*: made,
                       and removed at the end, also on failure; ports from
                       $HA_QUICK_PORT_BASE, default 5900)
Prints "ok"/"FAIL" lines and "ha: N passed, M failed".
"""
import os
import sys
import threading
import time

import psycopg
import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "..", "clients", "python"))
import dlock  # noqa: E402
from checklib import check, run  # noqa: E402
from halib import NODES, Cluster, mono, netns  # noqa: E402

PREFIX = "dlhq-"


def connect(cl, ns, **extra):
    """A client's connection from namespace ns through the multi-host
    string; a cut link errors out within seconds instead of hanging."""
    with netns(cl.ns(ns)):
        c = psycopg2.connect(cl.dsn, connect_timeout=2, tcp_user_timeout=4000,
                             keepalives=1, keepalives_idle=1, keepalives_interval=1,
                             keepalives_count=2, application_name="ha-quick", **extra)
    c.autocommit = True
    return c


def one(c, sql, args=()):
    with c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone()[0]


def server_addr(c):
    return one(c, "SELECT host(inet_server_addr())")


def node_of(cl, c):
    """The node a client connection landed on (10.231.0.N is nN)."""
    addr = server_addr(c)
    return "n%s" % addr.rsplit(".", 1)[1] if addr else None


def until(pred, timeout, step=0.1):
    end = mono() + timeout
    while mono() < end:
        try:
            v = pred()
        except psycopg2.Error:
            v = None
        if v:
            return v
        time.sleep(step)
    return None


def reconnect(cl, ns, timeout=120):
    """Connect until a primary answers (after a failover)."""
    def attempt():
        try:
            return connect(cl, ns)
        except psycopg2.Error:
            return None
    return until(attempt, timeout, 0.2)


def standby(cl):
    """A call on a replica fails at once, and says where to go."""
    leader = cl.patroni_leader()
    replica = [n for n in NODES if n != leader][0]
    c = cl.admin(replica)
    t0 = mono()
    try:
        one(c, "SELECT dlock_acquire('ha/standby', timeout => '10 s')")
        got = "granted"
    except psycopg2.Error as e:
        got = "%s %s" % (e.pgcode, e.pgerror.splitlines()[0] if e.pgerror else "")
    took = mono() - t0
    c.close()
    check("standby: a call on a replica fails at once with 25006",
          got.startswith("25006") and took < 2, "%s after %.1f s" % (got, took))


def factory(cl, ns):
    """The Python client's connections, from namespace ns (each a new one)."""
    def connect_():
        with netns(cl.ns(ns)):
            return psycopg.connect(cl.dsn, autocommit=True, connect_timeout=2,
                                   tcp_user_timeout=4000)
    return connect_


def failover(cl, c1):
    a = connect(cl, c1)
    old = node_of(cl, a)
    lease = one(a, "SELECT dlock_acquire('ha/lease', ttl => '120 s', owner => 'k-lease')")
    session = one(a, "SELECT dlock_acquire('ha/session')")
    # the Python client holds a 45 s lease across the failover: it renews
    # every 15 s and retries on new connections until the lease's deadline
    client = dlock.lock(factory(cl, c1), "ha/client", ttl=45)
    py_held = client.__enter__()
    t0 = mono()
    cl.kill_node(old)
    b = None
    renewed = None
    end = mono() + 120
    while mono() < end and renewed is None:
        b = b or reconnect(cl, c1, max(1, end - mono()))
        if b is None:
            break
        try:
            renewed = one(b, "SELECT dlock_renew('ha/lease', owner => 'k-lease') IS NOT NULL")
        except psycopg2.Error:
            b = None
            time.sleep(0.2)
    took = mono() - t0
    new = node_of(cl, b) if b else None
    print("     failover: kill -9 of %s to the lease renewed on %s: %.1f s" % (old, new, took))
    check("failover: a new leader serves the client's multi-host connection",
          b is not None and new != old, "%s -> %s" % (old, new))
    if b is None:
        return
    check("failover: the acknowledged lease is renewed by its key on the new leader",
          renewed is True, "%r" % renewed)
    held = one(b, "SELECT array_agg(token) FROM dlock.locks WHERE name = 'ha/lease'")
    check("failover: ... with its token", held == [lease], "%r, acknowledged %d" % (held, lease))
    free = one(b, "SELECT dlock_try_acquire('ha/session')")
    check("failover: the old leader's session lock is free on the new one",
          free is not None and free > max(lease, session),
          "token %r after %d, %d" % (free, lease, session))
    # a renewal by the client after the failover moves the expiry
    expiry = one(b, "SELECT max(expires_at) FROM dlock.locks WHERE name = 'ha/client'")
    moved = until(lambda: one(b, "SELECT max(expires_at) > %s FROM dlock.locks"
                                 " WHERE name = 'ha/client'", (expiry,)), 40)
    check("failover: the Python client's lease is held and renewed on the new leader, not lost",
          moved and not py_held.lost and
          one(b, "SELECT array_agg(token) FROM dlock.locks WHERE name = 'ha/client'") == [py_held.token],
          "renewed %r, lost %r (%s)" % (moved, py_held.lost, py_held.lost_reason))
    client.__exit__(None, None, None)
    check("failover: ... and released by it",
          not one(b, "SELECT count(*) FROM dlock.locks WHERE name = 'ha/client'"), "")
    one(b, "SELECT dlock_release('ha/lease', owner => 'k-lease')")
    nxt = one(b, "SELECT dlock_acquire('ha/lease', ttl => '10 s', owner => 'k-next')")
    check("failover: the next grant of the lease's lock has a larger token",
          nxt is not None and nxt > max(lease, session, free or 0), "%r" % nxt)
    one(b, "SELECT dlock_release_all('k-next')")
    one(b, "SELECT dlock_release_all()")
    b.close()
    cl.start_node(old)
    check("failover: the old leader rejoins as a replica, one synchronous",
          cl.wait_healthy(180) is not None, cl.sh("status", cl.dir, check=False))


def client_partition(cl, c1, c2):
    holder = connect(cl, c2)
    leader = node_of(cl, holder)
    holder.cursor().execute("CREATE TABLE IF NOT EXISTS ha_guard (name text PRIMARY KEY, last_token bigint)")
    holder.cursor().execute("INSERT INTO ha_guard VALUES ('ha/fenced', 0) ON CONFLICT DO NOTHING")
    t = one(holder, "SELECT dlock_acquire('ha/fenced', ttl => '3 s', owner => 'k-stale')")
    t0 = mono()

    def fenced_write(c, token):
        with c.cursor() as cur:
            cur.execute("UPDATE ha_guard SET last_token = %s WHERE name = 'ha/fenced'"
                        " AND last_token < %s AND dlock_check('ha/fenced', %s)",
                        (token, token, token))
            return cur.rowcount
    check("client partition: the holder's fenced write lands", fenced_write(holder, t) == 1, "")
    cl.cut(c2, leader)
    try:
        one(holder, "SELECT dlock_renew('ha/fenced', owner => 'k-stale')")
        renew = "answered"
    except psycopg2.Error as e:
        renew = "failed: %s" % (e.pgcode or "connection lost")
    check("client partition: the cut-off holder cannot renew", renew.startswith("failed"), renew)
    other = connect(cl, c1)
    t2 = one(other, "SELECT dlock_acquire('ha/fenced', ttl => '30 s', owner => 'k-next',"
                    " timeout => '30 s')")
    print("     client partition: the next holder got the lock %.1f s after the 3 s lease's grant"
          % (mono() - t0))
    check("client partition: the lease runs out and the next holder gets a larger token",
          t2 is not None and t2 > t, "%r after %d" % (t2, t))
    check("client partition: the next holder's fenced write lands", fenced_write(other, t2) == 1, "")
    cl.heal(c2, leader)
    stale = reconnect(cl, c2, 30)
    check("client partition: the stale holder's fenced write changes nothing",
          stale is not None and fenced_write(stale, t) == 0, "")
    try:
        one(stale, "SELECT dlock_renew('ha/fenced', owner => 'k-stale')")
        renew = "answered"
    except psycopg2.Error as e:
        renew = e.pgcode
    check("client partition: the stale holder's renewal fails with DL001", renew == "DL001", renew)
    one(other, "SELECT dlock_release_all('k-next')")
    for c in (holder, stale, other):
        c.close()


def isolated_primary(cl, c1, c3):
    a = connect(cl, c1)
    old = node_of(cl, a)
    before = one(a, "SELECT dlock_acquire('ha/iso-before', ttl => '120 s', owner => 'k-before')")
    others = [n for n in NODES if n != old]
    # the old leader keeps its client but loses its peers (etcd's majority too)
    cl.cut(old, others[0], old, others[1], old, c3)
    answers = []        # what the isolated node answered, with when
    t_cut = mono()
    stop = threading.Event()

    def ask_isolated():
        i = 0
        while not stop.is_set() and mono() - t_cut < 60:
            i += 1
            for sql in ("SELECT dlock_acquire('ha/iso-s', timeout => '2 s')",
                        "SELECT dlock_acquire('ha/iso-k', ttl => '60 s', owner => 'k-iso%d',"
                        " timeout => '2 s')" % i):
                try:
                    answers.append((mono() - t_cut, one(a, sql)))
                except psycopg2.Error as e:
                    answers.append((mono() - t_cut, e.pgcode or "connection lost"))
                    return
    asker = threading.Thread(target=ask_isolated, daemon=True)
    asker.start()
    new = cl.wait_leader(other_than=old, timeout=120)
    took = mono() - t_cut
    check("isolated primary: another node is promoted", new is not None, "%r" % new)
    if new is None:
        stop.set()
        return
    print("     isolated primary: %s promoted %.1f s after the cut of %s" % (new, took, old))
    b = reconnect(cl, c3, 60)
    s = one(b, "SELECT dlock_acquire('ha/iso-s', timeout => '10 s')") if b else None
    k = one(b, "SELECT dlock_acquire('ha/iso-k', ttl => '10 s', owner => 'k-new',"
               " timeout => '10 s')") if b else None
    check("isolated primary: the new leader grants the names the old one was asked for",
          s is not None and k is not None and min(s, k) > before, "%r %r" % (s, k))
    # the old leader demotes itself once it cannot reach etcd
    demoted = until(lambda: cl.role(old) != "primary", 60)
    stop.set()
    asker.join(10)
    granted = [(round(t, 1), v) for t, v in answers if isinstance(v, int)]
    check("isolated primary: nothing asked of the isolated node was granted",
          answers and not granted, "granted %r of %d answers" % (granted, len(answers)))
    print("     isolated primary: the calls on the isolated node and their answers: %s; it %s" % (
        ", ".join("+%.1f s %s" % (t, v) for t, v in answers),
        "stepped down" if demoted else "is still a primary"))
    check("isolated primary: the old leader steps down", demoted, "")
    lease = one(b, "SELECT array_agg(token) FROM dlock.locks WHERE name = 'ha/iso-before'")
    check("isolated primary: the lease granted before the cut is held on the new leader",
          lease == [before], "%r, acknowledged %d" % (lease, before))
    one(b, "SELECT dlock_release_all()")
    one(b, "SELECT dlock_release_all('k-new')")
    one(b, "SELECT dlock_release_all('k-before')")
    b.close()
    a.close()
    cl.heal()
    check("isolated primary: healed, the old leader rejoins as a replica",
          cl.wait_healthy(180) is not None, cl.sh("status", cl.dir, check=False))


def main():
    cl = Cluster(sys.argv[1], PREFIX, int(os.environ.get("HA_QUICK_PORT_BASE", 5900)))
    try:
        t0 = mono()
        cl.start()
        print("     cluster up in %.1f s: %s" % (mono() - t0, cl.dsn))
        c1, c2, c3 = cl.client("c1"), cl.client("c2"), cl.client("c3")
        check("the cluster has a leader, two replicas, one synchronous",
              cl.wait_healthy(120) is not None, cl.sh("status", cl.dir, check=False))
        standby(cl)
        failover(cl, c1)
        client_partition(cl, c1, c2)
        isolated_primary(cl, c1, c3)
    finally:
        cl.stop()


if __name__ == "__main__":
    run("ha", main)
