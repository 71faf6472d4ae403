#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# regress/restart/run.sh — what survives a restart and a crash.
#
#   immediate restart: leases keep token and expiry; session locks and queue
#   entries of the dead sessions are gone; new tokens exceed all old ones.
#   SIGKILL of a holding and of a waiting backend (PostgreSQL then restarts
#   every backend): the same, plus the worker restarting with them.
#   SIGKILL of the worker: a crash restart too, nothing acknowledged lost.
#   crash.scen: a SIGKILL crash written as a scenario (regress/scenarios/run.py
#   --dir regress/restart), with its expected transcript in expected/.
#   a lease with nobody waiting disappears about when it runs out.
#   a lease that ran out while the server was down is held again for
#   dlock.restart_grace after the restart, and can be renewed.
#   with dlock.synchronous_commit = off, tokens still never go back after a
#   crash that follows a new block of tickets.
#   races.py: answers racing withdrawals, made deterministic with SIGSTOP.
#   failover.py: with a synchronous standby, no grant is acknowledged that a
#   promoted standby lacks (own clusters on ports PORT+100 and PORT+101).
#   stuck.py: waits end by timeout, cancel and terminate while the worker
#   does not answer (stopped, or its commit waits for a standby that is
#   gone); settings of the database and role do not reach the worker; a
#   failure that persists is retried with growing pauses (PORT+102).
#
# Uses its own cluster (fsync on: crash tests must not cheat) and stops it.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PORT=${RESTART_PORT:-5496}
DIR=$(mktemp -d /tmp/dlock-restart.XXXXXX)
passed=0; failed=0

WALW=  # a WAL writer this script stopped: always continued, also on failure
walw_cont() { [ -n "$WALW" ] && kill -CONT "$WALW" 2>/dev/null; WALW=; }
# stop the WAL writer, so that only a flush before the answer can make the
# WAL flushed (it would otherwise flush asynchronous commits at once); only
# while it waits for work: stopped mid-flush it holds the WAL write lock
# and every commit would hang
walw_stop() {
    local pid
    pid=$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'")
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    for _ in $(seq 500); do
        kill -STOP "$pid" && WALW=$pid
        [ "$(q "SELECT wait_event FROM pg_stat_activity WHERE pid = $pid")" == "WalWriterMain" ] &&
            return 0
        walw_cont; sleep 0.01
    done
    return 1
}
cleanup() { walw_cont; "$ROOT/scripts/pg_cluster.sh" stop "$DIR"; "$ROOT/scripts/pg_cluster.sh" stop "$DIR/stuck"; rm -rf "$DIR"; }
trap cleanup EXIT

q() { timeout 30 psql -X -At -h "$DIR" -p "$PORT" -U postgres -d postgres -c "$1" 2>&1; }
check() {  # name, got, expected
    if [ "$2" == "$3" ]; then echo "ok   $1"; passed=$((passed + 1))
    else echo "FAIL $1: expected '$3', got '$2'"; failed=$((failed + 1)); fi
}
wait_ready() {  # until the worker answers again after a restart
    for _ in $(seq 1 300); do
        [ "$(q "SELECT dlock_try_acquire('probe') > 0" 2>/dev/null)" == "t" ] &&
            { q "SELECT dlock_release('probe')" >/dev/null; return 0; }
        sleep 0.1
    done
    return 1
}
# run SQL in a background session that stays connected; prints its pid file
bg_session() {  # name, sql
    timeout 60 psql -X -At -h "$DIR" -p "$PORT" -U postgres -d postgres \
        -c "SELECT pg_backend_pid()" -c "$2" -c "SELECT pg_sleep(60)" \
        > "$DIR/$1.out" 2>&1 &
}
wait_for() {  # sql that must return t
    for _ in $(seq 1 200); do [ "$(q "$1")" == "t" ] && return 0; sleep 0.05; done
    return 1
}

PG_FSYNC=on "$ROOT/scripts/pg_cluster.sh" start "$DIR" "$PORT" || { echo "restart: 0 passed, 1 failed"; exit 1; }

snapshot="SELECT string_agg(name || '=' || token || '@' || expires_at, ',' ORDER BY name) FROM dlock.locks WHERE owner IS NOT NULL"

