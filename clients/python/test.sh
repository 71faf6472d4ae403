#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# clients/python/test.sh — the Python client's tests (test_dlock.py) on real
# servers: a throwaway PostgreSQL with dlock, pgbouncer in transaction mode
# with 2 server connections, and a throwaway MariaDB with the plugin
# (clients/testenv.sh), on private ports CLIENTS_PY_PORTS ("5580 6580
# 3480": PostgreSQL, pgbouncer, MariaDB); stops them on exit, also on
# failure.  Needs `make install` done.  Last line: "clients-python: N
# passed, M failed"; exits non-zero on any failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
read -r PG_PORT BOUNCER_PORT MY_PORT <<< "${CLIENTS_PY_PORTS:-5580 6580 3480}"
die() { echo "FAIL $1"; echo "clients-python: 0 passed, 1 failed"; exit 1; }

"$ROOT/scripts/deps.sh" python3-psycopg python3-psycopg2 python3-psycopg-pool \
    python3-mysqldb python3-pymysql mariadb-server mariadb-client libmariadb-dev >/dev/null ||
    die "the drivers and servers installed"
make -s -C "$ROOT/mysql_udf" all >/dev/null || die "the MariaDB plugin built"

DIR=$(mktemp -d /tmp/dlock-clients-py.XXXXXX)
chmod 755 "$DIR"
PYPID=
cleanup() {
    [ -n "$PYPID" ] && kill -TERM "$PYPID" 2>/dev/null && wait "$PYPID" 2>/dev/null
    "$ROOT/clients/testenv.sh" stop "$DIR" >/dev/null 2>&1
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # through the EXIT trap

"$ROOT/clients/testenv.sh" start "$DIR" "$PG_PORT" "$BOUNCER_PORT" "$MY_PORT" >"$DIR/start.log" 2>&1 ||
    { cat "$DIR/start.log"; die "servers started (PostgreSQL $PG_PORT, pgbouncer $BOUNCER_PORT, MariaDB $MY_PORT)"; }
set -a; . "$DIR/env"; set +a
# in the background, so that a signal runs the traps at once
/usr/bin/python3 -u "$HERE/test_dlock.py" "$DIR" & PYPID=$!
wait "$PYPID"; rc=$?; PYPID=
exit $rc
