#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# clients/testenv.sh — the real servers the client libraries' tests run
# against: a throwaway PostgreSQL 15 cluster with dlock, a pgbouncer in
# transaction mode with 2 server connections in front of it, and a
# throwaway MariaDB with the dlock plugin.
#
#   testenv.sh start DIR PG_PORT BOUNCER_PORT MY_PORT
#       starts the three (DIR/pg, DIR/bouncer, DIR/my) and writes DIR/env,
#       lines NAME=VALUE to source:
#         DLOCK_TEST_PG_HOST, DLOCK_TEST_PG_PORT       the cluster (socket dir)
#         DLOCK_TEST_BOUNCER_HOST, DLOCK_TEST_BOUNCER_PORT   pgbouncer
#         DLOCK_TEST_MY_SOCKET, DLOCK_TEST_MY_PORT       MariaDB's socket, TCP port
#       PostgreSQL user postgres (superuser; also through pgbouncer),
#       database postgres, on the socket and on TCP at 127.0.0.1 (PG_PORT,
#       BOUNCER_PORT: for JDBC, which has no unix sockets); MariaDB user
#       root over the socket, and user dlock_test with password dlock_test
#       (every privilege) over TCP at 127.0.0.1:MY_PORT.
#   testenv.sh stop DIR
#       stops whatever of the three runs, by their pids (also half-started)
#
# Needs `make install` done (the extension) and mysql_udf/dlock_udf.so built.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:?usage: testenv.sh start DIR PG_PORT BOUNCER_PORT MY_PORT | stop DIR}
DIR=${2:?DIR}
case "$DIR" in /*) ;; *) DIR=$PWD/$DIR ;; esac

case "$cmd" in
start)
    PG_PORT=${3:?PG_PORT}; BOUNCER_PORT=${4:?BOUNCER_PORT}; MY_PORT=${5:?MY_PORT}
    mkdir -p "$DIR"; chmod 755 "$DIR"
    PG_EXTRA_CONF="listen_addresses = '127.0.0.1'" "$ROOT/scripts/pg_cluster.sh" start "$DIR/pg" "$PG_PORT"
    PGBOUNCER_LISTEN_ADDR=127.0.0.1 \
        "$ROOT/scripts/pgbouncer.sh" start "$DIR/bouncer" "$BOUNCER_PORT" "$DIR/pg" "$PG_PORT" 2 >/dev/null
    "$ROOT/bench/mysql_server.sh" start "$DIR/my" "$MY_PORT"
    mariadb -S "$DIR/my/sock" -u root -e "CREATE USER IF NOT EXISTS 'dlock_test'@'127.0.0.1' IDENTIFIED BY 'dlock_test'; GRANT ALL PRIVILEGES ON *.* TO 'dlock_test'@'127.0.0.1'"
    cat > "$DIR/env" <<ENV
DLOCK_TEST_PG_HOST=$DIR/pg
DLOCK_TEST_PG_PORT=$PG_PORT
DLOCK_TEST_BOUNCER_HOST=$DIR/bouncer
DLOCK_TEST_BOUNCER_PORT=$BOUNCER_PORT
DLOCK_TEST_MY_SOCKET=$DIR/my/sock
DLOCK_TEST_MY_PORT=$MY_PORT
ENV
    ;;
stop)
    "$ROOT/scripts/pgbouncer.sh" stop "$DIR/bouncer" || true
    "$ROOT/scripts/pg_cluster.sh" stop "$DIR/pg" || true
    "$ROOT/bench/mysql_server.sh" stop "$DIR/my" || true
    ;;
*)
    echo "usage: testenv.sh start DIR PG_PORT BOUNCER_PORT MY_PORT | stop DIR" >&2; exit 2 ;;
esac
