#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/pgbouncer.sh — a throwaway pgbouncer (Debian's) in transaction
# mode in front of a throwaway cluster (scripts/pg_cluster.sh), for tests.
#
#   pgbouncer.sh start DIR PORT PG_DIR PG_PORT [POOL_SIZE]
#       runs as the postgres user on a unix socket in DIR (port PORT; also
#       on TCP at $PGBOUNCER_LISTEN_ADDR if set, e.g. 127.0.0.1), database postgres, auth trust for the users "postgres"
#       and $PGBOUNCER_USERS (space-separated), POOL_SIZE server
#       connections (default 2); prints its pid
#   pgbouncer.sh stop DIR
#       SIGTERM (immediate shutdown), then SIGKILL, only if the pid in
#       DIR/pgbouncer.pid is still a pgbouncer of DIR's configuration
#
# Log DIR/pgbouncer.log.  Clients: host=DIR port=PORT dbname=postgres.
set -eu
PGBOUNCER=${PGBOUNCER:-/usr/sbin/pgbouncer}
cmd=${1:?usage: pgbouncer.sh start|stop DIR ...}
DIR=${2:?DIR}
case "$DIR" in /*) ;; *) DIR=$PWD/$DIR ;; esac

as_pg() { (cd / && runuser -u postgres -- "$@"); }  # from /: no "could not change directory"

case "$cmd" in
start)
    PORT=${3:?PORT}; PG_DIR=${4:?PG_DIR}; PG_PORT=${5:?PG_PORT}; POOL=${6:-2}
    [ -x "$PGBOUNCER" ] || { echo "pgbouncer.sh: $PGBOUNCER not found (scripts/deps.sh installs Debian's)" >&2; exit 1; }
    mkdir -p "$DIR"; chmod 755 "$DIR"; chown postgres: "$DIR"
    # trust: no password, but the user must be in auth_file
    for u in postgres ${PGBOUNCER_USERS:-}; do printf '"%s" ""\n' "$u"; done > "$DIR/userlist.txt"
    cat > "$DIR/pgbouncer.ini" <<CONF
[databases]
postgres = host=$PG_DIR port=$PG_PORT dbname=postgres

[pgbouncer]
listen_addr = ${PGBOUNCER_LISTEN_ADDR:-}
listen_port = $PORT
unix_socket_dir = $DIR
auth_type = trust
auth_file = $DIR/userlist.txt
admin_users = postgres
pool_mode = transaction
default_pool_size = $POOL
min_pool_size = 0
reserve_pool_size = 0
max_client_conn = 500
ignore_startup_parameters = extra_float_digits
logfile = $DIR/pgbouncer.log
pidfile = $DIR/pgbouncer.pid
CONF
    chown postgres: "$DIR"/*
    as_pg "$PGBOUNCER" -d -q "$DIR/pgbouncer.ini" ||
        { tail -20 "$DIR/pgbouncer.log" >&2 2>/dev/null; echo "pgbouncer.sh: pgbouncer did not start" >&2; exit 1; }
    for _ in $(seq 100); do
        [ -S "$DIR/.s.PGSQL.$PORT" ] && [ -s "$DIR/pgbouncer.pid" ] && break
        sleep 0.1
    done
    pid=$(cat "$DIR/pgbouncer.pid" 2>/dev/null || true)
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && [ -S "$DIR/.s.PGSQL.$PORT" ]; then
        echo "$pid"
    else
        tail -20 "$DIR/pgbouncer.log" >&2 2>/dev/null
        echo "pgbouncer.sh: pgbouncer does not listen on $DIR/.s.PGSQL.$PORT" >&2
        exit 1
    fi
    ;;
stop)
    pid=$(cat "$DIR/pgbouncer.pid" 2>/dev/null || true)
    [[ "$pid" =~ ^[0-9]+$ ]] || exit 0
    tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF -- "$DIR/pgbouncer.ini" || exit 0
    kill -TERM "$pid" 2>/dev/null || true  # immediate shutdown (pgbouncer < 1.23)
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    sleep 0.2
    ;;
*)
    echo "usage: pgbouncer.sh start|stop DIR ..." >&2; exit 2 ;;
esac
