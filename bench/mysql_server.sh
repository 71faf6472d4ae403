#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# bench/mysql_server.sh — a throwaway MariaDB with the dlock plugin, for the
# benchmark (bench/run.sh) and the torture run (regress/torture/mysql_torture.py).
#
#   mysql_server.sh start DIR PORT   install-db and dlock (if needed), start
#   mysql_server.sh stop DIR         clean shutdown (SIGTERM), then SIGKILL
#   mysql_server.sh kill DIR         SIGKILL of mariadbd (a crash)
#   mysql_server.sh status DIR       "running (pid N)" / "stopped" (exit 3)
#
# Datadir DIR/data, socket DIR/sock, pid file DIR/mariadbd.pid, log
# DIR/server.log, the plugin's store credentials DIR/dlock.cnf; TCP only on
# 127.0.0.1:PORT.  DIR/plugin is the server's
# plugin_dir and holds a copy of mysql_udf/dlock_udf.so (build it first), so
# the system plugin_dir is not touched.  Durable settings always:
# innodb_flush_log_at_trx_commit = 1, doublewrite on.  Extra mariadbd options
# come from $MY_EXTRA_OPTS; $MY_NETNS names a network namespace (ip netns) to
# start mariadbd in.  Clients: mariadb -S DIR/sock -u root.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cmd=${1:?usage: mysql_server.sh start|stop|kill|status DIR [PORT]}
DIR=${2:?DIR}

pid_of() { cat "$DIR/mariadbd.pid" 2>/dev/null || true; }
alive() { local p; p=$(pid_of); [ -n "$p" ] && kill -0 "$p" 2>/dev/null; }
# only signal a pid that really is this server (a stale pid file may name another)
ours() { local p; p=$(pid_of); [ -n "$p" ] && tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q -- "--datadir=$DIR/data"; }

case "$cmd" in
start)
    PORT=${3:?PORT}
    mkdir -p "$DIR/plugin"; chmod 755 "$DIR"
    install -m 0644 "$ROOT/mysql_udf/dlock_udf.so" "$DIR/plugin/dlock_udf.so"
    chown mysql: "$DIR"
    if [ ! -d "$DIR/data/mysql" ]; then
        # one at a time, each with a temporary directory of its own: two
        # bootstraps at once failed now and then ("Could not remove temporary
        # table /tmp/#sql-temptable-...") - the suites run in pairs
        mkdir -p "$DIR/tmp"; chown mysql: "$DIR/tmp"
        flock /tmp/dlock-mariadb-install.lock \
        mariadb-install-db --no-defaults --user=mysql --datadir="$DIR/data" --tmpdir="$DIR/tmp" \
            --auth-root-authentication-method=socket --skip-test-db > "$DIR/install.log" 2>&1 ||
            { echo "mysql_server.sh: mariadb-install-db failed:" >&2; tail -20 "$DIR/install.log" >&2; exit 1; }
    fi
    # shellcheck disable=SC2086
    # the plugin's store credentials (scripts/mysql_install.sh writes them)
    netns=()
    [ -n "${MY_NETNS:-}" ] && netns=(ip netns exec "$MY_NETNS")
    DLOCK_CNF="$DIR/dlock.cnf" setsid ${netns[@]+"${netns[@]}"} mariadbd --no-defaults --user=mysql --datadir="$DIR/data" \
        --socket="$DIR/sock" --port="$PORT" --bind-address=127.0.0.1 \
        --pid-file="$DIR/mariadbd.pid" --log-error="$DIR/server.log" \
        --plugin-dir="$DIR/plugin" --event-scheduler=ON \
        --innodb-flush-log-at-trx-commit=1 --innodb-doublewrite=1 \
        --innodb-buffer-pool-size=256M --innodb-log-file-size=256M \
        --max-connections=1000 --skip-name-resolve \
        ${MY_EXTRA_OPTS:-} < /dev/null > /dev/null 2>&1 &
    for _ in $(seq 300); do
        mariadb-admin -S "$DIR/sock" -u root ping > /dev/null 2>&1 && break
        sleep 0.1
    done
    mariadb-admin -S "$DIR/sock" -u root ping > /dev/null 2>&1 ||
        { echo "mysql_server.sh: the server did not start; end of $DIR/server.log:" >&2
          tail -20 "$DIR/server.log" >&2; exit 1; }
    # dlock is installed once, at the first start (a restart keeps it, as a
    # real server's restart does)
    if [ "$(mariadb -S "$DIR/sock" -u root -NBe "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'dlock'")" = 0 ]; then
        DLOCK_CNF="$DIR/dlock.cnf" "$ROOT/scripts/mysql_install.sh" -S "$DIR/sock" -u root > /dev/null
    fi
    ;;
stop)
    alive && ours || exit 0
    pid=$(pid_of)
    kill "$pid"
    for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    ;;
kill)
    alive && ours || exit 0
    pid=$(pid_of)
    kill -9 "$pid"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || exit 0; sleep 0.05; done
    ;;
status)
    if alive; then echo "running (pid $(pid_of), socket $DIR/sock)"; else echo "stopped"; exit 3; fi
    ;;
*)
    echo "unknown command $cmd" >&2; exit 2 ;;
esac
