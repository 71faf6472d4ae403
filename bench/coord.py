#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""bench/coord.py — workload 6: dlock against ZooKeeper's fair lock, both
driven by this one Python driver so the client costs are equal.

One process per client (multiprocessing, fork).  dlock: psycopg2,
autocommit, `SELECT dlock_acquire(name)` / `SELECT dlock_release(name)`.
ZooKeeper: kazoo's `Lock` recipe (sequential ephemeral nodes, each waiter
watches its predecessor: FIFO) on a single local ZooKeeper that this script
starts from Debian's `zookeeper` package with its own data dir and zoo.cfg,
clientPort on 127.0.0.1 only, forceSync=yes, and stops by pid at the end,
also on failure or SIGTERM (and the JVM gets SIGTERM if this process dies).

Cells (each client loops for SECONDS):
  * uncontended pairs: c clients, each its own name: acquire + release;
  * contended hand-offs: N clients on one name: acquire -> hold -> release.
Per cell: operations/s, wait (the acquire call, monotonic clock)
p50/p99/max and Jain's fairness index over the per-client counts — the same
definitions as bench/bench_stats.h.  An operation counts when its acquire
returned inside the common window [start, start + SECONDS).

Usage: coord.py [--quick] [--seconds S] [--pg DSN] [--zk-port PORT] [--workdir DIR]
                [--clients "1 8 32"] [--waiters "2 8 32"] [--holds "0 1"]
The PostgreSQL server (with dlock created) comes from DSN or the PG*
variables.  Prints a markdown section on stdout, progress on stderr.
"""
import argparse
import ctypes
import multiprocessing as mp
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback

ZK_JAR = "/usr/share/java/zookeeper.jar"  # its manifest lists its dependencies
# a logger binding (same Debian package as slf4j-api): warnings and errors
# reach zookeeper.log, per-session INFO lines do not cost the server
ZK_LOGGER = "/usr/share/java/slf4j-simple.jar"
PR_SET_PDEATHSIG = 1


def log(msg):
    print("coord: " + msg, file=sys.stderr, flush=True)


# --- ZooKeeper server -------------------------------------------------------

def die_with_parent(sig=signal.SIGTERM):
    """die_with_parent: a SIGKILLed driver must not leave its ZooKeeper or
    its clients running (called in the child: before exec, or first thing)."""
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, sig)


def zk_ask(port, word):
    """zk_ask: a four-letter-word command; the reply, or '' if not serving."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
            s.sendall(word.encode())
            out = b""
            while True:
                b = s.recv(4096)
                if not b:
                    return out.decode(errors="replace")
                out += b
    except OSError:
        return ""


def zk_zxid(port):
    """zk_zxid: the id of the last transaction the server applied."""
    for line in zk_ask(port, "srvr").splitlines():
        if line.startswith("Zxid:"):
            return int(line.split(":", 1)[1].strip(), 16)
    raise RuntimeError("ZooKeeper's srvr reply has no Zxid")


