#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/test_demo.sh — `make run` / `make stop` (scripts/demo.sh) on a
# temporary DLOCK_RUN_DIR and private ports DEMO_TEST_PORTS ("5596 5597
# 5598": the demo, a foreign server, a busy port): the demo answers on its
# socket and on 127.0.0.1 and prints a JDBC URL; a directory it did not
# make (empty, or holding a running server) and a port something else
# listens on are refused and left untouched, by `make run` and `make stop`;
# its own earlier run is replaced; `make stop` removes only its own.
# Needs root (the servers run as postgres).  Last line: "demo: N passed,
# M failed"; exits non-zero on any failure.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
read -r P_DEMO P_FOREIGN P_BUSY <<< "${DEMO_TEST_PORTS:-5596 5597 5598}"
T=$(mktemp -d /tmp/dlock-demo-test.XXXXXX)
chmod 755 "$T"
RUN=$T/run
LISTENER=
cleanup() {
    [ -n "$LISTENER" ] && kill "$LISTENER" 2>/dev/null
    # only what this script made: the demo (by its marker) and the foreign cluster
    [ -f "$RUN/.dlock-make-run" ] && DLOCK_RUN_DIR=$RUN "$ROOT/scripts/demo.sh" stop >/dev/null 2>&1
    "$ROOT/scripts/pg_cluster.sh" stop "$T/foreign-pg" >/dev/null 2>&1
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

passed=0
failed=0
ok()   { echo "ok   $*"; passed=$((passed + 1)); }
fail() { echo "FAIL $*"; failed=$((failed + 1)); }
# check WHAT COMMAND...: ok when the command succeeds
check() { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }
# demo DIR PORT start|stop: make run / make stop with that directory and port
demo() {
    local target=run; [ "$3" = stop ] && target=stop
    DLOCK_RUN_DIR=$1 DLOCK_RUN_PORT=$2 make -s -C "$ROOT" "$target" > "$T/out" 2>&1
}
tcp_sql() { psql -X -qAt -h 127.0.0.1 -p "$1" -U postgres -d postgres -c "$2" 2>&1; }
sock_sql() { psql -X -qAt -h "$1" -p "$2" -U postgres -d postgres -c "$3" 2>&1; }
has() { grep -qF -- "$1" "$T/out"; }
# tree DIR: a listing of everything under DIR with sizes and times, to
# compare before and after
tree() { find "$1" -printf '%p %s %T@\n' 2>/dev/null | sort; }

# 1. the demo starts, on its socket and on 127.0.0.1, and says how to connect
if demo "$RUN" "$P_DEMO" start; then ok "make run in a new DLOCK_RUN_DIR"; else
    fail "make run in a new DLOCK_RUN_DIR"; cat "$T/out"; fi
check "it prints a JDBC URL for 127.0.0.1" has "jdbc:postgresql://127.0.0.1:$P_DEMO/postgres?user=postgres"
check "it prints the psql line for its socket" has "psql -h $RUN -p $P_DEMO -U postgres postgres"
check "psql on its socket: dlock answers" \
    test "$(sock_sql "$RUN" "$P_DEMO" "SELECT dlock_acquire('t') > 0")" = t
check "psql over TCP on 127.0.0.1: dlock answers" \
    test "$(tcp_sql "$P_DEMO" "SELECT dlock_try_acquire('t2') > 0")" = t
check "a plain TCP connection to 127.0.0.1:$P_DEMO" \
    /usr/bin/python3 -c "import socket,sys; socket.create_connection(('127.0.0.1', int(sys.argv[1])), 5).close()" "$P_DEMO"
check "its directory carries the marker" test -f "$RUN/.dlock-make-run"

# 2. a foreign directory, empty of servers: refused, untouched
F=$T/foreign
mkdir -p "$F/sub"; echo precious > "$F/notes.txt"
before=$(tree "$F")
if demo "$F" "$P_FOREIGN" start; then fail "make run refuses a directory it did not make"; else
    ok "make run refuses a directory it did not make"; fi
check "the refusal says what is there and names DLOCK_RUN_DIR" \
    bash -c "grep -qF 'notes.txt' '$T/out' && grep -qF DLOCK_RUN_DIR '$T/out'"
check "that directory is untouched" test "$(tree "$F")" = "$before"
if demo "$F" "$P_FOREIGN" stop; then fail "make stop refuses a directory it did not make"; else
    ok "make stop refuses a directory it did not make"; fi
check "that directory is still untouched after make stop" test "$(tree "$F")" = "$before"

# 3. a foreign directory holding a running server (another's cluster)
FPG=$T/foreign-pg
if "$ROOT/scripts/pg_cluster.sh" start "$FPG" "$P_FOREIGN" > "$T/fpg.log" 2>&1; then
    sock_sql "$FPG" "$P_FOREIGN" "CREATE TABLE keep (x int); INSERT INTO keep VALUES (42)" >/dev/null
    pid=$(head -1 "$FPG/data/postmaster.pid")
    if demo "$FPG" "$P_DEMO" start; then fail "make run refuses a directory with another's running server"; else
        ok "make run refuses a directory with another's running server"; fi
    check "the refusal says a server runs there" has "running PostgreSQL server"
    if demo "$FPG" "$P_FOREIGN" stop; then fail "make stop refuses another's running server"; else
        ok "make stop refuses another's running server"; fi
    check "that server still runs, same pid, its data intact" \
        bash -c "[ \"\$(head -1 '$FPG/data/postmaster.pid')\" = '$pid' ] && kill -0 '$pid' &&
                 [ \"\$(psql -X -qAt -h '$FPG' -p '$P_FOREIGN' -U postgres -d postgres -c 'SELECT x FROM keep')\" = 42 ]"
    "$ROOT/scripts/pg_cluster.sh" stop "$FPG" >/dev/null 2>&1
else
    fail "a foreign cluster started for the check"; cat "$T/fpg.log"
fi

# 4. a busy port: something else listens on 127.0.0.1; and the port of the
# running demo, asked for from another directory
/usr/bin/python3 -c "
import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(5); print('listening', flush=True)
while True:
    c, _ = s.accept(); c.sendall(b'still here\n'); c.close()
" "$P_BUSY" > "$T/listener.out" 2>&1 & LISTENER=$!
for _ in $(seq 50); do grep -q listening "$T/listener.out" && break; sleep 0.1; done
if demo "$T/new" "$P_BUSY" start; then fail "make run refuses a port something else listens on"; else
    ok "make run refuses a port something else listens on"; fi
check "the refusal shows the listener and names DLOCK_RUN_PORT" \
    bash -c "grep -qF python3 '$T/out' && grep -qF DLOCK_RUN_PORT '$T/out'"
check "no directory made for the refused run" test ! -e "$T/new"
check "the listener still runs and answers" \
    bash -c "kill -0 $LISTENER && /usr/bin/python3 -c \"import socket; s = socket.create_connection(('127.0.0.1', $P_BUSY), 5); assert s.recv(20) == b'still here\\n'\""
if demo "$T/new2" "$P_DEMO" start; then fail "make run refuses the port of a demo in another directory"; else
    ok "make run refuses the port of a demo in another directory"; fi
check "the demo still answers" test "$(tcp_sql "$P_DEMO" "SELECT 1")" = 1

# 5. its own earlier run is replaced; make stop removes it
if demo "$RUN" "$P_DEMO" start; then ok "make run again in its own directory replaces the earlier run"; else
    fail "make run again in its own directory replaces the earlier run"; cat "$T/out"; fi
check "the new run answers on 127.0.0.1, the earlier one's lock gone" \
    test "$(tcp_sql "$P_DEMO" "SELECT count(*) FROM dlock.locks WHERE name IN ('t', 't2')")" = 0
if demo "$RUN" "$P_DEMO" stop; then ok "make stop stops its own run"; else fail "make stop stops its own run"; cat "$T/out"; fi
check "its directory is gone" test ! -e "$RUN"
check "nothing answers on its port any more" bash -c "! psql -X -qAt -h 127.0.0.1 -p $P_DEMO -U postgres -d postgres -c 'SELECT 1' >/dev/null 2>&1"

echo "demo: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