maxtok=0  # the largest token or ticket seen so far, over every round
for kind in restart kill-backends kill-worker; do
    q "SELECT dlock_acquire('lease-a', ttl => '1 hour', owner => 'ka')" >/dev/null
    q "SELECT dlock_acquire('lease-b', ttl => '2 hours', owner => 'kb')" >/dev/null
    bg_session holder "SELECT dlock_acquire('sess-$kind')"
    wait_for "SELECT count(*) = 1 FROM dlock.locks WHERE name = 'sess-$kind' AND granted"
    bg_session waiter "SELECT dlock_acquire('sess-$kind')"
    wait_for "SELECT count(*) = 1 FROM dlock.locks WHERE name = 'sess-$kind' AND NOT granted"
    before=$(q "$snapshot")
    maxtok=$(q "SELECT greatest(max(token), $maxtok) FROM dlock.locks")
    case $kind in
    restart) "$ROOT/scripts/pg_cluster.sh" restart "$DIR" immediate ;;
    kill-backends)
        kill -9 "$(head -1 "$DIR/holder.out")" "$(head -1 "$DIR/waiter.out")" ;;
    kill-worker)
        kill -9 "$(q "SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock lock manager'")" ;;
    esac
    sleep 0.5
    wait_ready
    check "$kind: leases kept with token and expiry" "$(q "$snapshot")" "$before"
    check "$kind: session lock and queue entry gone" \
        "$(q "SELECT count(*) FROM dlock.locks WHERE name = 'sess-$kind'")" "0"
    check "$kind: no waiters left" "$(q "SELECT count(*) FROM dlock.queue")" "0"
    newtok=$(q "SELECT dlock_acquire('new-$kind')")
    check "$kind: new token beyond every old one" \
        "$(q "SELECT $newtok > $maxtok")" "t"
    maxtok=$newtok
    q "SELECT dlock_release('new-$kind')" >/dev/null
    wait
done

# the worker's log line says what it reloaded; a crash restart happened
check "crash restarts logged" \
    "$(grep -c 'terminating any other active server processes' "$DIR/server.log")" "2"

# the same kind of crash written as a scenario, through the scenario runner
check "the leases end when released" \
    "$(q "SELECT dlock_release_all('ka') + dlock_release_all('kb')") $(q "SELECT count(*) FROM dlock.locks")" "2 0"
PGHOST=$DIR PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres \
    /usr/bin/python3 "$ROOT/regress/scenarios/run.py" --dir "$HERE" crash > "$DIR/crash.log" 2>&1
sed 's/^/     /' "$DIR/crash.log"
check "crash scenario (kill -9 of a waiter, crash.scen)" "$(tail -1 "$DIR/crash.log")" \
    "scenarios: 1 passed, 0 failed"

# a lease nobody waits for goes away about when it runs out
q "SELECT dlock_acquire('short', ttl => '4 s', owner => 'ks')" >/dev/null
# (margins a stalled machine keeps: held well before its end; gone within
# a few seconds after it, the reaper being due every 100 ms)
check "lease still held before expiry" \
    "$(q "SELECT count(*) FROM dlock.locks WHERE name = 'short' AND expires_at > clock_timestamp() + '1 s'")" "1"
sleep 4
wait_for "SELECT count(*) = 0 FROM dlock.locks WHERE name = 'short'"
check "lease gone after expiry (reap_interval 100ms)" \
    "$(q "SELECT count(*) FROM dlock.locks WHERE name = 'short'")" "0"