class ZooKeeper:
    def __init__(self, workdir, port):
        self.dir = workdir
        self.port = port
        self.proc = None

    def start(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=2).close()
        except OSError:
            pass
        else:
            raise RuntimeError("port %d already serves something; pick another --zk-port" % self.port)
        data = os.path.join(self.dir, "data")
        os.makedirs(data)
        cfg = os.path.join(self.dir, "zoo.cfg")
        with open(cfg, "w") as f:
            f.write("tickTime=2000\n"
                    "dataDir=%s\n"
                    "clientPort=%d\n"
                    "clientPortAddress=127.0.0.1\n"
                    "forceSync=yes\n"
                    "maxClientCnxns=0\n"
                    "autopurge.purgeInterval=0\n"
                    "admin.enableServer=false\n"
                    "4lw.commands.whitelist=srvr\n" % (data, self.port))
        self.logfile = os.path.join(self.dir, "zookeeper.log")
        with open(self.logfile, "w") as out:
            self.proc = subprocess.Popen(
                ["java", "-Xms256m", "-Xmx512m", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
                 "-cp", ZK_JAR + ":" + ZK_LOGGER,
                 "org.apache.zookeeper.server.ZooKeeperServerMain", cfg],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent)
        # "ruok" answers before the database is loaded; "srvr" only after
        deadline = time.monotonic() + 60
        while not zk_ask(self.port, "srvr").startswith("Zookeeper version:"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                with open(self.logfile) as f:
                    tail = f.read()[-3000:]
                raise RuntimeError("ZooKeeper did not start; end of its log:\n" + tail)
            time.sleep(0.2)
        self.version = zk_ask(self.port, "srvr").splitlines()[0].split(":", 1)[1].strip().split("-")[0]
        log("ZooKeeper %s up (pid %d, 127.0.0.1:%d, %s)" % (self.version, self.proc.pid, self.port, self.dir))

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        log("ZooKeeper (pid %d) stopped" % self.proc.pid)


# --- clients ----------------------------------------------------------------

def open_lock(system, target, name, idx):
    """open_lock: (acquire, release, close) for one client of one system."""
    if system == "dlock":
        import psycopg2
        conn = psycopg2.connect(target)
        conn.autocommit = True
        cur = conn.cursor()

        def acquire():
            cur.execute("SELECT dlock_acquire(%s)", (name,))
            if cur.fetchone()[0] is None:
                raise RuntimeError("dlock_acquire(%r) returned no token" % name)

        def release():
            cur.execute("SELECT dlock_release(%s)", (name,))
            if cur.fetchone()[0] is not True:
                raise RuntimeError("dlock_release(%r) did not release" % name)
        return acquire, release, conn.close
    from kazoo.client import KazooClient
    zk = KazooClient(hosts=target, timeout=30)
    zk.start(timeout=30)
    lock = zk.Lock("/" + name, identifier="client-%d" % idx)

    def release():
        if lock.release() is not True:
            raise RuntimeError("kazoo Lock %r did not release" % name)

    def close():
        zk.stop()
        zk.close()
    return lock.acquire, release, close


def client_main(system, target, name, idx, hold_ms, seconds, window, go, results):
    """client_main: one client process: connect, one warm-up pair, report
    ready, then loop until the window closes."""
    die_with_parent(signal.SIGKILL)
    try:
        acquire, release, close = open_lock(system, target, name, idx)
        acquire()
        release()
        results.put(("ready", idx))
        if not go.wait(300):
            raise RuntimeError("no start signal from the driver")
        start = window[0]
        end = start + seconds
        hold = hold_ms / 1000.0
        while time.monotonic() < start:
            time.sleep(0.0005)
        count = 0
        pairs = 1  # every pair this client made, the warm-up one included
        waits = []
        while True:
            t0 = time.monotonic()
            acquire()
            t1 = time.monotonic()
            if hold > 0:
                time.sleep(hold)
            release()
            pairs += 1
            if t1 < end:
                count += 1
                waits.append((t1 - t0) * 1000.0)
            if time.monotonic() >= end:
                break
        close()
        results.put(("done", idx, count, waits, pairs))
    except BaseException:
        results.put(("error", idx, traceback.format_exc()))


def run_cell(system, target, names, hold_ms, seconds):
    """run_cell: len(names) client processes, client i on names[i]; returns
    (ops_per_s, jain, p50, p99, max) as bench_stats.h computes them, and
    every pair made (warm-up and overtime included)."""
    ctx = mp.get_context("fork")
    n = len(names)
    results = ctx.Queue()
    go = ctx.Event()
    window = ctx.Array("d", 1, lock=False)
    procs = [ctx.Process(target=client_main, daemon=True,
                         args=(system, target, names[i], i, hold_ms, seconds, window, go, results))
             for i in range(n)]
    try:
        for p in procs:
            p.start()
        ready, done = 0, {}
        deadline = time.monotonic() + 120 + seconds
        while len(done) < n:
            try:
                msg = results.get(timeout=1)
            except queue.Empty:
                dead = [p for p in procs if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError("%s client exited with code %d without a report" % (system, dead[0].exitcode))
                if time.monotonic() > deadline:
                    raise RuntimeError("%s cell did not finish in time (%d of %d ready, %d done)"
                                       % (system, ready, n, len(done)))
                continue
            if msg[0] == "error":
                raise RuntimeError("%s client %d failed:\n%s" % (system, msg[1], msg[2]))
            if msg[0] == "ready":
                ready += 1
                if ready == n:
                    # every client connected and warm: one common window
                    window[0] = time.monotonic() + 0.1
                    go.set()
            else:
                done[msg[1]] = msg[2:]
        for p in procs:
            p.join(10)
    finally:
        for p in procs:
            if p.is_alive():
                p.terminate()
                p.join(5)
    counts = [done[i][0] for i in range(n)]
    waits = sorted(w for i in range(n) for w in done[i][1])
    total = sum(counts)
    sumsq = sum(c * c for c in counts)
    jain = total * total / (n * sumsq) if sumsq else 0.0
    nw = len(waits)
    pick = (lambda k: waits[k]) if nw else (lambda k: 0.0)
    return ((total / seconds, jain, pick(nw // 2), pick(int(nw * 0.99)), pick(nw - 1)),
            sum(done[i][2] for i in range(n)))


# --- the workload -----------------------------------------------------------

def ratio(a, b):
    return "%.2f" % (a / b) if b > 0 else "-"


def wait_cell(r):
    return "%.2f / %.2f / %.2f" % (r[2], r[3], r[4])


def main():
    ap = argparse.ArgumentParser(description="dlock vs ZooKeeper's lock recipe, one Python driver")
    ap.add_argument("--quick", action="store_true", help="fewer points (defaults below shrink)")
    ap.add_argument("--seconds", type=float, default=None, help="cell length (8; quick: 3)")
    ap.add_argument("--pg", default="", help="libpq conninfo (default: the PG* variables)")
    ap.add_argument("--workdir", default=None,
                    help="where ZooKeeper's directory is made and removed (default: a new temp dir)")
    ap.add_argument("--zk-port", type=int, default=int(os.environ.get("BENCH_ZK_PORT", "2191")))
    ap.add_argument("--clients", default=None, help='uncontended client counts ("1 8 32"; quick: "1 32")')
    ap.add_argument("--waiters", default=None, help='contended client counts ("2 8 32"; quick: "2 32")')
    ap.add_argument("--holds", default=None, help='hold times in ms ("0 1"; quick: "0")')
    a = ap.parse_args()
    seconds = a.seconds if a.seconds is not None else (3 if a.quick else 8)
    clients = [int(x) for x in (a.clients or ("1 32" if a.quick else "1 8 32")).split()]
    waiters = [int(x) for x in (a.waiters or ("2 32" if a.quick else "2 8 32")).split()]
    holds = [float(x) for x in (a.holds or ("0" if a.quick else "0 1")).split()]
    if seconds <= 0 or min(clients + waiters) < 1 or min(holds) < 0:
        ap.error("cells need seconds > 0, at least one client and holds >= 0")

    # SIGTERM/SIGHUP unwind through the finally below like Ctrl-C does
    def on_signal(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)

    if a.workdir:
        workdir = os.path.join(a.workdir, "zookeeper")
        os.makedirs(workdir)
    else:
        workdir = tempfile.mkdtemp(prefix="dlock-coord.")
    zk = ZooKeeper(workdir, a.zk_port)
    try:
        zk.start()
        target = {"dlock": a.pg, "zookeeper": "127.0.0.1:%d" % a.zk_port}
        # leases left by earlier workloads (run.sh's scale cells) stay held
        # through these cells: say how many
        import psycopg2
        with psycopg2.connect(a.pg) as conn, conn.cursor() as cur:
            cur.execute("SELECT count(*) FROM dlock.held")
            others = cur.fetchone()[0]
        conn.close()
        # the JVM's JIT and PostgreSQL's caches warm up before anything counts
        for system in ("dlock", "zookeeper"):
            run_cell(system, target[system], ["coord-warm-%d" % i for i in range(8)], 0, min(seconds, 2))

        own = {}
        check = None
        for c in clients:
            for system in ("dlock", "zookeeper"):
                log("uncontended %s c=%d" % (system, c))
                zxid = zk_zxid(a.zk_port)
                own[c, system], pairs = run_cell(system, target[system],
                                                 ["coord-own-%d-%d" % (c, i) for i in range(c)], 0, seconds)
                if system == "zookeeper" and check is None:
                    # the server's own count of writes against the driver's
                    check = (c, pairs, zk_zxid(a.zk_port) - zxid)
        one = {}
        for hold in holds:
            for n in waiters:
                for system in ("dlock", "zookeeper"):
                    log("contended %s N=%d hold %g ms" % (system, n, hold))
                    one[hold, n, system], _ = run_cell(system, target[system], ["coord-one"] * n, hold, seconds)
        version = zk.version
    finally:
        zk.stop()
        shutil.rmtree(workdir, ignore_errors=True)

    if a.workdir:
        # for run.sh's plot: hand-offs/s by waiters, one file per hold
        for hold in holds:
            with open(os.path.join(a.workdir, "plot-zk-%g.dat" % hold), "w") as f:
                for n in waiters:
                    f.write("%d %.1f %.1f\n" % (n, one[hold, n, "dlock"][0], one[hold, n, "zookeeper"][0]))

    out = []
    out.append("## 6. Coordination services: dlock vs ZooKeeper (same Python driver)")
    out.append("")
    out.append("One Python driver for both, one process per client, cells of %g s: dlock through psycopg2"
               % seconds)
    out.append("(`SELECT dlock_acquire(name)` / `SELECT dlock_release(name)`, autocommit) on the PostgreSQL")
    out.append("server, fsync on; ZooKeeper %s standalone (Debian's package, forceSync=yes, its own data dir"
               % version)
    out.append("on this machine's disk, 127.0.0.1) through kazoo's `Lock` recipe: sequential ephemeral nodes,")
    out.append("FIFO, three round trips per pair. Wait = the acquire call, monotonic clock.")
    if others:
        out.append("dlock's table held %d other leases throughout (run.sh's scale workload leaves them)."
                   % others)
    out.append("")
    out.append("### Uncontended pairs (acquire + release, own name per client), pairs/s")
    out.append("")
    out.append("| clients | dlock | acquire p50 / p99 / max ms | ZooKeeper | acquire p50 / p99 / max ms "
               "| dlock / ZooKeeper (goal ≥ 5) |")
    out.append("|---|---|---|---|---|---|")
    for c in clients:
        d, z = own[c, "dlock"], own[c, "zookeeper"]
        out.append("| %d | %.0f | %s | %.0f | %s | %s |"
                   % (c, d[0], wait_cell(d), z[0], wait_cell(z), ratio(d[0], z[0])))
    out.append("")
    c, pairs, writes = check
    expected = 2 * pairs + 3 * c
    out.append("Check: at c=%d the driver made %d ZooKeeper pairs (warm-up and overtime included); the"
               % (c, pairs))
    out.append("server's zxid rose by %d (expected %d: a create and a delete per pair; a session open, a"
               % (writes, expected))
    out.append("session close and the lock's parent node per client)%s."
               % ("" if writes == expected else " — MISMATCH"))
    out.append("")
    out.append("### Contended hand-offs: one name, N clients looping acquire → hold → release")
    out.append("")
    out.append("| hold | N | dlock hand-offs/s | Jain | wait p50 / p99 / max ms | ZooKeeper hand-offs/s "
               "| Jain | wait p50 / p99 / max ms | dlock / ZooKeeper (goal ≥ 3) |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for hold in holds:
        for n in waiters:
            d, z = one[hold, n, "dlock"], one[hold, n, "zookeeper"]
            out.append("| %g ms | %d | %.0f | %.4f | %s | %.0f | %.4f | %s | %s |"
                       % (hold, n, d[0], d[1], wait_cell(d), z[0], z[1], wait_cell(z), ratio(d[0], z[0])))
    out.append("")
    if any(h > 0 for h in holds):
        out.append("With a hold, the holder's sleep (time.sleep, a little over the hold) is part of every")
        out.append("hand-off for both systems: it caps hand-offs/s below 1000 / hold and pulls the ratio")
        out.append("towards 1.")
        out.append("")
    print("\n".join(out).rstrip("\n"), flush=True)


if __name__ == "__main__":
    main()
