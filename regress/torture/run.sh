#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# regress/torture/run.sh [--quick] [--ha-only | --no-ha] [--no-patroni] —
# `make torture`: the API fuzzer, then the torture harness in crash mode (one
# cluster: kills, crashes, immediate restarts), then in HA mode (a primary
# with a synchronous standby, remote_apply; kill -9 of the primary and
# promotion of the standby, which is rebuilt for the next failover), then in
# Patroni mode (scripts/ha.sh's three nodes in network namespaces, clients in
# two more: kill -9 of the leader, the leader cut from its peers while
# clients reach it, kill -9 of an etcd member, a quarter of the clients cut
# from the leader).  Throwaway clusters, fsync on, stopped at the end.
#
#   full:  100,000 fuzz calls; crash mode TORTURE_SECONDS (600) with a crash
#          or restart every TORTURE_HEAVY_EVERY (10) s; HA mode
#          TORTURE_HA_SECONDS (300) with TORTURE_FAILOVERS (5) failovers;
#          Patroni mode TORTURE_PATRONI_SECONDS (600) with
#          TORTURE_PATRONI_FAULTS (8) heavy faults, then TORTURE_ISOLATION_SECONDS
#          (300) with TORTURE_ISOLATIONS (4) isolations of the leader only
#          (at least one must end its lock manager while a commit waits for
#          the standby: the window of an answered grant the new leader lacks)
#   quick: 5,000 calls; 40 s crash mode (crash every 5 s); 30 s HA mode with
#          one failover (part of make check, with --no-patroni); Patroni
#          mode 150 s with 2 faults, then 150 s with 2 isolations
# TORTURE_CLIENTS (64) threads and TORTURE_PROCS (4) client processes;
# TORTURE_SEED repeats a fault schedule; TORTURE_PORT, TORTURE_PORT2 (HA
# standby).  Prints "fuzz: …", "torture: …", "torture-ha: …", "torture-patroni: …",
# "torture-isolation: … passed, … failed".
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PORT=${TORTURE_PORT:-5493}
PORT2=${TORTURE_PORT2:-5492}
DIR=$(mktemp -d /tmp/dlock-torture.XXXXXX)
chmod 755 "$DIR"
SECONDS_=${TORTURE_SECONDS:-600}; HEAVY=${TORTURE_HEAVY_EVERY:-10}
HA_SECONDS=${TORTURE_HA_SECONDS:-300}; FAILOVERS=${TORTURE_FAILOVERS:-5}
P_SECONDS=${TORTURE_PATRONI_SECONDS:-600}; P_FAULTS=${TORTURE_PATRONI_FAULTS:-8}
I_SECONDS=${TORTURE_ISOLATION_SECONDS:-300}; ISOLATIONS=${TORTURE_ISOLATIONS:-4}
CLIENTS=${TORTURE_CLIENTS:-64}; PROCS=${TORTURE_PROCS:-4}; CALLS=100000
crash=1; ha=1; patroni=1
for arg in "$@"; do
    case $arg in
    --quick) SECONDS_=40; HEAVY=5; HA_SECONDS=30; FAILOVERS=1; CALLS=5000
             P_SECONDS=150; P_FAULTS=2; I_SECONDS=150; ISOLATIONS=2 ;;
    --ha-only) crash=0 ;;
    --no-ha) ha=0; patroni=0 ;;
    --no-patroni) patroni=0 ;;
    *) echo "usage: run.sh [--quick] [--ha-only | --no-ha] [--no-patroni]" >&2; exit 2 ;;
    esac
done
seed=()
[ -n "${TORTURE_SEED:-}" ] && seed=(--seed "$TORTURE_SEED")

rc=0
cleanup() {
    for d in "$DIR/crash" "$DIR/ha-a" "$DIR/ha-b"; do "$ROOT/scripts/pg_cluster.sh" stop "$d"; done
    [ -f "$DIR/patroni/ha.env" ] && "$ROOT/scripts/ha.sh" stop "$DIR/patroni" >/dev/null 2>&1
    if [ $rc -ne 0 ]; then   # keep the server logs of a failed run
        keep=$(mktemp -d /tmp/dlock-torture-logs.XXXXXX)
        for d in crash ha-a ha-b; do
            [ -f "$DIR/$d/server.log" ] && cp "$DIR/$d/server.log" "$keep/$d.log"
        done
        for n in 1 2 3; do
            for f in postgresql.log patroni.log etcd.log; do
                [ -f "$DIR/patroni/node$n/$f" ] && cp "$DIR/patroni/node$n/$f" "$keep/patroni-n$n-$f"
            done
        done
        echo "server logs kept in $keep"
    fi
    rm -rf "$DIR"
}
trap cleanup EXIT

# a killed client that was waiting is noticed by its backend within 250 ms
export PG_FSYNC=on
CONF="client_connection_check_interval = '250ms'"

if [ $crash -eq 1 ]; then
    PG_EXTRA_CONF=$CONF "$ROOT/scripts/pg_cluster.sh" start "$DIR/crash" "$PORT" ||
        { echo "torture: 0 passed, 1 failed"; rc=1; exit 1; }
    PGHOST=$DIR/crash PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres \
        /usr/bin/python3 "$HERE/fuzz.py" "$CALLS" || rc=1
    /usr/bin/python3 "$HERE/torture.py" --dir "$DIR/crash" --port "$PORT" --seconds "$SECONDS_" \
        --clients "$CLIENTS" --procs "$PROCS" --heavy-every "$HEAVY" "${seed[@]}" || rc=1
    "$ROOT/scripts/pg_cluster.sh" stop "$DIR/crash"
fi

if [ $ha -eq 1 ]; then
    # the standby is built and made synchronous by torture.py
    PG_EXTRA_CONF="$CONF
synchronous_commit = remote_apply" "$ROOT/scripts/pg_cluster.sh" start "$DIR/ha-a" "$PORT" ||
        { echo "torture-ha: 0 passed, 1 failed"; rc=1; exit 1; }
    /usr/bin/python3 "$HERE/torture.py" --ha --dir "$DIR/ha-a" --port "$PORT" \
        --dir2 "$DIR/ha-b" --port2 "$PORT2" --seconds "$HA_SECONDS" --failovers "$FAILOVERS" \
        --clients "$CLIENTS" --procs "$PROCS" "${seed[@]}" || rc=1
fi
if [ $patroni -eq 1 ]; then
    # torture.py starts scripts/ha.sh's cluster in namespaces and stops it
    /usr/bin/python3 "$HERE/torture.py" --patroni "$DIR/patroni" --seconds "$P_SECONDS" \
        --failovers "$P_FAULTS" --clients "$CLIENTS" --procs "$PROCS" "${seed[@]}" || rc=1
    # the leader isolated again and again, until its demotion has ended the
    # lock manager while its commit waited for the standby at least once
    /usr/bin/python3 "$HERE/torture.py" --patroni "$DIR/patroni" --seconds "$I_SECONDS" \
        --isolations "$ISOLATIONS" --clients "$CLIENTS" --procs "$PROCS" "${seed[@]}" || rc=1
fi
exit $rc
