#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/demo.sh start|stop — `make run` / `make stop`: a throwaway
# PostgreSQL with dlock in DLOCK_RUN_DIR (default /tmp/dlock-run) on
# DLOCK_RUN_PORT (default 5499), on a unix socket there and on 127.0.0.1,
# and a short show.
#
# It only ever stops or removes what it made: the directory it creates
# holds a marker file (.dlock-make-run) naming it and its port; a directory
# without one, or a port something else listens on, is refused and left
# as it is.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${DLOCK_RUN_DIR:-/tmp/dlock-run}
case "$DIR" in /*) ;; *) DIR=$PWD/$DIR ;; esac
DIR=${DIR%/}
PORT=${DLOCK_RUN_PORT:-5499}
MARKER=$DIR/.dlock-make-run
CHOOSE="choose another with DLOCK_RUN_DIR=/some/new/dir and DLOCK_RUN_PORT=N (e.g. \`DLOCK_RUN_DIR=/tmp/dlock-run2 DLOCK_RUN_PORT=5498 make run\`)"

[ -n "$DIR" ] || { echo "make run: DLOCK_RUN_DIR must not be /" >&2; exit 2; }
case "$PORT" in ''|*[!0-9]*) echo "make run: DLOCK_RUN_PORT must be a port number, not '$PORT'" >&2; exit 2 ;; esac

# ours DIR: the directory was made by this script for DIR (its marker names it)
ours() { [ -f "$MARKER" ] && grep -qxF "dir=$DIR" "$MARKER"; }

# describe DIR: what a directory not made by `make run` holds, for the refusal
describe() {
    local what
    if "$ROOT/scripts/pg_cluster.sh" status "$DIR" >/dev/null 2>&1; then
        what="a running PostgreSQL server ($("$ROOT/scripts/pg_cluster.sh" status "$DIR"))"
    elif [ -e "$DIR/data/PG_VERSION" ] || [ -e "$DIR/PG_VERSION" ]; then
        what="a PostgreSQL data directory"
    else
        what="files: $(ls -A "$DIR" 2>/dev/null | head -5 | paste -sd' ' -)"
        [ "$(ls -A "$DIR" 2>/dev/null | wc -l)" -gt 5 ] && what="$what …"
        [ -z "$(ls -A "$DIR" 2>/dev/null)" ] && what="nothing (empty)"
    fi
    echo "$what"
}

# port_users: who listens on PORT over TCP (any address) or on a unix
# socket .s.PGSQL.PORT; empty when free
port_users() {
    ss -Hltnp "( sport = :$PORT )" 2>/dev/null
    ss -Hlxp 2>/dev/null | grep -F "/.s.PGSQL.$PORT " || true
}

if [ "${1:-start}" == "stop" ]; then
    if [ ! -e "$DIR" ]; then
        echo "nothing to stop: $DIR does not exist"
        exit 0
    fi
    if ! ours; then
        echo "make stop: $DIR was not made by \`make run\` (no $MARKER naming it): it holds $(describe)." >&2
        echo "Left as it is.  Stop it with whatever started it; for a \`make run\` elsewhere, set DLOCK_RUN_DIR to its directory." >&2
        exit 1
    fi
    "$ROOT/scripts/pg_cluster.sh" stop "$DIR"
    rm -rf "$DIR"
    echo "stopped and removed $DIR"
    exit 0
fi

# one left from an earlier `make run` in DIR is replaced; anything else is
# somebody else's
if [ -e "$DIR" ]; then
    if ! ours; then
        echo "make run: $DIR exists and was not made by \`make run\` (no $MARKER naming it): it holds $(describe)." >&2
        echo "Left as it is; $CHOOSE." >&2
        exit 1
    fi
    "$ROOT/scripts/pg_cluster.sh" stop "$DIR"; rm -rf "$DIR"
fi
users=$(port_users)
if [ -n "$users" ]; then
    echo "make run: port $PORT is in use by something \`make run\` did not start here:" >&2
    printf '    %s\n' "$users" >&2
    echo "Left as it is; $CHOOSE." >&2
    exit 1
fi
mkdir -p "$DIR"
printf 'made by dlock make run (scripts/demo.sh) at %s\ndir=%s\nport=%s\n' \
    "$(date -u +%FT%TZ)" "$DIR" "$PORT" > "$MARKER"
"$ROOT/scripts/deps.sh"
make -s -C "$ROOT/pg_ext" >/dev/null
make -s -C "$ROOT/pg_ext" install >/dev/null
# 127.0.0.1 too, for clients that speak only TCP (JDBC); trust, as on the socket
PG_EXTRA_CONF="dlock.reap_interval = '100ms'
listen_addresses = '127.0.0.1'" "$ROOT/scripts/pg_cluster.sh" start "$DIR" "$PORT"
export PGHOST=$DIR PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
say() { printf '\n-- %s\n' "$*"; }
sql() { printf '%s> %s\n' "$1" "$2"; psql -X -P footer=off -c "$2" | sed 's/^/     /'; }

say "Alice, Bob and Carol ask for orders/42, in that order; each holds it 0.5 s"
for who in alice bob carol; do
    psql -X -At -c "SELECT '$who got it, fencing token ' || dlock_acquire('orders/42')" \
         -c "SELECT pg_sleep(0.5)" -c "SELECT dlock_release('orders/42')" > "$DIR/$who.out" &
    sleep 0.15
done
sql anyone "SELECT name, granted, position, pid FROM dlock.locks ORDER BY granted DESC, position"
say "They get it in FIFO order, with increasing tokens:"
wait
for who in alice bob carol; do sed -n '1p' "$DIR/$who.out" | sed 's/^/     /'; done

say "A lease: owner-keyed, 1 second, nobody renews it"
sql worker "SELECT dlock_acquire('report/daily', ttl => '1 s', owner => 'job-7') IS NOT NULL AS held"
sql anyone "SELECT name, owner, expires_at - now() < '1 s' AS expires_soon FROM dlock.locks"
sleep 1.3
sql anyone "SELECT count(*) AS locks_left FROM dlock.locks"
say "Its holder learns it lost the lease when it tries to renew:"
sql worker "SELECT dlock_renew('report/daily', owner => 'job-7')" 2>&1 || true

cat <<EOT

dlock is running.  Connect with:
    psql -h $DIR -p $PORT -U postgres postgres
    psql -h 127.0.0.1 -p $PORT -U postgres postgres
    jdbc:postgresql://127.0.0.1:$PORT/postgres?user=postgres
Try:  SELECT dlock_acquire('x');  SELECT * FROM dlock.locks;
Stop: make stop${DLOCK_RUN_DIR:+ DLOCK_RUN_DIR=$DIR}
EOT
