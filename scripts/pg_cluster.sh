#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/pg_cluster.sh — a throwaway PostgreSQL cluster with dlock, run with
# the binaries of $PGBIN, else of $PG_CONFIG's --bindir, else of pg_config's
# (PostgreSQL 15 to 18: `make matrix` runs it in Debian 13 and sid too).
#
#   pg_cluster.sh start DIR PORT   initdb (if needed) and start; CREATE EXTENSION
#   pg_cluster.sh stop DIR [PORT]  stop it (fast, then immediate, then SIGKILL
#                                  of the postmaster's pid)
#   pg_cluster.sh status DIR [PORT] "running (pid N, port P)" and exit 0, or
#                                  "stopped" and exit 3
#   pg_cluster.sh restart DIR MODE pg_ctl restart -m MODE
#   pg_cluster.sh standby DIR PORT PRIMARY_DIR PRIMARY_PORT
#                                  a streaming standby of that running
#                                  cluster (pg_basebackup -R into DIR/data,
#                                  which must not exist yet), started
#   pg_cluster.sh promote DIR      pg_ctl promote -w: the standby becomes a primary
#
# The cluster runs as the postgres user (PostgreSQL refuses root), datadir
# DIR/data, listens only on a unix socket in DIR (made mode 755 and owned by
# postgres, so DIR's parents must be traversable: /tmp/dlock-… is), on the
# private PORT.  Extra postgresql.conf lines come from $PG_EXTRA_CONF (they
# come last, so they override the defaults here); PG_FSYNC=on keeps fsync
# and initdb's sync (default off: fine for functional tests, never for
# benchmarks or crash tests).  $DLOCK_EXT_VERSION creates that version of
# the extension (default: dlock.control's).  $PG_SERVER_ENV adds NAME=VALUE words to the
# server's environment only (e.g. LD_PRELOAD of a sanitizer runtime); the
# client programs run without it.
set -eu
BIN=${PGBIN:-$("${PG_CONFIG:-pg_config}" --bindir)}
cmd=${1:?usage: pg_cluster.sh start|stop|status|restart|standby|promote DIR [PORT|MODE]}
DIR=${2:?DIR}
case "$DIR" in /*) ;; *) DIR=$PWD/$DIR ;; esac  # absolute: the programs run from /

# from /: a cwd the postgres user cannot enter makes them print
# "could not change directory ... Permission denied"
as_pg() { (cd / && runuser -u postgres -- "$@"); }
# pg_ctl for commands that start a server: with $PG_SERVER_ENV
# shellcheck disable=SC2086
pg_ctl_server() { (cd / && runuser -u postgres -- env ${PG_SERVER_ENV:-} "$BIN/pg_ctl" "$@"); }

case "$cmd" in
start)
    PORT=${3:?PORT}
    mkdir -p "$DIR"; chmod 755 "$DIR"; chown postgres: "$DIR"
    if [ ! -f "$DIR/data/PG_VERSION" ]; then
        nosync=--no-sync; [ "${PG_FSYNC:-off}" == "on" ] && nosync=
        as_pg "$BIN/initdb" -D "$DIR/data" $nosync -A trust -U postgres -E UTF8 --locale=C.UTF-8 >/dev/null
        cat >> "$DIR/data/postgresql.conf" <<CONF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$DIR'
shared_preload_libraries = 'dlock'
dlock.database = 'postgres'
dlock.reap_interval = '100ms'
fsync = ${PG_FSYNC:-off}
max_connections = 200
log_line_prefix = '%m [%p] '
${PG_EXTRA_CONF:-}
CONF
    fi
    pg_ctl_server -D "$DIR/data" -l "$DIR/server.log" -w -t 60 start >/dev/null ||
        { echo "pg_cluster.sh: the server did not start; end of $DIR/server.log:" >&2
          tail -20 "$DIR/server.log" >&2; exit 1; }
    psql -X -q -h "$DIR" -p "$PORT" -U postgres -d postgres \
        -c "SET client_min_messages = warning" \
        -c "CREATE EXTENSION IF NOT EXISTS dlock${DLOCK_EXT_VERSION:+ VERSION '$DLOCK_EXT_VERSION'}" >/dev/null
    ;;
stop)
    [ -f "$DIR/data/postmaster.pid" ] || exit 0
    pid=$(head -1 "$DIR/data/postmaster.pid")
    as_pg "$BIN/pg_ctl" -D "$DIR/data" -m fast -t 30 stop >/dev/null 2>&1 ||
        as_pg "$BIN/pg_ctl" -D "$DIR/data" -m immediate -t 10 stop >/dev/null 2>&1 ||
        { # last resort: SIGKILL, but only if that pid is still this
          # cluster's postmaster (a stale pid file may name another process)
          if tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -q -- "-D $DIR/data"; then
              kill -9 "$pid"; sleep 0.5
          fi; } || true
    ;;
status)
    pid=$(head -1 "$DIR/data/postmaster.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        echo "running (pid $pid, port $(sed -n 4p "$DIR/data/postmaster.pid"), socket $DIR)"
    else
        echo "stopped"; exit 3
    fi
    ;;
restart)
    pg_ctl_server -D "$DIR/data" -l "$DIR/server.log" -m "${3:-fast}" -w -t 60 restart >/dev/null
    ;;
standby)
    PORT=${3:?PORT}; PDIR=${4:?PRIMARY_DIR}; PPORT=${5:?PRIMARY_PORT}
    case "$PDIR" in /*) ;; *) PDIR=$PWD/$PDIR ;; esac
    [ -e "$DIR/data" ] && { echo "pg_cluster.sh: $DIR/data exists already" >&2; exit 1; }
    mkdir -p "$DIR"; chmod 755 "$DIR"; chown postgres: "$DIR"
    nosync=--no-sync; [ "${PG_FSYNC:-off}" == "on" ] && nosync=
    as_pg "$BIN/pg_basebackup" -h "$PDIR" -p "$PPORT" -U postgres -D "$DIR/data" \
        -R -X stream -c fast $nosync
    # postgresql.auto.conf is read last: its own socket and port, then the extras
    cat >> "$DIR/data/postgresql.auto.conf" <<CONF
port = $PORT
unix_socket_directories = '$DIR'
${PG_EXTRA_CONF:-}
CONF
    pg_ctl_server -D "$DIR/data" -l "$DIR/server.log" -w -t 60 start >/dev/null ||
        { echo "pg_cluster.sh: the standby did not start; end of $DIR/server.log:" >&2
          tail -20 "$DIR/server.log" >&2; exit 1; }
    ;;
promote)
    as_pg "$BIN/pg_ctl" -D "$DIR/data" -w -t 60 promote >/dev/null
    ;;
*)
    echo "unknown command $cmd" >&2; exit 2 ;;
esac
