#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# clients/cli/test.sh — the dlock command against real servers: a throwaway
# PostgreSQL with dlock (and its pgbouncer) and a throwaway MariaDB with the
# plugin (clients/testenv.sh, ports PG 5581, pgbouncer 6581, MariaDB 3481).
#
# Needs `make install` (the PostgreSQL extension) and `make -C mysql_udf`
# done.  Prints "ok   <what>" / "FAIL <what>" per check and as its last
# line "clients-cli: N passed, M failed"; exits non-zero on any failure.
# the commands of dlock run are quoted on purpose: their shell expands them
# shellcheck disable=SC2016
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
DLOCK=$HERE/dlock

"$ROOT/scripts/deps.sh" libpq-dev libmariadb-dev mariadb-server mariadb-client >/dev/null ||
    { echo "clients-cli: 0 passed, 1 failed"; exit 1; }
make -s -C "$ROOT/mysql_udf" all >/dev/null || { echo "clients-cli: 0 passed, 1 failed"; exit 1; }
if ! out=$(make -C "$HERE" 2>&1); then
    printf '%s\n' "$out" >&2
    echo "clients-cli: 0 passed, 1 failed"
    exit 1
fi

DIR=$(mktemp -d /tmp/dlock-cli-test.XXXXXX)
cleanup() {
    # whatever is still running of ours (a failed check may leave one)
    jobs -p | while read -r p; do kill -9 "$p" 2>/dev/null; done
    [ -n "${bpid:-}" ] && kill -CONT "$bpid" 2>/dev/null
    "$ROOT/clients/testenv.sh" stop "$DIR" >/dev/null 2>&1
    rm -rf "$DIR"
}
trap cleanup EXIT
if ! "$ROOT/clients/testenv.sh" start "$DIR" 5581 6581 3481; then
    echo "clients-cli: 0 passed, 1 failed"
    exit 1
fi
# shellcheck disable=SC1091
. "$DIR/env"
unset DLOCK_DSN DLOCK_MYSQL

