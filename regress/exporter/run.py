#!/usr/bin/python3
# SPDX-License-Identifier: PostgreSQL
"""dlock.stats through a real prometheus-postgres-exporter (Debian's).

Starts a throwaway cluster with dlock (scripts/pg_cluster.sh, port
EXPORTER_PG_PORT, 5588), runs a workload with known counts (an immediate
grant, a wait granted after 0.3 s, a timeout, a refused try), starts the
exporter with contrib/postgres_exporter.yml on 127.0.0.1:EXPORTER_PORT
(9592) as a login role that is only a member of dlock_monitor, scrapes
/metrics and checks every dlock.stats column is there with the view's
value, counters named _total, the histograms cumulative with +Inf equal to
their count.  Stops both by pid, also on failure.  Prints "ok"/"FAIL"
lines and last "exporter: N passed, M failed".
"""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import psycopg2

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "regress"))
from checklib import check, run  # noqa: E402
PG_PORT = int(os.environ.get("EXPORTER_PG_PORT", "5588"))
PORT = int(os.environ.get("EXPORTER_PORT", "9592"))
EXPORTER = "/usr/bin/prometheus-postgres-exporter"




def connect(d, user="postgres"):
    c = psycopg2.connect(host=d, port=PG_PORT, user=user, dbname="postgres")
    c.autocommit = True
    return c


def one(c, sql, args=()):
    with c.cursor() as cur:
        cur.execute(sql, args)
        return cur.fetchone() if cur.description else None


def workload(d):
    a, b = connect(d), connect(d)
    one(a, "SELECT dlock_stats_reset()")
    one(a, "SELECT dlock_acquire('ex/1')")
    done = []
    t = threading.Thread(target=lambda: done.append(one(b, "SELECT dlock_acquire('ex/1')")))
    t.start()
    time.sleep(0.3)
    one(a, "SELECT dlock_release('ex/1')")
    t.join(30)
    one(b, "SELECT dlock_try_acquire('ex/1')")  # re-entrant: granted
    one(a, "SELECT dlock_try_acquire('ex/1')")  # refused
    one(a, "SELECT dlock_acquire('ex/1', timeout => '300 ms')")  # times out
    one(b, "SELECT dlock_release_all()")
    a.close()
    b.close()


def scrape():
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % PORT, timeout=10) as r:
        text = r.read().decode()
    metrics = {}
    for line in text.splitlines():
        if not line.startswith("dlock_"):
            continue
        name_labels, value = line.rsplit(" ", 1)
        name = name_labels.split("{", 1)[0]
        le = None
        if 'le="' in name_labels:
            le = name_labels.split('le="', 1)[1].split('"', 1)[0]
        metrics.setdefault(name, []).append((le, float(value)))
    return metrics


def main():
    d = tempfile.mkdtemp(prefix="dlock-exporter.")
    os.chmod(d, 0o755)
    pg = os.path.join(d, "pg")
    exporter = None
    try:
        r = subprocess.run([os.path.join(ROOT, "scripts", "pg_cluster.sh"), "start", pg, str(PG_PORT)],
                           capture_output=True, text=True)
        check("throwaway cluster with dlock started", r.returncode == 0, r.stderr[-500:])
        if r.returncode != 0:
            return
        admin = connect(pg)
        one(admin, "CREATE ROLE dlock_exporter LOGIN")
        one(admin, "GRANT dlock_monitor TO dlock_exporter")
        workload(pg)
        view = {}
        with admin.cursor() as cur:
            cur.execute("SELECT * FROM dlock.stats")
            row = cur.fetchone()
            view = {desc[0]: v for desc, v in zip(cur.description, row)}
        check("the workload counted: 3 grants (1 after a wait), 2 waits, 1 timeout, 1 refused",
              (view["grants"], view["wait_seconds_count"], view["waits"], view["timeouts"],
               view["refused"]) == (3, 1, 2, 1, 1), str(view))

        env = dict(os.environ, DATA_SOURCE_NAME="host=%s port=%d user=dlock_exporter dbname=postgres "
                   "sslmode=disable" % (pg, PG_PORT))
        log = open(os.path.join(d, "exporter.log"), "w")
        exporter = subprocess.Popen(
            [EXPORTER, "--extend.query-path=" + os.path.join(ROOT, "contrib", "postgres_exporter.yml"),
             "--disable-default-metrics", "--disable-settings-metrics", "--no-collector.database",
             "--no-collector.bgwriter", "--web.listen-address=127.0.0.1:%d" % PORT],
            env=env, stdout=log, stderr=subprocess.STDOUT)
        metrics = {}
        for _ in range(100):
            try:
                metrics = scrape()
                if metrics:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        check("the exporter (as a member of dlock_monitor only) answers on 127.0.0.1:%d with dlock metrics"
              % PORT, bool(metrics), open(os.path.join(d, "exporter.log")).read()[-800:])
        if not metrics:
            return
        hist = ("wait_seconds", "handoff_seconds")
        missing, wrong = [], []
        for col, v in view.items():
            if col == "since" or col.startswith(hist) or col == "mean_batch_size":
                continue
            gauge = col in ("holders", "waiters", "kept_places")
            name = "dlock_" + col + ("" if gauge else "_total")
            if name not in metrics:
                missing.append(name)
            elif abs(metrics[name][0][1] - float(v)) > 1e-9 and col not in ("batches", "commits",
                                                                            "commit_seconds",
                                                                            "requests"):
                wrong.append("%s %s != %s" % (name, metrics[name][0][1], v))
        check("every counter and gauge of dlock.stats exported, with the view's value",
              not missing and not wrong, "missing %s, wrong %s" % (missing, wrong))
        for h in hist:
            buckets = metrics.get("dlock_%s_bucket" % h, [])
            counts = [c for _, c in buckets]
            count = metrics.get("dlock_%s_count" % h, [(None, -1)])[0][1]
            check("%s: a Prometheus histogram (%d buckets, cumulative, +Inf = count = %d)"
                  % (h, len(buckets), view[h + "_count"]),
                  len(buckets) == 11 and counts == sorted(counts) and buckets[-1][0] == "+Inf" and
                  counts[-1] == count == view[h + "_count"] and
                  ("dlock_%s_sum" % h) in metrics, str(buckets))
        waited_le = [le for le, c in metrics["dlock_wait_seconds_bucket"] if c >= 1]
        # 0.3 s or longer (a stalled machine), never in a shorter bucket
        check("the 0.3 s wait falls in a bucket of le >= 0.5", bool(waited_le) and
              float(waited_le[0]) >= 0.5,
              str(metrics["dlock_wait_seconds_bucket"]))
    finally:
        if exporter is not None:
            exporter.send_signal(signal.SIGTERM)
            try:
                exporter.wait(10)
            except subprocess.TimeoutExpired:
                exporter.kill()
            check("the exporter stopped by its pid", exporter.poll() is not None)
        subprocess.run([os.path.join(ROOT, "scripts", "pg_cluster.sh"), "stop", pg],
                       capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    run("exporter", main)
