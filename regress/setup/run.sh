#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# regress/setup/run.sh — dlock when it is not set up right: not preloaded,
# the worker unable to start, the extension created in the wrong database.
# Each case must fail at once with its documented SQLSTATE, never hang.
# Runs its own throwaway cluster (as the postgres user) and stops it on exit.
set -u
BIN=${PGBIN:-$("${PG_CONFIG:-pg_config}" --bindir)}
PORT=${SETUP_PORT:-5497}
DIR=$(mktemp -d /tmp/dlock-setup.XXXXXX)
chmod 755 "$DIR"; chown postgres "$DIR"
passed=0; failed=0

pg() { (cd / && runuser -u postgres -- "$@"); }  # from /: no "could not change directory"
stop() { pg "$BIN/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null 2>&1; }
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cleanup() {
    stop
    [ -n "${CLONE:-}" ] && "$CLONE/scripts/pg_cluster.sh" stop "$CLONE/pg" >/dev/null 2>&1
    rm -rf "$DIR"
}
trap cleanup EXIT

start() {  # start with extra postgresql.conf lines in $1
    cp "$DIR/base.conf" "$DIR/data/postgresql.conf"
    printf '%s\n' "$1" >> "$DIR/data/postgresql.conf"
    pg "$BIN/pg_ctl" -D "$DIR/data" -l "$DIR/log" -w -t 30 start >/dev/null
}

# The SQLSTATE and message of one statement, or "ok".
outcome() {
    timeout 20 psql -X -At -h "$DIR" -p "$PORT" -U postgres -d "${2:-postgres}" <<SQL 2>&1 | sed -n 's/.*NOTICE:  //p'
DO \$\$ BEGIN EXECUTE \$q\$$1\$q\$; RAISE NOTICE 'ok';
EXCEPTION WHEN OTHERS THEN RAISE NOTICE '%: %', SQLSTATE, SQLERRM; END \$\$;
SQL
}

expect() {  # name, statement, expected outcome prefix [, database]
    local got; got=$(outcome "$2" "${4:-postgres}")
    if [[ "$got" == "$3"* ]]; then
        echo "ok   $1"; passed=$((passed + 1))
    else
        echo "FAIL $1: expected '$3', got '$got'"; failed=$((failed + 1))
    fi
}

pg "$BIN/initdb" -D "$DIR/data" --no-sync -A trust -U postgres >/dev/null
cp "$DIR/data/postgresql.conf" "$DIR/base.conf"
cat >> "$DIR/base.conf" <<CONF
port = $PORT
listen_addresses = ''
unix_socket_directories = '$DIR'
fsync = off
CONF

# 1. not in shared_preload_libraries: the extension installs, calls fail
start ""
expect "create extension without preload" "CREATE EXTENSION dlock" "ok"
expect "acquire without preload" "SELECT dlock_acquire('x')" \
    "55000: dlock must be loaded via shared_preload_libraries"
expect "try_acquire without preload" "SELECT dlock_try_acquire('x')" "55000: dlock must be loaded"
expect "release without preload" "SELECT dlock_release('x')" "55000: dlock must be loaded"
# the load check comes before every argument check: a too-long name once
# read the missing shared memory (signal 11, every backend restarted)
expect "long name without preload" "SELECT dlock_acquire(repeat('x', 2000))" "55000: dlock must be loaded"
expect "long name to try_acquire without preload" "SELECT dlock_try_acquire(repeat('x', 9000))" "55000: dlock must be loaded"
expect "acquire_all without preload" "SELECT dlock_acquire_all(ARRAY[repeat('x', 2000)])" "55000: dlock must be loaded"
expect "convert without preload" "SELECT dlock_convert(repeat('x', 2000), 'PR')" "55000: dlock must be loaded"
expect "renew without preload" "SELECT dlock_renew(repeat('x', 2000))" "55000: dlock must be loaded"
expect "release_all without preload" "SELECT dlock_release_all()" "55000: dlock must be loaded"
expect "bad input is caught after the load check" "SELECT dlock_acquire('')" "55000: dlock must be loaded"
expect "force_release without preload" "SELECT dlock_force_release(repeat('x', 2000), reason => 'r')" "55000: dlock must be loaded"
expect "force_release_all without preload" "SELECT dlock_force_release_all('k', 'r')" "55000: dlock must be loaded"
expect "the statistics without preload" "SELECT * FROM dlock.stats" "55000: dlock must be loaded"
expect "a statistics reset without preload" "SELECT dlock_stats_reset()" "55000: dlock must be loaded"
check_log_clean() {
    if grep -q "terminated by signal" "$DIR/log"; then
        echo "FAIL no crash in the server log"; failed=$((failed + 1))
    else
        echo "ok   no crash in the server log"; passed=$((passed + 1))
    fi
}
check_log_clean
stop

# 2. preloaded, but the worker's database does not exist: it cannot run
start "shared_preload_libraries = 'dlock'
dlock.database = 'no_such_db'"
expect "acquire with no worker" "SELECT dlock_acquire('x')" \
    "55000: dlock lock manager is not running"
expect "release_all with no worker" "SELECT dlock_release_all()" \
    "55000: dlock lock manager is not running"
stop

# 3. the extension belongs in dlock.database only
start "shared_preload_libraries = 'dlock'
dlock.database = 'postgres'"
pg psql -X -q -h "$DIR" -p "$PORT" -U postgres -c "CREATE DATABASE other" >/dev/null
expect "create extension in another database" "CREATE EXTENSION dlock" \
    "55000: dlock must be created in database \"postgres\"" other
expect "works where it belongs" "SELECT dlock_acquire('x') > 0" "ok"
# a backend that read a role's grants forgets them when DROP EXTENSION
# drops dlock.grants (no commit of the grants' trigger tells it)
got=$(pg psql -X -q -h "$DIR" -p "$PORT" -U postgres -d postgres 2>&1 <<'SQL' | sed -n 's/.*NOTICE:  //p'
CREATE ROLE setup_app IN ROLE dlock_user;
SELECT dlock_grant('/mine', 'setup_app');
SET ROLE setup_app;
DO $$ BEGIN PERFORM dlock_try_acquire('/elsewhere');
EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'before: %', SQLSTATE; END $$;
RESET ROLE;
DROP EXTENSION dlock;
CREATE EXTENSION dlock;
SET ROLE setup_app;
DO $$ BEGIN
    FOR i IN 1..100 LOOP
        BEGIN
            PERFORM dlock_try_acquire('/elsewhere');
            RAISE NOTICE 'after: ok'; RETURN;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE <> '55000' THEN RAISE NOTICE 'after: %', SQLSTATE; RETURN; END IF;
            PERFORM pg_sleep(0.1);  -- the lock manager loads the new tables
        END;
    END LOOP;
    RAISE NOTICE 'after: the lock manager did not come back';
END $$;
SELECT dlock_release_all();
RESET ROLE;
DROP ROLE setup_app;
SQL
)
if [ "$(echo $got)" == "before: 42501 after: ok" ]; then
    echo "ok   grants forgotten with the extension dropped and created again"; passed=$((passed + 1))
else
    echo "FAIL grants forgotten with the extension dropped and created again: $(echo $got)"
    failed=$((failed + 1))
fi
# the worker's transactions run as dlock_worker: a dlock_worker someone
# made able to log in is refused, not reused
got=$(pg psql -X -q -h "$DIR" -p "$PORT" -U postgres -d postgres -v VERBOSITY=default 2>&1 <<'SQL' | sed -n 's/.*ERROR:  //p'
DROP EXTENSION dlock;
ALTER ROLE dlock_worker LOGIN;
CREATE EXTENSION dlock;
ALTER ROLE dlock_worker NOLOGIN;
CREATE EXTENSION dlock;
SELECT rolname FROM pg_roles WHERE rolname = 'dlock_worker' AND (rolcanlogin OR rolsuper);
SQL
)
if [ "$(echo $got)" == "role dlock_worker exists and can log in or is a superuser" ] &&
   [ "$(pg psql -X -Atq -h "$DIR" -p "$PORT" -U postgres -d postgres -c "SELECT count(*) FROM pg_extension WHERE extname = 'dlock'")" == 1 ]; then
    echo "ok   a dlock_worker that can log in is refused, a NOLOGIN one reused"; passed=$((passed + 1))
else
    echo "FAIL a dlock_worker that can log in is refused, a NOLOGIN one reused: $(echo $got)"
    failed=$((failed + 1))
fi
stop

# 3b. dlock.logged = off: the worker makes the lock tables unlogged and
# loads them in the same transaction (once it read them with the snapshot
# from before the rewrite, found no ticket counter and never started); the
# ticket counter stays logged, so a crash loses the locks but not the
# tokens' order (once an unlogged counter came back empty: no worker ever
# again); the tables are logged again when the setting goes back
logged_case() {  # name, setting, expected relpersistence (held, queue, ticket_counter)
    start "shared_preload_libraries = 'dlock'
dlock.database = 'postgres'
$2"
    local got
    got=$(timeout 30 psql -X -At -h "$DIR" -p "$PORT" -U postgres -d postgres 2>&1 <<'SQL' | sed -n 's/.*NOTICE:  //p'
DO $$ DECLARE t bigint; BEGIN
    FOR i IN 1..100 LOOP
        BEGIN
            t := dlock_acquire('lg');
            PERFORM dlock_release('lg');
            RAISE NOTICE 'ok %', t; RETURN;
        EXCEPTION WHEN OTHERS THEN
            IF SQLSTATE <> '55000' THEN RAISE NOTICE '%', SQLERRM; RETURN; END IF;
            PERFORM pg_sleep(0.1);
        END;
    END LOOP;
    RAISE NOTICE 'the lock manager did not start';
END $$;
SQL
)
    token=$(echo "$got" | sed -n 's/^ok //p')
    got="$(echo "$got" | sed 's/^ok .*/ok/') $(psql -X -At -h "$DIR" -p "$PORT" -U postgres -d postgres -c \
        "SELECT string_agg(relpersistence::text, '' ORDER BY relname) FROM pg_class
          WHERE relnamespace = 'dlock'::regnamespace AND relname IN ('held', 'queue', 'ticket_counter')")"
    if [ "$(echo $got)" == "ok $3" ]; then
        echo "ok   $1"; passed=$((passed + 1))
    else
        echo "FAIL $1: $(echo $got)"; failed=$((failed + 1))
    fi
    stop  # an immediate stop: a crash, which empties unlogged tables
}
token=
logged_case "dlock.logged = off: lock tables unlogged, the counter logged, the lock manager runs" "dlock.logged = off" uup
before_crash=$token
logged_case "after a crash, dlock.logged back on: the lock manager runs, tables logged again" "" ppp
if [ -n "$before_crash" ] && [ -n "$token" ] && [ "$token" -gt "$before_crash" ]; then
    echo "ok   unlogged lock tables, a crash: the next token is larger ($before_crash, then $token)"; passed=$((passed + 1))
else
    echo "FAIL unlogged lock tables, a crash: tokens $before_crash, then $token"; failed=$((failed + 1))
fi

# 4. a clone in a folder whose path has a hyphen and a space (once the
# MariaDB suite cut such a path at the '-'): its build and its scripts work
CLONE="$DIR/my-clone dir/p"
mkdir -p "$CLONE"
if git -C "$ROOT" rev-parse --git-dir >/dev/null 2>&1; then
    git -C "$ROOT" ls-files -z | (cd "$ROOT" && xargs -0 cp --parents -t "$CLONE")
else
    cp -a "$ROOT/." "$CLONE"
fi
if make -s -C "$CLONE/pg_ext" >/dev/null 2>&1; then
    echo "ok   pg_ext builds from a path with '-' and ' '"; passed=$((passed + 1))
else
    echo "FAIL pg_ext builds from a path with '-' and ' '"; failed=$((failed + 1))
fi
CPORT=$((PORT + 1))
if "$CLONE/scripts/pg_cluster.sh" start "$CLONE/pg" "$CPORT" 2> "$DIR/clone.err"; then
    out=$(PGHOST="$CLONE/pg" PGPORT=$CPORT PGUSER=postgres PGDATABASE=postgres \
          /usr/bin/python3 "$CLONE/regress/scenarios/run.py" fifo 2>&1 | tail -1)
    if [ "$out" == "scenarios: 1 passed, 0 failed" ] && ! grep -q . "$DIR/clone.err"; then
        echo "ok   a cluster and a scenario from that path, quietly"; passed=$((passed + 1))
    else
        echo "FAIL a cluster and a scenario from that path: $out $(head -3 "$DIR/clone.err")"
        failed=$((failed + 1))
    fi
else
    echo "FAIL a cluster from that path: $(head -3 "$DIR/clone.err")"; failed=$((failed + 1))
fi
"$CLONE/scripts/pg_cluster.sh" stop "$CLONE/pg" "$CPORT"

echo "setup: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
