#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/check.sh — `make check`: install what is missing, build, run every
# suite on throwaway servers, stop them, and end with one line
# "N passed, M failed".  Exits non-zero on any failure.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PORT=${CHECK_PORT:-5495}
DIR=$(mktemp -d /tmp/dlock-check.XXXXXX)
chmod 755 "$DIR"  # the postgres user must reach the cluster inside
RESULTS=$DIR/results
: > "$RESULTS"

cleanup() {
    "$ROOT/scripts/pg_cluster.sh" stop "$DIR/pg" 2>/dev/null
    [ -f "$DIR/ha/ha.env" ] && "$ROOT/scripts/ha.sh" stop "$DIR/ha" >/dev/null 2>&1
    rm -rf "$DIR"
}
trap cleanup EXIT

# record <suite> <passed> <failed>
record() { echo "$1 $2 $3" >> "$RESULTS"; }
# parse "<suite>: N passed, M failed" from a log; a suite that printed no
# such line did not run to its end and counts as one failure
record_from() {  # suite, log, exit code
    local line
    line=$(grep -E "^$1: [0-9]+ passed, [0-9]+ failed" "$2" | tail -1)
    if [ -n "$line" ]; then
        record "$1" "$(echo "$line" | sed -E 's/.*: ([0-9]+) passed.*/\1/')" \
            "$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')"
        [ "$3" -ne 0 ] && ! echo "$line" | grep -qE ', [1-9][0-9]* failed' &&
            record "$1-exit" 0 1
    else
        record "$1" 0 1
    fi
}
START=$SECONDS
section() { printf '\n=== %s (at %d s)\n' "$1" $((SECONDS - START)); }
# run_pair NAME1 CMD1 NAME2 CMD2: two suites side by side (their own ports),
# logs shown and counted one after the other
run_pair() {
    "$2" > "$DIR/$1.log" 2>&1 & local p1=$!
    "$4" > "$DIR/$3.log" 2>&1 & local p2=$!
    wait $p1; local rc1=$?
    wait $p2; local rc2=$?
    cat "$DIR/$1.log"; record_from "$1" "$DIR/$1.log" $rc1
    cat "$DIR/$3.log"; record_from "$3" "$DIR/$3.log" $rc2
}

section "dependencies"
"$ROOT/scripts/deps.sh" || { echo "0 passed, 1 failed"; exit 1; }

section "documentation: every link and #anchor of README.md and docs/ resolves (no server)"
/usr/bin/python3 scripts/check_links.py > "$DIR/links.log" 2>&1; rc=$?
cat "$DIR/links.log"; record_from links "$DIR/links.log" $rc

section "build and install the PostgreSQL extension"
make -s -C pg_ext >/dev/null && make -s -C pg_ext install >/dev/null ||
    { echo "build failed"; echo "0 passed, 1 failed"; exit 1; }
echo "installed into $("${PG_CONFIG:-pg_config}" --pkglibdir)"

if [ -f core/Makefile ]; then
    section "core unit tests"
    make -s -C core check > "$DIR/core.log" 2>&1; rc=$?
    cat "$DIR/core.log"; record_from core "$DIR/core.log" 0
    # the lock manager's unit tests, its API fuzzer, the reference model
    record_from lm "$DIR/core.log" 0
    record_from service "$DIR/core.log" 0
    record_from fuzz-lm "$DIR/core.log" 0
    record_from model "$DIR/core.log" $rc
fi

section "PostgreSQL cluster"
"$ROOT/scripts/pg_cluster.sh" start "$DIR/pg" "$PORT" || { echo "0 passed, 1 failed"; exit 1; }
export PGHOST=$DIR/pg PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
echo "running on $PGHOST port $PGPORT"

section "pg_regress"
# scripts/pg_regress.sh: the run and its count, for every PostgreSQL version
# (also used by `make matrix`)
"$ROOT/scripts/pg_regress.sh" "$DIR/regress" > "$DIR/regress.log" 2>&1; rc=$?
cat "$DIR/regress.log"; record_from pg_regress "$DIR/regress.log" $rc

section "multi-session scenarios"
/usr/bin/python3 regress/scenarios/run.py > "$DIR/scen.log" 2>&1; rc=$?
cat "$DIR/scen.log"; record_from scenarios "$DIR/scen.log" $rc

"$ROOT/scripts/pg_cluster.sh" stop "$DIR/pg"
unset PGHOST PGPORT PGUSER PGDATABASE

section "restart and crash"
regress/restart/run.sh > "$DIR/restart.log" 2>&1; rc=$?
cat "$DIR/restart.log"; record_from restart "$DIR/restart.log" $rc

section "fuzzer and torture (quick): random bad input; 64 clients and 4 client processes with kills, crashes, restarts and a failover, fencing-checked"
regress/torture/run.sh --quick --no-patroni > "$DIR/torture.log" 2>&1; rc=$?
cat "$DIR/torture.log"; record_from fuzz "$DIR/torture.log" 0; record_from torture "$DIR/torture.log" 0
# one exit code for three summaries: count it only when none of them
# already counts a failure
grep -qE '^(fuzz|torture|torture-ha): [0-9]+ passed, [1-9][0-9]* failed' "$DIR/torture.log" && rc=0
record_from torture-ha "$DIR/torture.log" $rc

section "make run / make stop: the demo on its socket and 127.0.0.1; another's directory, server or port refused and left untouched"
scripts/test_demo.sh > "$DIR/demo.log" 2>&1; rc=$?
cat "$DIR/demo.log"; record_from demo "$DIR/demo.log" $rc

