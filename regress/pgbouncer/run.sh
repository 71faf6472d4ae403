#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# regress/pgbouncer/run.sh — dlock through a real pgbouncer in transaction
# mode with 2 server connections (Debian's /usr/sbin/pgbouncer).
#
#   24 clients, each taking one name 3 times with keep_place and short
#   timeouts: all 72 grants made, mutually exclusive, in FIFO order, tickets
#   kept across a request's calls, no call waiting longer than its share,
#   the pool never over 2 server connections, nothing left behind.
#   A negative control: two plain blocking waits pin both server
#   connections, so the holder's release cannot get one until a wait times
#   out; with keep_place and short waits the release gets through.
#   (bouncer.py does the clients and the checks; read its docstring.)
#
# Needs `make install` done first (as the other suites) and the Debian
# packages pgbouncer and python3-psycopg (scripts/deps.sh installs them).
# Runs its own throwaway cluster (scripts/pg_cluster.sh, as the postgres
# user) on PGBOUNCER_PG_PORT (5566) and its own pgbouncer, as the postgres
# user too, on a unix socket only, port PGBOUNCER_PORT (6566); stops both on
# exit, also on failure.  Arguments are passed to bouncer.py (e.g.
# --timeout-ms 100, --clients, --rounds).
# Prints "ok   ..." / "FAIL ..." per check and last
# "pgbouncer: N passed, M failed"; exits non-zero on any failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PORT=${PGBOUNCER_PG_PORT:-5566}
BPORT=${PGBOUNCER_PORT:-6566}
PGBOUNCER=${PGBOUNCER:-/usr/sbin/pgbouncer}
DIR=$(mktemp -d /tmp/dlock-pgbouncer.XXXXXX)
chmod 755 "$DIR"; chown postgres: "$DIR"  # the postgres user must reach inside
BDIR=$DIR/bouncer
LOG=$DIR/checks.log
: > "$LOG"
BPID=

as_pg() { (cd / && runuser -u postgres -- "$@"); }  # from /: no "could not change directory"

# the pgbouncer this script started (pgbouncer.sh stops only its own)
stop_bouncer() { "$ROOT/scripts/pgbouncer.sh" stop "$BDIR"; }
PYPID=; TEEPID=
cleanup() {
    [ -n "$PYPID" ] && kill -TERM "$PYPID" 2>/dev/null && wait "$PYPID" 2>/dev/null
    [ -n "$TEEPID" ] && wait "$TEEPID" 2>/dev/null
    stop_bouncer
    "$ROOT/scripts/pg_cluster.sh" stop "$DIR/pg" >/dev/null 2>&1
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # through the EXIT trap

# ok/FAIL lines go to the screen and to $LOG, which the summary counts
ok()   { echo "ok   $1" | tee -a "$LOG"; }
fail() { echo "FAIL $1" | tee -a "$LOG"; }
summary() {
    local p f
    p=$(grep -c '^ok   ' "$LOG"); f=$(grep -c '^FAIL ' "$LOG")
    echo "pgbouncer: $p passed, $f failed"
    [ "$f" -eq 0 ]
}
die() { fail "$1"; summary; exit 1; }

[ -x "$PGBOUNCER" ] || die "pgbouncer not found at $PGBOUNCER (scripts/deps.sh installs Debian's)"
/usr/bin/python3 -c 'import psycopg' 2>/dev/null ||
    die "python3-psycopg (psycopg 3) missing (scripts/deps.sh installs it)"

# 1. the cluster, and the clients' role
"$ROOT/scripts/pg_cluster.sh" start "$DIR/pg" "$PORT" ||
    die "throwaway cluster with dlock started on port $PORT"
psql -X -q -v ON_ERROR_STOP=1 -h "$DIR/pg" -p "$PORT" -U postgres -d postgres \
    -c "CREATE ROLE bouncer_app LOGIN" -c "GRANT dlock_user TO bouncer_app" >/dev/null ||
    die "role bouncer_app created"

# 2. pgbouncer: unix socket only, transaction pooling, 2 server connections
if BPID=$(PGBOUNCER=$PGBOUNCER PGBOUNCER_USERS=bouncer_app \
          "$ROOT/scripts/pgbouncer.sh" start "$BDIR" "$BPORT" "$DIR/pg" "$PORT" 2); then
    ok "pgbouncer $("$PGBOUNCER" --version | head -1 | sed 's/^PgBouncer //') started (pid $BPID, socket $BDIR, port $BPORT, transaction pooling, 2 server connections)"
else
    die "pgbouncer started and listens on $BDIR/.s.PGSQL.$BPORT"
fi

# 3. the clients and the checks
# in the background, so that a signal to this script runs the traps at once
# (bash runs them only after a foreground command ends) and they end it
mkfifo "$DIR/out"
tee -a "$LOG" < "$DIR/out" & TEEPID=$!
/usr/bin/python3 "$HERE/bouncer.py" --pg-host "$DIR/pg" --pg-port "$PORT" \
    --bouncer-host "$BDIR" --bouncer-port "$BPORT" "$@" > "$DIR/out" 2>&1 & PYPID=$!
wait "$PYPID"; rc=$?; PYPID=
wait "$TEEPID"; TEEPID=
[ "$rc" -ne 0 ] && ! grep -q '^FAIL ' "$LOG" && fail "bouncer.py ended with exit code $rc"

# 4. pgbouncer itself: still running, nothing unexpected in its log
if kill -0 "$BPID" 2>/dev/null; then ok "pgbouncer still running after the clients"
else fail "pgbouncer still running after the clients"; fi
# pgbouncer logs trouble with servers or clients as WARNING or ERROR (logins,
# new server connections and clients closing are LOG lines)
bad=$(grep -E ' (WARNING|ERROR|FATAL) ' "$BDIR/pgbouncer.log" 2>/dev/null | head -5)
if [ -z "$bad" ]; then ok "no warnings or errors in pgbouncer's log"
else fail "no warnings or errors in pgbouncer's log:"; echo "$bad"; fi
if grep -q '^FAIL ' "$LOG"; then
    echo "--- end of pgbouncer's log"; grep -v ' LOG stats: ' "$BDIR/pgbouncer.log" | tail -15
fi
stop_bouncer
if kill -0 "$BPID" 2>/dev/null; then fail "pgbouncer stopped by its pid"
else ok "pgbouncer stopped by its pid"; BPID=; fi

summary
