#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""dlock's pooled clients through a real pgbouncer (regress/pgbouncer).

Started by run.sh with a throwaway cluster and a pgbouncer in transaction
mode with 2 server connections; every client connection goes through
pgbouncer as role bouncer_app (autocommit, no server-side prepared
statements: transaction pooling cannot keep them).  The observer, which
reads dlock.locks and pg_stat_activity, connects straight to the cluster as
postgres and never takes a pool connection.

Main check: CLIENTS (24) clients, each with its own owner key, take the
name 'bouncer/one' ROUNDS (3) times.  A take is one request: the call

    SELECT dlock_acquire(name, timeout => 200 ms, ttl => 30 s,
                         owner => key, keep_place => true)

repeated until it returns a token (each call timed); after each NULL the
observer reads the request's ticket (its `token` in dlock.locks while not
granted); the client holds the lock HOLD_MS, then dlock_release(name, key).
A call whose request is behind another one in line returns at once,
keeping its place (core rule 14.8); only the first in line waits its
timeout on a server connection, so the pool stays free for the holder's
release and for the next one's collecting call.  Checks:
  - no client error, and all 72 grants made within 60 s (the goal of issue
    35; before rule 14.8 every call sat on a server connection for its
    whole timeout and 24 x 3 grants at 200 ms took 291-295 s);
  - mutual exclusion: the intervals in which clients certainly held the
    lock (from their acquire's return to the start of their release) do not
    overlap, and tokens strictly increase in that order;
  - a request keeps its ticket across its calls (the point of keep_place);
  - FIFO by tickets: sorted by grant token, the tickets of the requests
    that waited increase;
  - FIFO by time: a request already waiting (its first call had returned
    NULL) before another request's first call was sent is granted first;
  - every call returns within its share: the timeout, plus the wait for a
    pool connection behind the other clients' calls (a client waits at most
    for every other client's call once: CLIENTS / POOL * timeout), plus
    MARGIN for a stalled machine; the largest is printed;
  - pgbouncer never used more than POOL server connections;
  - afterwards nothing of 'bouncer/one' is left in dlock.locks.
Negative control ('bouncer/neg'): a holder and two plain blocking waits
(timeout 3 s, no keep_place) through the same pool: the waits pin both
server connections, the release cannot get one until a wait ends by its
timeout (release > 1 s, a waiter timed out).  The same with keep_place
and short calls (--timeout-ms) ('bouncer/kept'): the release gets through within a call's
share and the two waiters are granted in their order.

Prints "ok   ..." / "FAIL ..." per check (run.sh counts them) and a summary
of what ran; exit code 1 on any failure.
"""
import argparse
import datetime
import os
import sys
import threading
import time
import traceback

import psycopg

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from checklib import TALLY, check  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--pg-host", required=True)
p.add_argument("--pg-port", required=True)
p.add_argument("--bouncer-host", required=True)
p.add_argument("--bouncer-port", required=True)
p.add_argument("--user", default="bouncer_app")
p.add_argument("--clients", type=int, default=24)
p.add_argument("--rounds", type=int, default=3)
p.add_argument("--pool", type=int, default=2, help="pgbouncer's default_pool_size")
p.add_argument("--timeout-ms", type=int, default=200)
p.add_argument("--ttl-s", type=int, default=30)
p.add_argument("--hold-ms", type=int, default=20)
p.add_argument("--deadline-s", type=float, default=None,
               help="for all grants; default 60 s")
p.add_argument("--margin-s", type=float, default=3.0)
p.add_argument("--skip-main", action="store_true")
p.add_argument("--skip-control", action="store_true")
args = p.parse_args()

NAME = "bouncer/one"
TIMEOUT = datetime.timedelta(milliseconds=args.timeout_ms)
TTL = datetime.timedelta(seconds=args.ttl_s)
# a call's share: its own timeout, and the wait for a pool connection while
# each other client's call (at most a timeout long) runs once
SHARE = args.timeout_ms / 1000 * (1 + args.clients / args.pool)
if args.deadline_s is None:
    args.deadline_s = 60.0

ACQ_KEEP = ("SELECT dlock_acquire(%s, timeout => %s, ttl => %s, owner => %s,"
            " keep_place => true)")
ACQ_PLAIN = "SELECT dlock_acquire(%s, timeout => %s, ttl => %s, owner => %s)"
RELEASE = "SELECT dlock_release(%s, %s)"
TICKET = ("SELECT token FROM dlock.locks"
          " WHERE name = %s AND owner = %s AND NOT granted")

def bouncer_conn():
    # prepare_threshold=None: psycopg 3 would prepare a statement after 5
    # runs, and transaction pooling cannot keep prepared statements
    return psycopg.connect(host=args.bouncer_host, port=args.bouncer_port,
                           user=args.user, dbname="postgres", autocommit=True,
                           prepare_threshold=None, connect_timeout=20,
                           application_name="dlock-bouncer-client")


def direct_conn():
    return psycopg.connect(host=args.pg_host, port=args.pg_port, user="postgres",
                           dbname="postgres", autocommit=True, connect_timeout=20,
                           application_name="dlock-bouncer-observer")


def one(conn, sql, params=()):
    return conn.execute(sql, params).fetchone()[0]


def err_text(e):
    s = getattr(getattr(e, "diag", None), "sqlstate", None)
    return f"{type(e).__name__}{' ' + s if s else ''}: {str(e).strip().splitlines()[0]}"


class Observer:
    """A direct connection (not through the pool), shared under a lock."""

    def __init__(self):
        self.conn = direct_conn()
        self.mu = threading.Lock()

    def q(self, sql, params=()):
        with self.mu:
            return self.conn.execute(sql, params).fetchall()


class ServerSampler(threading.Thread):
    """The number of server connections pgbouncer has open to the cluster
    (backends of the clients' role), sampled every 10 ms."""

    def __init__(self):
        super().__init__(daemon=True)
        self.conn = direct_conn()
        self.stop = threading.Event()
        self.max = 0
        self.samples = 0
        self.error = None

    def run(self):
        try:
            while not self.stop.is_set():
                n = one(self.conn, "SELECT count(*) FROM pg_stat_activity WHERE usename = %s",
                        (args.user,))
                self.max = max(self.max, n)
                self.samples += 1
                time.sleep(0.01)
        except Exception as e:  # noqa: BLE001 - reported as a failure
            self.error = err_text(e)


obs = Observer()

# --- pre-flight: the pool answers, as the clients' role ------------------
try:
    c = bouncer_conn()
    who, key = c.execute("SELECT current_user::text, dlock_new_owner()").fetchone()
    check(f"a client connects through pgbouncer as {who} and gets an owner key",
          who == args.user and isinstance(key, str) and len(key) >= 16, f"{who!r}, {key!r}")
    c.close()
except Exception as e:  # noqa: BLE001
    check("a client connects through pgbouncer", False, err_text(e))
    sys.exit(1)


# --- main: 24 clients x 3 takes with keep_place ---------------------------
class Client(threading.Thread):
    def __init__(self, i, start_barrier, deadline):
        super().__init__(daemon=True)
        self.i = i
        self.barrier = start_barrier
        self.deadline = deadline
        self.requests = []   # one dict per take
        self.calls = []      # durations of the acquire calls, seconds
        self.error = None
        self.conn = bouncer_conn()
        self.key = one(self.conn, "SELECT dlock_new_owner()")

    def run(self):
        try:
            self.barrier.wait()
            for rnd in range(args.rounds):
                req = {"client": self.i, "round": rnd, "tickets": [], "calls": 0,
                       "first_t0": None, "first_null_t1": None}
                self.requests.append(req)
                while True:
                    if time.monotonic() > self.deadline:
                        raise TimeoutError(f"deadline passed in round {rnd + 1} "
                                           f"after {req['calls']} calls")
                    t0 = time.monotonic()
                    tok = one(self.conn, ACQ_KEEP, (NAME, TIMEOUT, TTL, self.key))
                    t1 = time.monotonic()
                    self.calls.append(t1 - t0)
                    req["calls"] += 1
                    if req["first_t0"] is None:
                        req["first_t0"] = t0
                    if tok is not None:
                        req["token"], req["held_from"] = tok, t1
                        break
                    if req["first_null_t1"] is None:
                        req["first_null_t1"] = t1
                    # its place: no row when it was granted meanwhile (while
                    # no call waited); the next call collects that grant
                    for (ticket,) in obs.q(TICKET, (NAME, self.key)):
                        req["tickets"].append(ticket)
                time.sleep(args.hold_ms / 1000)
                req["held_to"] = time.monotonic()
                req["released"] = one(self.conn, RELEASE, (NAME, self.key))
                req["released_at"] = time.monotonic()
        except Exception as e:  # noqa: BLE001 - reported as a failure
            self.error = err_text(e) if not isinstance(e, TimeoutError) else str(e)
        finally:
            try:
                self.conn.close()
            except Exception:  # noqa: BLE001
                pass


def main_check():
    total = args.clients * args.rounds
    sampler = ServerSampler()
    barrier = threading.Barrier(args.clients + 1)
    t_start = time.monotonic()
    deadline = t_start + args.deadline_s
    clients = [Client(i, barrier, deadline) for i in range(args.clients)]
    sampler.start()
    for c in clients:
        c.start()
    barrier.wait()
    t_start = time.monotonic()
    for c in clients:
        c.join(max(0.0, deadline + 10 - time.monotonic()))
    elapsed = time.monotonic() - t_start
    sampler.stop.set()
    sampler.join(5)
    hung = [c.i for c in clients if c.is_alive()]

    errors = [(c.i, c.error) for c in clients if c.error]
    distinct = {}
    for i, e in errors:
        distinct.setdefault(e, []).append(i)
    check(f"{args.clients} clients through pgbouncer without errors",
          not errors and not hung,
          "; ".join([f"clients {ids if len(ids) < 5 else f'{ids[:4]} and {len(ids) - 4} more'}"
                     f": {e}" for e, ids in list(distinct.items())[:3]] +
                    ([f"clients {hung} still running after the deadline"] if hung else [])))

    reqs = [r for c in clients for r in list(c.requests)]
    granted = [r for r in reqs if "token" in r]
    done = [r for r in granted if "released_at" in r]
    check(f"all {total} grants made within {args.deadline_s:.0f} s "
          f"({len(granted)} in {elapsed:.1f} s)",
          len(done) == total and not hung,
          f"{len(granted)} granted, {len(done)} released")
    bad_rel = [r for r in done if r["released"] is not True]
    check("every release returned true", not bad_rel and done,
          f"{len(bad_rel)} did not: {bad_rel[:2]}" if bad_rel else "nothing released")

    # mutual exclusion over the intervals certainly held
    held = sorted((r for r in done), key=lambda r: r["held_from"])
    overlaps = [(a, b) for a, b in zip(held, held[1:]) if b["held_from"] < a["held_to"]]
    check(f"mutual exclusion: the {len(held)} hold intervals do not overlap",
          not overlaps and held,
          f"{len(overlaps)} overlaps, first: client {overlaps[0][0]['client']} and "
          f"client {overlaps[0][1]['client']}" if overlaps else "no grants")
    toks = [r["token"] for r in held]
    check("tokens strictly increase in grant order",
          all(a < b for a, b in zip(toks, toks[1:])) and held,
          f"{toks[:10]}...")

    # tickets kept across a request's calls
    waited = [r for r in granted if r["tickets"]]
    changed = [r for r in waited if len(set(r["tickets"])) != 1]
    reads = sum(len(r["tickets"]) for r in waited)
    check(f"a kept request keeps its ticket across its calls "
          f"({len(waited)} requests waited, {reads} ticket reads)",
          waited and not changed,
          (f"client {changed[0]['client']} round {changed[0]['round'] + 1}: "
           f"tickets {sorted(set(changed[0]['tickets']))}") if changed
          else "no request waited: no contention")

    # FIFO by tickets
    by_grant = sorted(waited, key=lambda r: r["token"])
    tk = [r["tickets"][0] for r in by_grant]
    inversions = [(a, b) for a, b in zip(by_grant, by_grant[1:])
                  if not a["tickets"][0] < b["tickets"][0]]
    check(f"FIFO: in grant order the tickets of the {len(by_grant)} requests that "
          "waited increase", waited and not inversions,
          (f"{len(inversions)} inversions, first: ticket {inversions[0][0]['tickets'][0]} "
           f"granted {inversions[0][0]['token']}, ticket {inversions[0][1]['tickets'][0]} "
           f"granted {inversions[0][1]['token']}") if inversions else f"{tk[:5]}")

    # FIFO by time: a request seen waiting before another was sent goes first
    overtaken = []
    for a in granted:
        if a["first_null_t1"] is None:
            continue
        for b in granted:
            if b is not a and b["first_t0"] > a["first_null_t1"] and b["token"] < a["token"]:
                overtaken.append((a, b))
    check("FIFO: no request granted before one already waiting when it was sent",
          granted and not overtaken,
          (f"{len(overtaken)} pairs, first: client {overtaken[0][1]['client']} "
           f"overtook client {overtaken[0][0]['client']}") if overtaken else "no grants")

    calls = [d for c in clients for d in c.calls]
    ncalls = len(calls)
    worst = max(calls) if calls else float("nan")
    limit = SHARE + args.margin_s
    over = [d for d in calls if d > limit]
    check(f"no call waits longer than its share: every call within {SHARE:.1f} s "
          f"+ {args.margin_s:.0f} s (max {worst:.2f} s)",
          calls and not over, f"{len(over)} of {ncalls} calls longer, max {worst:.2f} s")

    check(f"pgbouncer used at most {args.pool} server connections "
          f"(max {sampler.max} seen in {sampler.samples} samples)",
          sampler.error is None and 1 <= sampler.max <= args.pool and sampler.samples > 0,
          sampler.error or f"max {sampler.max}")

    left = obs.q("SELECT granted, owner IS NOT NULL, pid, token, expires_at"
                 " FROM dlock.locks WHERE name = %s", (NAME,))
    check("nothing left of the lock: no holder, no waiter, no kept place",
          not left, f"{len(left)} rows: {left[:3]}")

    # summary of what ran
    per_req = sorted(r["calls"] for r in granted)
    at_once = sum(1 for r in granted if r["first_null_t1"] is None)
    calls_sorted = sorted(calls)
    p50 = calls_sorted[len(calls) // 2] if calls else float("nan")
    p99 = calls_sorted[int(len(calls) * 0.99)] if calls else float("nan")
    print(f"    {args.clients} clients x {args.rounds} takes through a pool of {args.pool}:"
          f" {len(granted)} grants in {elapsed:.1f} s,"
          f" {ncalls} acquire calls ({args.timeout_ms} ms timeout, keep_place),"
          f" call time median {p50:.2f} s,"
          f" p99 {p99:.2f} s, max {worst:.2f} s;"
          f" calls per take median {per_req[len(per_req) // 2] if per_req else 0},"
          f" max {per_req[-1] if per_req else 0}; {at_once} granted at the first call,"
          f" {len(waited)} with a ticket read", flush=True)


def control_check():
    """Two blocking waits pin the pool of 2: the holder's release waits for
    one of them to time out.  Then the same with keep_place and short calls."""
    neg = "bouncer/neg"
    conns = [bouncer_conn() for _ in range(3)]
    keys = [one(conns[0], "SELECT dlock_new_owner()") for _ in range(3)]
    hold, w1, w2 = conns
    res = {}

    def wait_call(conn, key, tag, sql, timeout):
        try:
            t0 = time.monotonic()
            res[tag] = (one(conn, sql, (neg, timeout, TTL, key)), time.monotonic() - t0)
        except Exception as e:  # noqa: BLE001
            res[tag] = (err_text(e), None)

    def waiting(name, calls_only=True):  # waiters with a call waiting (pid set)
        return obs.q("SELECT count(*) FROM dlock.locks WHERE name = %s AND NOT granted"
                     " AND (pid IS NOT NULL OR NOT %s)", (name, calls_only))[0][0]

    def until(cond, secs=10):
        end = time.monotonic() + secs
        while time.monotonic() < end:
            if cond():
                return True
            time.sleep(0.005)
        return False

    # 1. plain blocking waits, 3 s each: the release must wait about that
    # long (more than 1 s is asked: robust against a slow start of the waits)
    try:
        tok = one(hold, ACQ_PLAIN, (neg, TIMEOUT, TTL, keys[0]))
        ths = [threading.Thread(target=wait_call, args=(w, k, t, ACQ_PLAIN,
                                                         datetime.timedelta(seconds=3)))
               for w, k, t in ((w1, keys[1], "w1"), (w2, keys[2], "w2"))]
        for t in ths:
            t.start()
        both = until(lambda: waiting(neg) == 2)
        t0 = time.monotonic()
        rel = one(hold, RELEASE, (neg, keys[0]))
        rel_time = time.monotonic() - t0
        for t in ths:
            t.join(10)
        timed_out = [t for t in ("w1", "w2") if res.get(t, (0,))[0] is None]
        check(f"control: two plain blocking waits pin both server connections, the "
              f"holder's release waits {rel_time:.2f} s for one to time out",
              tok is not None and both and rel is True and rel_time > 1.0 and timed_out,
              f"token {tok}, both waiting {both}, release {rel} after {rel_time:.2f} s, "
              f"waiters {res}")
        for k, t in zip(keys[1:], ("w1", "w2")):
            if isinstance(res.get(t, (None,))[0], int):
                one(hold, RELEASE, (neg, k))
    except Exception as e:  # noqa: BLE001
        check("control: plain blocking waits pin the pool", False, err_text(e))

    # 2. the same with keep_place and short calls (--timeout-ms)
    kept = "bouncer/kept"
    stop = threading.Event()
    order = []

    def keep_loop(conn, key, tag):
        try:
            while not stop.is_set():
                t = one(conn, ACQ_KEEP, (kept, TIMEOUT, TTL, key))
                if t is not None:
                    order.append((tag, t))
                    one(conn, RELEASE, (kept, key))
                    return
        except Exception as e:  # noqa: BLE001
            order.append((tag, err_text(e)))

    try:
        tok = one(hold, ACQ_KEEP, (kept, TIMEOUT, TTL, keys[0]))
        t1 = threading.Thread(target=keep_loop, args=(w1, keys[1], "w1"))
        t1.start()
        first = until(lambda: waiting(kept, False) == 1)  # w1 queued before w2
        t2 = threading.Thread(target=keep_loop, args=(w2, keys[2], "w2"))
        t2.start()
        queued = until(lambda: waiting(kept, False) == 2)
        time.sleep(0.5)  # both keep calling: the pool is busy with their calls
        t0 = time.monotonic()
        rel = one(hold, RELEASE, (kept, keys[0]))
        rel_time = time.monotonic() - t0
        t1.join(20)
        t2.join(20)
        stop.set()
        share = args.timeout_ms / 1000 * (1 + 3 / args.pool)
        check(f"control: with keep_place and {args.timeout_ms} ms calls the release gets "
              f"a server connection in {rel_time:.2f} s and the waiters are granted "
              "in their order",
              tok is not None and first and queued and rel is True
              and rel_time <= share + args.margin_s
              and [t for t, _ in order] == ["w1", "w2"]
              and all(isinstance(t, int) for _, t in order),
              f"token {tok}, queued {first}/{queued}, release {rel} after {rel_time:.2f} s, "
              f"grants {order}")
    except Exception as e:  # noqa: BLE001
        stop.set()
        check("control: keep_place through the pool", False, err_text(e))
    left = obs.q("SELECT name, granted, pid FROM dlock.locks WHERE name IN (%s, %s)",
                 (neg, kept))
    check("control: nothing left behind", not left, f"{left}")
    for c in conns:
        c.close()


try:
    if not args.skip_main:
        main_check()
    if not args.skip_control:
        control_check()
except Exception:  # noqa: BLE001
    traceback.print_exc()
    check("bouncer.py ran to its end", False, "exception above")
sys.exit(1 if TALLY.failed else 0)
