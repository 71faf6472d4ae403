#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/demo.sh start|stop — `make run` / `make stop`: a throwaway
# PostgreSQL with dlock on a private socket and port, and a short show.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIR=${DLOCK_RUN_DIR:-/tmp/dlock-run}
PORT=${DLOCK_RUN_PORT:-5499}

if [ "${1:-start}" == "stop" ]; then
    "$ROOT/scripts/pg_cluster.sh" stop "$DIR"
    rm -rf "$DIR"
    echo "stopped and removed $DIR"
    exit 0
fi

# a throwaway: one left from an earlier `make run` is replaced
if "$ROOT/scripts/pg_cluster.sh" status "$DIR" >/dev/null 2>&1 || [ -d "$DIR" ]; then
    "$ROOT/scripts/pg_cluster.sh" stop "$DIR"; rm -rf "$DIR"
fi
"$ROOT/scripts/deps.sh"
make -s -C "$ROOT/pg_ext" >/dev/null
make -s -C "$ROOT/pg_ext" install >/dev/null
PG_EXTRA_CONF="dlock.reap_interval = '100ms'" "$ROOT/scripts/pg_cluster.sh" start "$DIR" "$PORT"
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
Try:  SELECT dlock_acquire('x');  SELECT * FROM dlock.locks;
Stop: make stop
EOT