section "set-up errors"
regress/setup/run.sh > "$DIR/setup.log" 2>&1; rc=$?
cat "$DIR/setup.log"; record_from setup "$DIR/setup.log" $rc

section "upgrade: ALTER EXTENSION dlock UPDATE from the previous version while sessions hold, wait and lead; the result equals a fresh install"
/usr/bin/python3 regress/upgrade/run.py > "$DIR/upgrade.log" 2>&1; rc=$?
cat "$DIR/upgrade.log"; record_from upgrade "$DIR/upgrade.log" $rc

section "high availability: a Patroni cluster (etcd, strict synchronous mode) in network namespaces, a failover, a client cut off, an isolated primary; beside pgbouncer: 24 pooled clients with keep_place through a transaction-mode pool of 2, FIFO and exclusion checked, blocking waits pinning the pool as the control (~1.5 min)"
# its packages first: two apt-get runs at once would fight over dpkg's lock
scripts/deps.sh patroni etcd-server python3-etcd nftables >/dev/null ||
    { echo "HA packages failed"; record ha-deps 0 1; }
ha_quick() { /usr/bin/python3 regress/ha/quick.py "$DIR/ha"; }
run_pair ha ha_quick pgbouncer regress/pgbouncer/run.sh

section "monitoring: dlock.stats through a real prometheus-postgres-exporter on loopback"
{ scripts/deps.sh prometheus-postgres-exporter >/dev/null &&
  /usr/bin/python3 regress/exporter/run.py; } > "$DIR/exporter.log" 2>&1; rc=$?
cat "$DIR/exporter.log"; record_from exporter "$DIR/exporter.log" $rc

if [ -x regress/mysql/run.sh ]; then
    section "MySQL/MariaDB plugin"
    regress/mysql/run.sh > "$DIR/mysql.log" 2>&1; rc=$?
    cat "$DIR/mysql.log"; record_from mysql "$DIR/mysql.log" $rc
    section "MySQL/MariaDB upgrade: install.sql over the previous release while connections hold, wait and lead; the result equals a fresh install"
    /usr/bin/python3 regress/upgrade/mysql_upgrade.py > "$DIR/mysql-upgrade.log" 2>&1; rc=$?
    cat "$DIR/mysql-upgrade.log"; record_from mysql-upgrade "$DIR/mysql-upgrade.log" $rc
    section "MySQL/MariaDB torture (quick): 32 client processes with kills, KILL QUERY/KILL, restart and crash, fencing-checked"
    /usr/bin/python3 regress/torture/mysql_torture.py --quick > "$DIR/mysql-torture.log" 2>&1; rc=$?
    cat "$DIR/mysql-torture.log"; record_from mysql-torture "$DIR/mysql-torture.log" $rc
    section "MySQL/MariaDB high availability: a semi-synchronous pair in network namespaces (the replica refuses, an isolated primary grants nothing, failovers keep leases and tokens, a replica not in step is not promoted, a client and the primary cut off; Galera refused) beside its torture run (quick: 24 client processes over TCP, failovers, the replica killed, stopped and cut off, clients cut off)"
    my_torture_ha() { /usr/bin/python3 regress/torture/mysql_torture.py --quick --ha --netns --port 3404; }
    run_pair mysql-ha regress/mysql-ha/run.py mysql-torture-ha my_torture_ha
fi

section "client libraries: their drivers and toolchains (Debian packages)"
# installed here, once: the suites below run two at a time, and two
# apt-get runs at once would fight over dpkg's lock
scripts/deps.sh python3-psycopg-pool python3-mysqldb python3-pymysql \
    mariadb-server mariadb-client libmariadb-dev \
    golang-go golang-github-jackc-pgx-v4-dev golang-github-lib-pq-dev golang-github-go-sql-driver-mysql-dev \
    default-jdk-headless libpostgresql-jdbc-java libmariadb-java junit5 ||
    { echo "client packages failed"; record clients-deps 0 1; }
make -s -C mysql_udf all >/dev/null || { echo "the MariaDB plugin did not build"; record clients-deps 0 1; }

section "client libraries: Python (psycopg 3, psycopg2, MySQLdb, PyMySQL; sync and asyncio; through pgbouncer) beside the dlock command (C: run/ls/release/leader, 100 concurrent runs never two at once, lease loss stops the command)"
run_pair clients-python clients/python/test.sh clients-cli clients/cli/test.sh

section "client libraries: Go (pgx, lib/pq, go-sql-driver/mysql) beside Java (pgjdbc, MariaDB Connector/J, JUnit 5), both through pgbouncer"
run_pair clients-go clients/go/test.sh clients-java clients/java/test.sh

section "packages: make deb, dpkg -i, a fresh cluster and a fresh MariaDB from them, dpkg --purge (the tree's build installed again after)"
regress/packages/run.sh > "$DIR/packages.log" 2>&1; rc=$?
cat "$DIR/packages.log"; record_from packages "$DIR/packages.log" $rc

section "summary"
printf '%-14s %8s %8s\n' suite passed failed
while read -r suite p f; do printf '%-14s %8d %8d\n' "$suite" "$p" "$f"; done < "$RESULTS"
total_p=$(awk '{s += $2} END {print s + 0}' "$RESULTS")
total_f=$(awk '{s += $3} END {print s + 0}' "$RESULTS")
echo "$total_p passed, $total_f failed"
[ "$total_f" -eq 0 ]