passed=0
failed=0
ok()   { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
# check WHAT COMMAND...: ok when the command succeeds
check() { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }
now() { echo "$EPOCHREALTIME"; }
# lt A B: A < B (decimals)
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
# wait_for FILE: until it exists and is not empty (at most 30 s)
wait_for() {
    for _ in $(seq 300); do [ -s "$1" ] && return 0; sleep 0.1; done
    return 1
}
# strictly_increasing FILE: every line a larger integer than the one before
strictly_increasing() { awk 'NR > 1 && $1 + 0 <= prev { bad = 1 } { prev = $1 + 0 } END { exit bad }' "$1"; }

# --version, --help, make install (the command and its man page): no server
ctl_version=$(sed -n "s/^default_version *= *'\(.*\)'.*/\1/p" "$ROOT/pg_ext/dlock.control")
check "dlock --version prints dlock.control's default_version ($("$DLOCK" --version))" \
    test "$("$DLOCK" --version)" = "dlock $ctl_version"
"$DLOCK" --help > "$DIR/help"
# has_all FILE WORD...: every word (a grep pattern) is in FILE
has_all() {
    local f=$1 w; shift
    for w in "$@"; do grep -q -e "$w" "$f" || { echo "missing in $f: $w"; return 1; }; done
}
check "dlock --help names the exit codes and the environment" \
    has_all "$DIR/help" DLOCK_TOKEN DLOCK_NAME DLOCK_OWNER DLOCK_DSN DLOCK_MYSQL DATABASE_URL PGHOST \
        "^  70 " "^  75 " "^  64 " "^  69 " "^  71 " "^  1 " campaign --semaphore --json
make -s -C "$HERE" install DESTDIR="$DIR/inst" > /dev/null 2>&1
man1="$DIR/inst/usr/local/share/man/man1/dlock.1"
check "make install puts dlock in bindir and dlock.1 in mandir/man1" \
    test -x "$DIR/inst/usr/local/bin/dlock" -a -f "$man1"
check "dlock.1: groff finds nothing to warn about, its version is dlock.control's" \
    eval 'test -z "$(groff -man -ww -z "$man1" 2>&1)" && grep -q "^\.TH DLOCK 1 .*\"dlock $ctl_version\"" "$man1"'
check "dlock.1 documents every option, command, exit code and variable of --help" \
    has_all "$man1" '\\-\\-dsn' '\\-\\-mysql' '\\-\\-ttl' '\\-\\-timeout' '\\-\\-grace' \
        '\\-\\-mode' '\\-\\-semaphore' '\\-\\-owner' '\\-\\-json' '\\-\\-version' \
        campaign release leader DLOCK_TOKEN DLOCK_NAME DLOCK_OWNER DATABASE_URL DLOCK_DSN DLOCK_MYSQL \
        '^\.B 64' '^\.B 69' '^\.B 70' '^\.B 71' '^\.B 75'

# the quick start of docs/clients.md, its lines as they are: installed
# under DESTDIR (make reads it from the environment), against PostgreSQL
# through DATABASE_URL
sed -n '/^<!-- cli-quickstart -->$/,/^<!-- \/cli-quickstart -->$/p' "$ROOT/docs/clients.md" |
    grep -v -e '^<!--' -e '^```' > "$DIR/quickstart.sh"
out=$(cd "$ROOT" && env DESTDIR="$DIR/qs" PATH="$DIR/qs/usr/local/bin:$PATH" \
      DATABASE_URL="postgresql://postgres@127.0.0.1:$DLOCK_TEST_PG_PORT/postgres" \
      bash -e "$DIR/quickstart.sh" 2>&1); rc=$?
check "docs/clients.md's quick start runs as written ($(grep -c . "$DIR/quickstart.sh") lines, exit $rc): installs, --version, a run with its token, ls" \
    eval 'test "$rc" = 0 && test -f "$DIR/qs/usr/local/share/man/man1/dlock.1" &&
          printf "%s\n" "$out" | grep -qx "dlock $ctl_version" &&
          printf "%s\n" "$out" | grep -qE "^nightly-report, token [1-9][0-9]*$" &&
          printf "%s\n" "$out" | grep -qE "^name +mode +granted"'

for db in postgresql mariadb; do
    W="$DIR/work $db"           # a space in the path: everything must be quoted
    mkdir -p "$W"
    if [ "$db" = postgresql ]; then
        CONN=(--dsn "host='$DLOCK_TEST_PG_HOST' port=$DLOCK_TEST_PG_PORT user=postgres dbname=postgres")
        sql() { psql -X -qAt -h "$DLOCK_TEST_PG_HOST" -p "$DLOCK_TEST_PG_PORT" -U postgres -d postgres -c "$1" 2>&1; }
        hold_sql() { sql "SELECT dlock_acquire('$1', ttl => '60 s', owner => '$2')"; }
        campaign_sql="SELECT dlock_campaign('el', 'host-a:1', ttl => '30 s', owner => 'somekey')"
        force_sql() { sql "SELECT dlock_force_release('$1', '$2', reason => 'test')"; }
        sem_sql() { sql "SELECT dlock_semaphore('$1', $2, $3, ttl => '60 s', owner => '$4')"; }
        path_sql="SELECT dlock_acquire('/ls13/x', ttl => '60 s', owner => 'k13')"
        camp13_sql="SELECT dlock_campaign('el13', 'node-z:9', ttl => '60 s', owner => 'k13')"
    else
        CONN=(--mysql "socket='$DLOCK_TEST_MY_SOCKET' user=root")
        sql() { mariadb -S "$DLOCK_TEST_MY_SOCKET" -u root -NB -e "$1" 2>&1; }
        hold_sql() { sql "SELECT dlock_acquire('$1', NULL, 60, 'exclusive', '$2')"; }
        campaign_sql="SELECT dlock_campaign('el', 'host-a:1', NULL, 30, 'somekey')"
        force_sql() { sql "SELECT dlock_force_release('$1', '$2', 'test')"; }
        sem_sql() { sql "SELECT dlock_semaphore('$1', $2, $3, NULL, 60, '$4')"; }
        path_sql="SELECT dlock_acquire('/ls13/x', NULL, 60, 'exclusive', 'k13')"
        camp13_sql="SELECT dlock_campaign('el13', 'node-z:9', NULL, 60, 'k13')"
    fi
    rows() { sql "SELECT COUNT(*) FROM dlock.locks WHERE name = '$1'"; }
    run() { "$DLOCK" run "${CONN[@]}" "$@"; }

    # 1. environment, tokens, exit status, release
    run t1 -- sh -c 'printf "%s\n%s\n%s\n" "$DLOCK_TOKEN" "$DLOCK_NAME" "$DLOCK_OWNER"' > "$W/env1"
    rc=$?
    run t1 -- sh -c 'printf "%s\n%s\n%s\n" "$DLOCK_TOKEN" "$DLOCK_NAME" "$DLOCK_OWNER"' > "$W/env2"
    tok1=$(sed -n 1p "$W/env1"); tok2=$(sed -n 1p "$W/env2")
    check "$db: run passes DLOCK_TOKEN (a positive integer) and exits 0" \
        test "$rc" = 0 -a -n "$(printf '%s' "$tok1" | grep -xE '[1-9][0-9]*')"
    check "$db: run passes DLOCK_NAME" test "$(sed -n 2p "$W/env1")" = t1
    check "$db: run passes DLOCK_OWNER, 32 hex digits, new for each run" \
        test -n "$(sed -n 3p "$W/env1" | grep -xE '[0-9a-f]{32}')" -a "$(sed -n 3p "$W/env1")" != "$(sed -n 3p "$W/env2")"
    check "$db: tokens of successive runs increase ($tok1 < $tok2)" test "${tok2:-0}" -gt "${tok1:-0}"
    run t1 -- sh -c 'exit 7'; rc=$?
    check "$db: the command's exit status is passed through (7)" test "$rc" = 7
    run t1 -- sh -c 'kill -TERM $$'; rc=$?
    check "$db: a command killed by SIGTERM gives 143" test "$rc" = 143
    run t1 -- "$W/no such command" 2>> "$W/log"; rc=$?
    check "$db: a command that is not there gives 127" test "$rc" = 127
    check "$db: the lock is released after the command" test "$(rows t1)" = 0

    # 2. --timeout 0 (and a short timeout) while another owner holds it
    hold_sql t2 holder2 > /dev/null
    t0=$(now); run --timeout 0 t2 -- touch "$W/ran2" 2>> "$W/log"; rc=$?; t1=$(now)
    check "$db: --timeout 0 on a held lock exits 75 at once ($(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f s", b - a }'))" \
        eval 'test "$rc" = 75 && lt "$(awk -v a="$t0" -v b="$t1" "BEGIN { print b - a }")" 3'
    check "$db: --timeout 0: the command did not run" test ! -e "$W/ran2"
    t0=$(now); run --timeout 1s t2 -- touch "$W/ran2" 2>> "$W/log"; rc=$?; t1=$(now)
    el=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
    check "$db: --timeout 1s on a held lock exits 75 after about 1 s ($el s), command not run" \
        eval 'test "$rc" = 75 -a ! -e "$W/ran2" && lt 0.9 "$el" && lt "$el" 10'
    sql "SELECT dlock_release('t2', 'holder2')" > /dev/null

    # 3. lease loss: SIGTERM within a renewal period, exit 70
    run --ttl 3s --grace 30s t3 -- sh -c '
        trap "echo TERM > \"\$1.sig\"; kill \$! 2>/dev/null; exit 0" TERM
        echo "$DLOCK_OWNER" > "$1"
        sleep 60 > /dev/null 2>&1 &
        wait' sh "$W/owner3" 2>> "$W/log" &
    pid=$!
    if wait_for "$W/owner3"; then
        t0=$(now)
        sql "SELECT dlock_release('t3', '$(cat "$W/owner3")')" > /dev/null
        wait "$pid"; rc=$?; t1=$(now)
        el=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
        check "$db: lease lost (released by its key elsewhere): exit 70 although the command exited 0" test "$rc" = 70
        check "$db: lease lost: the command got SIGTERM" test -s "$W/owner3.sig"
        check "$db: lease lost: stopped $el s after the release (< ttl + 2 s)" lt "$el" 5
    else
        kill "$pid"; wait "$pid"
        fail "$db: lease lost: the command never started"
    fi
    check "$db: lease lost: nothing left locked" test "$(rows t3)" = 0

    run --ttl 3s --grace 2s t3b -- sh -c '
        echo $$ > "$1.pid"; echo "$DLOCK_OWNER" > "$1"; trap "" TERM; exec sleep 60' sh "$W/owner3b" 2>> "$W/log" &
    pid=$!
    if wait_for "$W/owner3b"; then
        t0=$(now)
        sql "SELECT dlock_release('t3b', '$(cat "$W/owner3b")')" > /dev/null
        wait "$pid"; rc=$?; t1=$(now)
        el=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
        # shellcheck disable=SC2034  # used in the eval below
        cpid=$(cat "$W/owner3b.pid")
        check "$db: a command that ignores SIGTERM is killed after --grace 2s ($el s after the release), exit 70" \
            eval 'test "$rc" = 70 && lt 1.8 "$el" && lt "$el" 7 && ! kill -0 "$cpid" 2>/dev/null'
    else
        kill "$pid"; wait "$pid"
        fail "$db: SIGKILL after grace: the command never started"
    fi

    # after a loss, leaving never frees the next holder's lock: the lock is
    # taken by another key while the lost command still runs out its grace
    run --ttl 3s --grace 2s t3c -- sh -c '
        echo "$DLOCK_OWNER" > "$1"; trap "" TERM; exec sleep 60' sh "$W/owner3c" 2>> "$W/log" &
    pid=$!
    if wait_for "$W/owner3c"; then
        sql "SELECT dlock_release('t3c', '$(cat "$W/owner3c")')" > /dev/null
        hold_sql t3c next3c > /dev/null
        wait "$pid"; rc=$?
        check "$db: after a loss, dlock run leaves the next holder's lock alone (exit $rc)" \
            eval 'test "$rc" = 70 && test "$(sql "SELECT COUNT(*) FROM dlock.locks WHERE name = '"'t3c'"' AND owner = '"'next3c'"'")" = 1'
        sql "SELECT dlock_release('t3c', 'next3c')" > /dev/null
    else
        kill "$pid"; wait "$pid"
        fail "$db: the next holder's lock: the command never started"
    fi

    # 4. a hundred at once: never two inside, tokens in order of entry
    cs='if mkdir "$1/cs" 2>/dev/null; then
            echo "$DLOCK_TOKEN" >> "$1/tokens"; sleep 0.01; rmdir "$1/cs"
        else echo overlap >> "$1/overlap"; fi'
    rm -f "$W/tokens" "$W/overlap"
    t0=$(now)
    pids=()
    for _ in $(seq 100); do
        run --timeout 60s c4 -- sh -c "$cs" sh "$W" 2>> "$W/err4" &
        pids+=($!)
    done
    nbad=0
    for p in "${pids[@]}"; do wait "$p" || nbad=$((nbad + 1)); done
    el=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
    check "$db: 100 concurrent runs: all exited 0 ($el s)" test "$nbad" = 0
    check "$db: 100 concurrent runs: all 100 ran" test "$(wc -l < "$W/tokens" 2>/dev/null)" = 100
    check "$db: 100 concurrent runs: never two inside at once" test ! -e "$W/overlap"
    check "$db: 100 concurrent runs: tokens strictly increasing in order of entry" strictly_increasing "$W/tokens"

    rm -f "$W/tokens" "$W/overlap"
    pids=()
    for _ in $(seq 100); do
        run --timeout 0 c4b -- sh -c "$cs" sh "$W" 2>> "$W/err4" &
        pids+=($!)
    done
    nbad=0
    for p in "${pids[@]}"; do wait "$p"; rc=$?; [ "$rc" = 0 ] || [ "$rc" = 75 ] || nbad=$((nbad + 1)); done
    n=$(wc -l < "$W/tokens" 2>/dev/null || echo 0)
    check "$db: 100 concurrent --timeout 0: $n ran, every other exited 75" test "$n" -ge 1 -a "$nbad" = 0
    check "$db: 100 concurrent --timeout 0: never two inside at once" test ! -e "$W/overlap"
    check "$db: nothing left locked after the crowds" test "$(rows c4)" = 0 -a "$(rows c4b)" = 0

    # 5. ls, release, leader
    hold_sql held5 key5 > /dev/null
    "$DLOCK" ls "${CONN[@]}" > "$W/ls"; rc=$?
    check "$db: ls shows the held lock with its owner key" \
        eval 'test "$rc" = 0 && grep -qE "^held5 +exclusive +yes +key5 " "$W/ls"'
    "$DLOCK" ls "${CONN[@]}" hel > "$W/ls2"; "$DLOCK" ls "${CONN[@]}" zzz > "$W/ls3"
    check "$db: ls NAME-PREFIX filters by prefix" eval 'grep -q "^held5 " "$W/ls2" && ! grep -q "^held5 " "$W/ls3"'
    "$DLOCK" release "${CONN[@]}" held5 --owner key5; rc=$?
    check "$db: release NAME --owner KEY frees it (exit 0)" test "$rc" = 0 -a "$(rows held5)" = 0
    "$DLOCK" release held5 "${CONN[@]}" --owner key5 2> "$W/rel.err"; rc=$?
    check "$db: a second release exits 1 with a warning" eval 'test "$rc" = 1 && grep -q "not held" "$W/rel.err"'
    sql "$campaign_sql" > /dev/null
    v=$("$DLOCK" leader "${CONN[@]}" el); rc=$?
    check "$db: leader prints the leader's value" test "$rc" = 0 -a "$v" = host-a:1
    sql "SELECT dlock_release('el', 'somekey')" > /dev/null
    v=$("$DLOCK" leader "${CONN[@]}" el 2>/dev/null); rc=$?
    check "$db: leader exits 1 when nobody leads" test "$rc" = 1 -a -z "$v"

    # 6. bad input: usage exit code 64, a message, nothing run, nothing locked
    bad_run() {
        local what=$1; shift
        run "$@" 2> "$W/err6"; rc=$?
        check "$db: run with $what: exit 64 with a message ($(head -1 "$W/err6"))" \
            eval 'test "$rc" = 64 && grep -q "^dlock: " "$W/err6"'
    }
    bad_run "an unknown option" --bogus x t6 -- touch "$W/ran6"
    bad_run "no \"--\"" t6 touch "$W/ran6"
    bad_run "a bad duration" --ttl 5x t6 -- touch "$W/ran6"
    bad_run "a negative timeout" --timeout=-1 t6 -- touch "$W/ran6"
    bad_run "an unknown mode" --mode XX t6 -- touch "$W/ran6"
    run '' -- touch "$W/ran6" 2> "$W/err6"; rc=$?
    check "$db: run with an empty name: exit 64 ($(head -1 "$W/err6"))" eval 'test "$rc" = 64 && grep -q "empty" "$W/err6"'
    "$DLOCK" release "${CONN[@]}" t6 2> "$W/err6"; rc=$?
    check "$db: release without --owner: exit 64" test "$rc" = 64
    check "$db: bad input ran nothing" test ! -e "$W/ran6"
    check "$db: nothing is left locked at all" test "$(sql "SELECT COUNT(*) FROM dlock.locks")" = 0

    # 7. signals: SIGTERM while waiting cancels the wait; SIGHUP while running is forwarded
    hold_sql w7 key7 > /dev/null
    # not through run(): $! must be dlock itself, not a subshell
    "$DLOCK" run "${CONN[@]}" w7 -- touch "$W/ran7" 2>> "$W/log" &
    pid=$!
    for _ in $(seq 300); do
        [ "$(sql "SELECT COUNT(*) FROM dlock.locks WHERE name = 'w7' AND NOT granted")" = 1 ] && break
        sleep 0.1
    done
    kill -TERM "$pid"; wait "$pid"; rc=$?
    sql "SELECT dlock_release('w7', 'key7')" > /dev/null
    sleep 0.2
    check "$db: SIGTERM while waiting: exit 143, command not run, request withdrawn" \
        eval 'test "$rc" = 143 -a ! -e "$W/ran7" -a "$(rows w7)" = 0'
    # SIGHUP at its default even when this suite runs under nohup (an ignored
    # signal stays ignored across exec: dlock would never see it, nor could
    # the command's shell trap it)
    env --default-signal=HUP "$DLOCK" run "${CONN[@]}" f7 -- sh -c 'trap "echo HUP > \"\$1\"; kill \$! 2>/dev/null; exit 3" HUP; sleep 60 > /dev/null 2>&1 & echo $! > "$1.pid"; wait' sh "$W/hup7" &
    pid=$!
    wait_for "$W/hup7.pid"
    kill -HUP "$pid"; wait "$pid"; rc=$?
    check "$db: SIGHUP is forwarded to the command (its exit status 3 comes back)" \
        eval 'test "$rc" = 3 && test -s "$W/hup7" && test "$(rows f7)" = 0'

    # 8. a short outage: every connection of dlock is killed twice while
    # the command runs; the renewer reconnects, the lease holds
    "$DLOCK" run "${CONN[@]}" --ttl 3s o8 -- sh -c 'echo x > "$1"; sleep 4' sh "$W/o8" 2>> "$W/log" &
    pid=$!
    wait_for "$W/o8"
    for _ in 1 2; do
        if [ "$db" = postgresql ]; then
            sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'dlock'" > /dev/null
        else
            for id in $(sql "SELECT id FROM information_schema.PROCESSLIST WHERE user = 'root' AND id <> CONNECTION_ID()"); do
                sql "KILL CONNECTION $id" > /dev/null
            done
        fi
        sleep 1.5
    done
    wait "$pid"; rc=$?
    check "$db: connections killed twice while the command runs: it completes, exit 0" test "$rc" = 0
    check "$db: ... and the lock is released after it" test "$(rows o8)" = 0

    # 9. the whole job: the command runs in a process group of its own, and
    # every stop reaches the group, helpers started in the background too
    run --ttl 3s --grace 1s grand -- sh -c '
        sleep 47 & echo $! > "$1.gc"; echo "$DLOCK_OWNER" > "$1"; wait' sh "$W/grand" 2>> "$W/log" &
    pid=$!
    if wait_for "$W/grand"; then
        gc=$(cat "$W/grand.gc")
        force_sql grand "$(cat "$W/grand")" > /dev/null
        wait "$pid"; rc=$?
        check "$db: force release: exit $rc (70), the grandchild 'sleep 47' (pid $gc) is gone" \
            eval 'test "$rc" = 70 && ! kill -0 "$gc" 2>/dev/null'
    else
        kill "$pid"; wait "$pid"; fail "$db: grandchild: the command never started"
    fi
    # a grandchild that ignores SIGTERM gets SIGKILL after --grace
    "$DLOCK" run "${CONN[@]}" --grace 1s grand2 -- sh -c '
        sh -c "trap \"\" TERM; echo \$\$ > \"\$1.gc\"; exec sleep 48" sh "$1" & wait' sh "$W/grand2" 2>> "$W/log" &
    pid=$!
    if wait_for "$W/grand2.gc"; then
        gc=$(cat "$W/grand2.gc")
        kill -TERM "$pid"; wait "$pid"; rc=$?
        check "$db: SIGTERM to dlock: exit $rc (143), the grandchild (ignoring SIGTERM) is killed after --grace" \
            eval 'test "$rc" = 143 && ! kill -0 "$gc" 2>/dev/null && test "$(rows grand2)" = 0'
    else
        kill "$pid"; wait "$pid"; fail "$db: SIGTERM to dlock: the command never started"
    fi
    # helpers the command leaves behind are stopped before the lock goes
    run --grace 1s grand3 -- sh -c 'sleep 49 > /dev/null 2>&1 & echo $! > "$1.gc"' sh "$W/grand3" 2>> "$W/log"; rc=$?
    gc=$(cat "$W/grand3.gc" 2>/dev/null || echo 0)
    check "$db: a helper left running by the command is stopped at exit (exit $rc), the lock released" \
        eval 'test "$rc" = 0 && test "$gc" != 0 && ! kill -0 "$gc" 2>/dev/null && test "$(rows grand3)" = 0'

    # 10. errors: the first error of a call is the one told, with a hint
    # where the fix is known, and the lock's name
    # shellcheck disable=SC2034  # denied, grant_hint: used in the evals below
    if [ "$db" = postgresql ]; then
        sql "CREATE ROLE nopriv LOGIN" > /dev/null
        sql "CREATE DATABASE app" > /dev/null
        NOPRIV=(--dsn "host='$DLOCK_TEST_PG_HOST' port=$DLOCK_TEST_PG_PORT user=nopriv dbname=postgres")
        WRONGDB=(--dsn "host='$DLOCK_TEST_PG_HOST' port=$DLOCK_TEST_PG_PORT user=postgres dbname=app")
        denied='permission denied for function dlock_acquire'
        grant_hint='hint: the role needs dlock_user: GRANT dlock_user TO "nopriv"'
    else
        sql "CREATE USER nopriv@localhost" > /dev/null
        NOPRIV=(--mysql "socket='$DLOCK_TEST_MY_SOCKET' user=nopriv")
        denied='dlock_acquire: access denied for nopriv@localhost: needs the role dlock_user'
        grant_hint="hint: the account needs the role dlock_user: GRANT dlock_user TO 'nopriv'@'localhost'; SET DEFAULT ROLE dlock_user FOR 'nopriv'@'localhost'"
    fi
    "$DLOCK" run "${NOPRIV[@]}" err10 -- touch "$W/ran10" 2> "$W/err10"; rc=$?
    check "$db: a role without dlock_user: exit 69, the acquire's error (not the clean-up's) for lock \"err10\", the grant as a hint ($(tr '\n' '|' < "$W/err10"))" \
        eval 'test "$rc" = 69 -a ! -e "$W/ran10" && grep -qF "acquire \"err10\": $denied" "$W/err10" &&
              ! grep -q release_all "$W/err10" && grep -qxF "dlock: $grant_hint" "$W/err10"'
    "$DLOCK" ls "${NOPRIV[@]}" 2> "$W/err10"; rc=$?
    check "$db: ls without dlock_user: exit 69 with the grant as a hint ($(tr '\n' '|' < "$W/err10"))" \
        eval 'test "$rc" = 69 && grep -qxF "dlock: $grant_hint" "$W/err10"'
    if [ "$db" = postgresql ]; then
        "$DLOCK" run "${WRONGDB[@]}" err10 -- touch "$W/ran10" 2> "$W/err10"; rc=$?
        check "$db: a database without the extension: exit 69, dlock_acquire's error for \"err10\", the database dlock.database names as a hint ($(tr '\n' '|' < "$W/err10"))" \
            eval 'test "$rc" = 69 -a ! -e "$W/ran10" && grep -q "acquire \"err10\": function dlock_acquire(.*) does not exist" "$W/err10" &&
                  ! grep -q release_all "$W/err10" &&
                  grep -qF "hint: the dlock extension is not installed in database \"app\"; it lives in the database named by dlock.database (SHOW dlock.database on the server): \"postgres\"" "$W/err10"'
        "$DLOCK" ls "${WRONGDB[@]}" 2> "$W/err10"; rc=$?
        check "$db: ls on a database without the extension: the same hint ($(tr '\n' '|' < "$W/err10"))" \
            eval 'test "$rc" = 69 && grep -qF "not installed in database \"app\"; it lives in the database named by dlock.database" "$W/err10"'
        sql "DROP DATABASE app" > /dev/null
        sql "DROP ROLE nopriv" > /dev/null
    else
        # the plugin's functions not installed: one dropped for a moment
        sql "DROP FUNCTION dlock_acquire" > /dev/null
        run err10 -- touch "$W/ran10" 2> "$W/err10"; rc=$?
        sql "CREATE FUNCTION dlock_acquire RETURNS INTEGER SONAME 'dlock_udf.so'" > /dev/null
        check "$db: the plugin not installed: exit 69, the acquire's error for \"err10\", the install as a hint ($(tr '\n' '|' < "$W/err10"))" \
            eval 'test "$rc" = 69 -a ! -e "$W/ran10" && grep -q "acquire \"err10\": FUNCTION .*dlock_acquire does not exist" "$W/err10" &&
                  ! grep -q release_all "$W/err10" && grep -qF "hint: the dlock plugin is not installed on this server" "$W/err10"'
        sql "DROP USER nopriv@localhost" > /dev/null
    fi

    # 11. DATABASE_URL: after --dsn/--mysql and DLOCK_DSN/DLOCK_MYSQL,
    # before libpq's defaults; its scheme picks the server
    if [ "$db" = postgresql ]; then
        urls=("postgresql://postgres@127.0.0.1:$DLOCK_TEST_PG_PORT/postgres"
              "postgres://postgres@/postgres?host=$DLOCK_TEST_PG_HOST&port=$DLOCK_TEST_PG_PORT")
    else
        urls=("mysql://dlock_test:dlock%5Ftest@127.0.0.1:$DLOCK_TEST_MY_PORT/mysql"
              "mariadb://root@localhost/?socket=$DLOCK_TEST_MY_SOCKET")
    fi
    for u in "${urls[@]}"; do
        t=$(env -u PGHOST -u PGPORT DATABASE_URL="$u" "$DLOCK" run url11 -- sh -c 'echo "$DLOCK_TOKEN"' 2> "$W/err11"); rc=$?
        check "$db: DATABASE_URL=$u: run takes the lock there (exit $rc, token $t) $(head -1 "$W/err11")" \
            eval 'test "$rc" = 0 && test "${t:-0}" -gt 0'
    done
    env DATABASE_URL="mysql://nobody@127.0.0.1:1/" "$DLOCK" run "${CONN[@]}" url11 -- true; rc=$?
    check "$db: --dsn/--mysql wins over DATABASE_URL (exit $rc)" test "$rc" = 0
    env DATABASE_URL="sqlite:///tmp/x.db" "$DLOCK" run url11 -- true 2> "$W/err11"; rc=$?
    check "$db: DATABASE_URL of another scheme: exit 64 ($(head -1 "$W/err11"))" \
        eval 'test "$rc" = 64 && grep -q DATABASE_URL "$W/err11"'

    # 12. run --semaphore CAPACITY[:PERMITS], and campaign: the same watchdog
    sem_sql sem12 3 1 semkey > /dev/null
    out=$("$DLOCK" run "${CONN[@]}" --semaphore 3:2 sem12 -- sh -c '
        echo "$DLOCK_TOKEN"; echo "$DLOCK_OWNER" > "$1"' sh "$W/sem12" 2>> "$W/log"); rc=$?
    check "$db: run --semaphore 3:2 beside 1 held permit: runs (exit $rc, token $out)" \
        eval 'test "$rc" = 0 && test "${out:-0}" -gt 0'
    "$DLOCK" run "${CONN[@]}" --semaphore 3:3 --timeout 0 sem12 -- touch "$W/ran12" 2> "$W/err12"; rc=$?
    check "$db: run --semaphore 3:3 --timeout 0 with 1 of 3 held: exit 75, not run ($(head -1 "$W/err12"))" \
        test "$rc" = 75 -a ! -e "$W/ran12"
    "$DLOCK" run "${CONN[@]}" --semaphore 3:2 sem12 -- sh -c '
        echo "$DLOCK_OWNER" > "$1"; sleep 30' sh "$W/sem12b" 2>> "$W/log" &
    pid=$!
    if wait_for "$W/sem12b"; then
        seen=$(sql "SELECT permits, capacity FROM dlock.locks WHERE name = 'sem12' AND owner = '$(cat "$W/sem12b")'" | tr '\t|' '  ')
        check "$db: the semaphore's holder takes 2 of capacity 3 (view: $seen)" test "$seen" = "2 3"
        sql "SELECT dlock_release('sem12', '$(cat "$W/sem12b")')" > /dev/null
        wait "$pid"; rc=$?
        check "$db: run --semaphore: permits released by their key elsewhere: exit $rc (70)" test "$rc" = 70
    else
        kill "$pid"; wait "$pid"; fail "$db: run --semaphore: the command never started"
    fi
    sql "SELECT dlock_release('sem12', 'semkey')" > /dev/null
    check "$db: nothing of the semaphore left" test "$(rows sem12)" = 0

    "$DLOCK" campaign "${CONN[@]}" --ttl 3s --grace 1s el12 node-a:1 -- sh -c '
        sleep 57 & echo $! > "$1.gc"; echo "$DLOCK_TOKEN $DLOCK_OWNER" > "$1"; wait' sh "$W/el12" 2>> "$W/log" &
    pid=$!
    if wait_for "$W/el12"; then
        read -r term key < "$W/el12"
        v=$("$DLOCK" leader "${CONN[@]}" el12)
        check "$db: campaign: leads with its value while the command runs ($v, term $term)" \
            eval 'test "$v" = node-a:1 && test "${term:-0}" -gt 0'
        "$DLOCK" campaign "${CONN[@]}" --timeout 1s el12 node-b:1 -- touch "$W/ran12" 2> "$W/err12"; rc=$?
        check "$db: a second campaign --timeout 1s: exit 75, not run" test "$rc" = 75 -a ! -e "$W/ran12"
        "$DLOCK" campaign "${CONN[@]}" --timeout 0 el12 node-b:1 -- touch "$W/ran12" 2> "$W/err12"; rc=$?
        check "$db: a second campaign --timeout 0: exit 75 at once, not run" test "$rc" = 75 -a ! -e "$W/ran12"
        gc=$(cat "$W/el12.gc")
        force_sql el12 "$key" > /dev/null
        wait "$pid"; rc=$?
        check "$db: campaign: the lead lost (force release): exit $rc (70), the command's group gone" \
            eval 'test "$rc" = 70 && ! kill -0 "$gc" 2>/dev/null'
    else
        kill "$pid"; wait "$pid"; fail "$db: campaign: the command never started"
    fi
    "$DLOCK" campaign "${CONN[@]}" el12 node-c:1 -- sh -c 'exit 4' 2>> "$W/log"; rc=$?
    "$DLOCK" leader "${CONN[@]}" el12 > /dev/null 2>&1; lrc=$?
    check "$db: campaign: the command's status comes back ($rc), it resigned (leader exits $lrc)" \
        test "$rc" = 4 -a "$lrc" = 1

    # 13. ls: a semaphore's permits/capacity, an election's value, implied
    # rows marked, --json, times in UTC with the zone whatever the session's
    sql "$path_sql" > /dev/null; sem_sql sem13 5 2 k13 > /dev/null; sql "$camp13_sql" > /dev/null
    if [ "$db" = postgresql ]; then
        PGTZ=Etc/GMT-5 "$DLOCK" ls "${CONN[@]}" > "$W/ls13"; rc=$?
        PGTZ=Etc/GMT-5 "$DLOCK" ls --json "${CONN[@]}" > "$W/ls13.json"
    else
        sql "SET GLOBAL time_zone = '+05:00'" > /dev/null
        "$DLOCK" ls "${CONN[@]}" > "$W/ls13"; rc=$?
        "$DLOCK" ls --json "${CONN[@]}" > "$W/ls13.json"
        sql "SET GLOBAL time_zone = 'SYSTEM'" > /dev/null
    fi
    check "$db: ls marks the path's intention row implied ($(grep '^/ls13 ' "$W/ls13" | tr -s ' '))" \
        eval 'test "$rc" = 0 && grep -qE "^/ls13 +CW +yes +implied " "$W/ls13" && grep -qE "^/ls13/x +exclusive +yes +k13 " "$W/ls13"'
    check "$db: ls shows the semaphore's permits/capacity ($(grep '^sem13 ' "$W/ls13" | tr -s ' '))" \
        grep -qE "^sem13 +semaphore +yes +k13 .* 2/5 " "$W/ls13"
    check "$db: ls shows the leader's value ($(grep '^el13 ' "$W/ls13" | tr -s ' '))" \
        grep -qE "^el13 +exclusive +yes +k13 .* node-z:9$" "$W/ls13"
    check "$db: ls --json: one array, the same keys on every row, the values typed, times UTC +00 ($(head -c 200 "$W/ls13.json" | tr "\n" " ")...)" \
        python3 - "$W/ls13.json" "$db" <<'PY'
import json, sys, datetime
rows = json.load(open(sys.argv[1]))
pid = "pid" if sys.argv[2] == "postgresql" else "conn_id"
keys = {"name", "mode", "granted", "implied", "position", "owner", pid, "token",
        "permits", "capacity", "expires_at", "value"}
assert isinstance(rows, list) and len(rows) == 4, rows
assert all(set(r) == keys for r in rows), [sorted(r) for r in rows]
by = {(r["name"], r["implied"]): r for r in rows}
assert by[("/ls13", True)]["mode"] == "CW" and by[("/ls13", True)]["granted"] is True
assert by[("/ls13/x", False)]["token"] > 0 and by[("/ls13/x", False)]["position"] is None
assert by[("sem13", False)]["permits"] == 2 and by[("sem13", False)]["capacity"] == 5
assert by[("el13", False)]["value"] == "node-z:9" and by[("el13", False)]["permits"] is None
now = datetime.datetime.now(datetime.timezone.utc)
for r in rows:
    if r["implied"]:
        continue  # an intention has no lease of its own
    e = datetime.datetime.strptime(r["expires_at"], "%Y-%m-%d %H:%M:%S.%f+00").replace(tzinfo=datetime.timezone.utc)
    assert 30 < (e - now).total_seconds() <= 61, (r["expires_at"], now)
PY
    sql "SELECT dlock_release_all('k13')" > /dev/null

    # 14. in a terminal's foreground (script(1) gives one): the job gets the
    # terminal, so it can read it, and a Ctrl-C reaches it
    (sleep 1; echo hello) | script -qec "$(printf '%q ' "$DLOCK" run "${CONN[@]}" tty14 -- sh -c 'read x; echo "got:$x" > "$1"' sh "$W/tty14")" /dev/null > /dev/null 2>&1; rc=$?
    check "$db: in a terminal, the job reads it (exit $rc, $(cat "$W/tty14" 2>/dev/null))" \
        eval 'test "$rc" = 0 && test "$(cat "$W/tty14" 2>/dev/null)" = got:hello'
    # the Ctrl-C once the job runs (it writes tty14b): on a loaded machine
    # the run may take longer than any fixed pause to start it.  SIGINT at
    # its default: make check runs this suite in the background, where a
    # shell without job control starts commands with SIGINT ignored (and an
    # ignored signal stays ignored across exec)
    (for _ in $(seq 300); do [ -s "$W/tty14b" ] && break; sleep 0.1; done; sleep 0.3; printf '\003') | script -qec "$(printf '%q ' env --default-signal=INT "$DLOCK" run "${CONN[@]}" tty14 -- sh -c 'echo x > "$1"; sleep 30 & wait' sh "$W/tty14b")" /dev/null > /dev/null 2>&1; rc=$?
    check "$db: in a terminal, Ctrl-C stops the job (exit $rc: 130), the lock released" \
        eval 'test "$rc" = 130 -a -s "$W/tty14b" && test "$(rows tty14)" = 0'
done

# through pgbouncer in transaction mode: owner keys need no session
"$DLOCK" run --dsn "host='$DLOCK_TEST_BOUNCER_HOST' port=$DLOCK_TEST_BOUNCER_PORT user=postgres dbname=postgres" \
    --ttl 1.5s b1 -- sh -c 'sleep 1.2; exit 5'; rc=$?
check "postgresql: run through pgbouncer, renewing, passes the exit status" test "$rc" = 5

# more waiters than pgbouncer's 2 server connections: the waits are short
# calls that keep their place, so the holder's renewals and release get a
# connection (blocking waits would pin both and stall until a timeout)
WB="$DIR/work crowd"; mkdir -p "$WB"
t0=$(now)
for _ in $(seq 6); do
    "$DLOCK" run --dsn "host='$DLOCK_TEST_BOUNCER_HOST' port=$DLOCK_TEST_BOUNCER_PORT user=postgres dbname=postgres" \
        --timeout 60s --ttl 3s b2 -- sh -c '
            mkdir "$1/inside" 2>/dev/null || { touch "$1/overlap"; exit 1; }
            echo "$DLOCK_TOKEN" >> "$1/tokens"; sleep 1.2; rmdir "$1/inside"' sh "$WB" 2>> "$WB/log" &
done
nbad=0
for p in $(jobs -p); do wait "$p" || nbad=$((nbad + 1)); done
el=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
check "postgresql: 6 runs through pgbouncer with 2 server connections: all ran, one at a time, in $el s" \
    eval 'test "$nbad" = 0 -a ! -e "$WB/overlap" && test "$(wc -l < "$WB/tokens")" = 6 && strictly_increasing "$WB/tokens" && lt "$el" 40'

# a long outage: pgbouncer stopped (SIGSTOP) for longer than the ttl; the
# renewal hangs, the local deadline stops the command
bpid=$(cat "$DLOCK_TEST_BOUNCER_HOST/pgbouncer.pid")
W="$DIR/work bouncer"; mkdir -p "$W"
"$DLOCK" run --dsn "host='$DLOCK_TEST_BOUNCER_HOST' port=$DLOCK_TEST_BOUNCER_PORT user=postgres dbname=postgres" \
    --ttl 2s --grace 5s o9 -- sh -c '
        trap "echo TERM > \"\$1.sig\"; kill \$! 2>/dev/null; exit 0" TERM
        echo x > "$1"; sleep 60 > /dev/null 2>&1 & wait' sh "$W/o9" 2>> "$W/log" &
pid=$!
wait_for "$W/o9"
t0=$(now)
kill -STOP "$bpid"
wait "$pid"; rc=$?; t1=$(now)
kill -CONT "$bpid"
el=$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')
check "postgresql: pgbouncer stopped for good: the command gets SIGTERM, exit 70 after $el s (< ttl + 2 s)" \
    eval 'test "$rc" = 70 -a -s "$W/o9.sig" && lt "$el" 4'

echo "clients-cli: $passed passed, $failed failed"
[ "$failed" = 0 ]