# a lease that ran out while the server was down gets dlock.restart_grace
# (default 5 s) after the restart, so its live holder can come back and renew
q "SELECT dlock_acquire('grace', ttl => '1 s', owner => 'kg')" >/dev/null
before=$(q "SELECT token || ' ' || expires_at FROM dlock.locks WHERE name = 'grace'")
(cd / && runuser -u postgres -- "${PGBIN:-$("${PG_CONFIG:-pg_config}" --bindir)}/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null)
sleep 1.5
"$ROOT/scripts/pg_cluster.sh" start "$DIR" "$PORT"
wait_ready
check "lease past its expiry during the downtime: still held, same token, expiry extended by the grace" \
    "$(q "SELECT token = split_part('$before', ' ', 1)::bigint
                 AND expires_at > split_part('$before', ' ', 2)::timestamptz + '1 s'
                 AND expires_at <= now() + '5 s'
            FROM dlock.locks WHERE name = 'grace'")" "t"
check "renewed by its owner after the restart" \
    "$(q "SELECT dlock_renew('grace', '1 min', owner => 'kg') > now() + '59 s'")" "t"
q "SELECT dlock_release('grace', owner => 'kg')" >/dev/null

# dlock.synchronous_commit = off lets grants skip the WAL flush, but never an
# advance of the token counter: cross a reserved block of tickets, crash at
# once, and the next token must still exceed every token handed out
q "ALTER SYSTEM SET dlock.synchronous_commit = off" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
sleep 0.3
# (the last acquire takes ticket 'hi', which reserves the next block; right
# after it, nothing else has written WAL, so all of it must be flushed)
walw_stop || echo "     (WAL writer not found)"
out=$(timeout 30 psql -X -At -h "$DIR" -p "$PORT" -U postgres -d postgres \
    -c "SELECT max(dlock_acquire('async/' || i)) FROM generate_series(1,
            (SELECT hi FROM dlock.ticket_counter) - dlock_acquire('async/0')) i" \
    -c "SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn()")
stopped=$WALW; walw_cont
check "the WAL writer was stopped around the flush check" "${stopped:+yes}" "yes"
last=$(echo "$out" | head -1)
check "dlock.synchronous_commit = off: a new block of tickets is flushed at once" \
    "$(echo "$out" | tail -1)" "t"
(cd / && runuser -u postgres -- "${PGBIN:-$("${PG_CONFIG:-pg_config}" --bindir)}/pg_ctl" -D "$DIR/data" -m immediate stop >/dev/null)
"$ROOT/scripts/pg_cluster.sh" start "$DIR" "$PORT"
wait_ready
check "dlock.synchronous_commit = off, crash right after a new block of tickets: new token beyond every old one" \
    "$(q "SELECT dlock_acquire('async/after') > $last")" "t"
q "ALTER SYSTEM RESET dlock.synchronous_commit" >/dev/null
q "SELECT pg_reload_conf()" >/dev/null
sleep 0.3
# by default an owner-keyed grant is flushed before it is acknowledged
# (WAL writer stopped: an asynchronous commit would stay unflushed)
walw_stop || echo "     (WAL writer not found)"
out=$(timeout 30 psql -X -At -h "$DIR" -p "$PORT" -U postgres -d postgres \
        -c "SELECT dlock_acquire('flushed', ttl => '1 min', owner => 'kf') > 0" \
        -c "SELECT pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn()" | tr '\n' ' ')
stopped=$WALW; walw_cont
check "an owner-keyed grant is flushed before dlock_acquire returns" "${stopped:+stopped }$out" "stopped t t "

# answers racing withdrawals (races.py: each check once found by the torture run)
PGHOST=$DIR PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres \
    /usr/bin/python3 "$HERE/races.py" > "$DIR/races.log" 2>&1
sed 's/^/     /' "$DIR/races.log"
check "races of answers and withdrawals (races.py)" \
    "$(grep -c '^ok' "$DIR/races.log") $(tail -1 "$DIR/races.log" | grep -o '[0-9]* failed')" \
    "$(grep -c '^\(ok\|FAIL\)' "$DIR/races.log") 0 failed"

# kill -9 of a primary while the lock manager waits for its synchronous standby
/usr/bin/python3 "$HERE/failover.py" "$DIR" $((PORT + 100)) $((PORT + 101)) > "$DIR/failover.log" 2>&1
sed 's/^/     /' "$DIR/failover.log"
check "no grant acknowledged that the promoted standby lacks (failover.py)" \
    "$(tail -1 "$DIR/failover.log")" "failover: 4 passed, 0 failed"

# a worker that does not answer, settings forced on it, a load that keeps
# failing, synchronous_commit = off for the database (own cluster, PORT+102)
timeout 300 /usr/bin/python3 "$HERE/stuck.py" "$DIR/stuck" $((PORT + 102)) > "$DIR/stuck.log" 2>&1
sed 's/^/     /' "$DIR/stuck.log"
check "waits end whatever the worker does; its settings are its own (stuck.py)" \
    "$(tail -1 "$DIR/stuck.log")" "stuck: 38 passed, 0 failed"

echo "restart: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
