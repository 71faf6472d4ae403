# SPDX-License-Identifier: PostgreSQL
"""The Patroni cluster of scripts/ha.sh, seen from a test: its nodes, who
leads, kills and network cuts, and connections made from inside a client's
network namespace.

A connection opened inside `netns(name)` belongs to that namespace for its
whole life (a socket keeps the namespace it was made in), so one process
can hold clients on both sides of a cut.  The harness itself reaches every
node through its unix socket, which no network cut touches.
"""
import os
import signal
import subprocess
import sys
import time

import psycopg2

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
from netnslib import netns  # noqa: E402,F401  (the tests take it from here too)

HA = os.path.join(HERE, "..", "..", "scripts", "ha.sh")
NODES = ("n1", "n2", "n3")


def mono():
    return time.monotonic()


def alive(pid):
    """Whether pid runs (a zombie, not yet reaped, is gone for our purposes)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, ValueError):
        return False


class Cluster:
    """scripts/ha.sh's cluster in DIR, in network namespaces PREFIX*."""

    def __init__(self, d, prefix, port_base):
        self.dir = d
        self.prefix = prefix
        self.port_base = port_base
        self.dsn = None         # the multi-host string clients use (TCP)

    def sh(self, *args, timeout=180, check=True):
        r = subprocess.run([HA] + [str(a) for a in args], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=timeout,
                           env=dict(os.environ, HA_PORT_BASE=str(self.port_base)))
        if check and r.returncode != 0:
            raise RuntimeError("ha.sh %s failed (%d): %s" % (
                " ".join(map(str, args)), r.returncode, r.stdout[-2000:]))
        return r.stdout

    def start(self):
        out = self.sh("start", self.dir, "--netns", self.prefix, timeout=300)
        self.dsn = out.strip().splitlines()[-1]
        return self.dsn

    def stop(self):
        return self.sh("stop", self.dir, check=False, timeout=120)

    def client(self, name):
        """A client namespace joined to the cluster's network; `name` is
        what cut and heal take, the namespace is PREFIX + name."""
        self.sh("client", self.dir, name)
        return name

    def ns(self, name):
        return self.prefix + name

    def cut(self, *names):
        """Cut every link between the consecutive pairs of `names`."""
        self.sh("cut", self.dir, *names)

    def heal(self, *pair):
        self.sh("heal", self.dir, *pair)

    def isolate(self, name):
        self.sh("isolate", self.dir, name)

    def socket(self, node):
        d, port = self.sh("socket", self.dir, node).strip().rsplit(" ", 1)   # d may hold a space
        return d, int(port)

    def pids(self, node):
        """{'postgres': pid, 'patroni': pid, 'etcd': pid} of a node (absent:
        not running)."""
        words = self.sh("pids", self.dir, node).split()
        return {k: int(v) for k, v in zip(("postgres", "patroni", "etcd"), words) if v.isdigit()}

    def log_file(self, node):
        return os.path.join(self.dir, "node" + node[1:], "postgresql.log")

    def admin(self, node, timeout=5):
        d, port = self.socket(node)
        c = psycopg2.connect(host=d, port=port, user="postgres", dbname="postgres",
                             connect_timeout=timeout, application_name="ha-admin")
        c.autocommit = True
        return c

    def q(self, node, sql, args=(), timeout=5):
        """One statement on a node through its socket; None if it fails."""
        try:
            c = self.admin(node, timeout)
        except psycopg2.Error:
            return None
        try:
            with c.cursor() as cur:
                cur.execute("SET statement_timeout = %s", ("%ds" % timeout,))
                cur.execute(sql, args)
                return cur.fetchall() if cur.description else []
        except psycopg2.Error:
            return None
        finally:
            c.close()

    def role(self, node):
        """'primary', 'replica' or None (down or not answering)."""
        r = self.q(node, "SELECT pg_is_in_recovery()")
        if r is None:
            return None
        return "replica" if r[0][0] else "primary"

    def patroni_leader(self):
        try:
            out = self.sh("leader", self.dir, timeout=20).strip()
        except (RuntimeError, subprocess.TimeoutExpired):
            return None
        return out if out in NODES else None

    def wait_leader(self, other_than=None, timeout=120):
        """Until Patroni names a leader (not `other_than`) whose server is a
        primary and whose lock manager answers; its name, or None."""
        end = mono() + timeout
        while mono() < end:
            node = self.patroni_leader()
            if node and node != other_than and self.role(node) == "primary":
                r = self.q(node, "SELECT dlock_try_acquire('ha/probe') > 0"
                                 " AND dlock_release('ha/probe')", timeout=3)
                if r and r[0][0]:
                    return node
            time.sleep(0.2)
        return None

    def wait_healthy(self, timeout=180):
        """Until there is a leader with two streaming replicas, one of them
        synchronous; the leader's name, or None."""
        end = mono() + timeout
        while mono() < end:
            node = self.wait_leader(timeout=max(1, end - mono()))
            if node is None:
                return None
            r = self.q(node, "SELECT count(*), count(*) FILTER (WHERE sync_state = 'sync')"
                             " FROM pg_stat_replication WHERE state = 'streaming'")
            if r and r[0] == (2, 1):
                return node
            time.sleep(0.5)
        return None

    def kill_node(self, node, what=("patroni", "postgres")):
        """kill -9 of a node's processes (Patroni first: it would restart
        its PostgreSQL), and of the postmaster's children with it."""
        p = self.pids(node)
        for k in what:
            if k in p and alive(p[k]):
                os.kill(p[k], signal.SIGKILL)
        if "postgres" in what and "postgres" in p:
            end = mono() + 15
            kids = children_of(p["postgres"])
            while mono() < end and any(alive(k) for k in kids):
                time.sleep(0.05)
            for k in kids:
                if alive(k):
                    os.kill(k, signal.SIGKILL)

    def start_node(self, node):
        """Start a node's Patroni (and etcd member) again after a kill."""
        self.sh("revive", self.dir, node)


def children_of(pid):
    out = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open("/proc/%s/stat" % p) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(p))
            except (OSError, IndexError, ValueError):
                pass
    return out
