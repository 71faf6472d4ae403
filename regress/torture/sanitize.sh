#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# regress/torture/sanitize.sh — `make asan`: the PostgreSQL suites against
# dlock built with AddressSanitizer and UndefinedBehaviorSanitizer
# (-fsanitize=address,undefined -fno-sanitize-recover=all), failing on any
# sanitizer report.
#
# The instrumented extension is built in a copy of the sources (the
# checkout's objects stay as they are) and installed into a private copy of
# PostgreSQL (scripts/private_pg.sh $ASAN_PG, default /tmp/dlock-asan-pg),
# never into the one PG_CONFIG names.  postgres itself is not instrumented:
# its servers run with libasan and asan_preload.so in LD_PRELOAD
# (pg_cluster.sh's PG_SERVER_ENV; the client programs run without), leak
# detection off (a backend frees nothing at exit by design), every report
# written to a file, and a report aborts the process.
#
# Runs: pg_regress, the scenarios and the fuzzer (ASAN_FUZZ_CALLS, 20,000)
# on one server, then the restart suite and the quick torture run (crash
# and HA mode) on their own.  Prints "asan: N passed, M failed" last.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ASAN_PG=${ASAN_PG:-/tmp/dlock-asan-pg}
PORT=${ASAN_PORT:-5498}
CALLS=${ASAN_FUZZ_CALLS:-20000}
WORK=$(mktemp -d /tmp/dlock-asan.XXXXXX)
chmod 755 "$WORK"
passed=0; failed=0
check() {  # name, command status (0 = ok)
    if [ "$2" -eq 0 ]; then echo "ok   $1"; passed=$((passed + 1))
    else echo "FAIL $1"; failed=$((failed + 1)); fi
}
cleanup() { "$ROOT/scripts/pg_cluster.sh" stop "$WORK/pg" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

PG_CONFIG=$("$ROOT/scripts/private_pg.sh" "$ASAN_PG") ||
    { echo "asan: 0 passed, 1 failed"; exit 1; }
export PG_CONFIG

# the instrumented build, from a clean copy of the sources
mkdir "$WORK/src"
cp -r "$ROOT/pg_ext" "$ROOT/core" "$ROOT/sql" "$WORK/src/"
find "$WORK/src" \( -name '*.o' -o -name '*.so' -o -name '*.bc' \) -delete
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g"
if ! make -s -C "$WORK/src/pg_ext" COPT="$SAN" >"$WORK/build.log" 2>&1 ||
   ! make -s -C "$WORK/src/pg_ext" install >>"$WORK/build.log" 2>&1; then
    cat "$WORK/build.log"; echo "asan: 0 passed, 1 failed"; exit 1
fi
SO=$("$PG_CONFIG" --pkglibdir)/dlock.so
nm -D "$SO" | grep -q __asan_report_load
check "dlock.so in $ASAN_PG is instrumented" $?

LIBASAN=$(gcc -print-file-name=libasan.so)
cc -shared -fPIC -O2 -Wall -o "$WORK/asan_preload.so" "$HERE/asan_preload.c" -ldl
mkdir "$WORK/reports"; chown postgres: "$WORK/reports"
export PG_SERVER_ENV="LD_PRELOAD=$LIBASAN:$WORK/asan_preload.so
ASAN_OPTIONS=detect_leaks=0:abort_on_error=1:log_path=$WORK/reports/asan
UBSAN_OPTIONS=print_stacktrace=1:abort_on_error=1:log_path=$WORK/reports/ubsan"
export PG_EXTRA_CONF="jit = off"   # JIT would inline the uninstrumented bitcode

PG_EXTRA_CONF="$PG_EXTRA_CONF" "$ROOT/scripts/pg_cluster.sh" start "$WORK/pg" "$PORT" ||
    { echo "asan: 0 passed, 1 failed"; exit 1; }
export PGHOST=$WORK/pg PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
# the sanitizer runtime is in the server and the instrumented library loaded
worker=$(psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock lock manager'")
grep -q libasan "/proc/$worker/maps" && grep -q "$SO" "/proc/$worker/maps"
check "the dlock worker runs with libasan and the instrumented dlock.so" $?

"$ROOT/scripts/pg_regress.sh" "$WORK/regress" > "$WORK/regress.log" 2>&1
rc=$?; tail -3 "$WORK/regress.log"
[ $rc -ne 0 ] && cat "$WORK/regress.log"
check "pg_regress" $rc

/usr/bin/python3 "$ROOT/regress/scenarios/run.py" > "$WORK/scen.log" 2>&1; rc=$?
grep -v '^ok' "$WORK/scen.log"
check "scenarios" $rc

FUZZ_SEED=${FUZZ_SEED:-7} /usr/bin/python3 "$HERE/fuzz.py" "$CALLS"
check "fuzz ($CALLS calls)" $?
"$ROOT/scripts/pg_cluster.sh" stop "$WORK/pg"
unset PGHOST PGPORT PGUSER PGDATABASE

RESTART_PORT=${ASAN_RESTART_PORT:-$((PORT + 1))} "$ROOT/regress/restart/run.sh" > "$WORK/restart.log" 2>&1
rc=$?; grep -E '^FAIL|^restart:' "$WORK/restart.log"
check "restart suite" $rc

TORTURE_PORT=${ASAN_TORTURE_PORT:-$((PORT + 2))} TORTURE_PORT2=${ASAN_TORTURE_PORT2:-$((PORT + 3))} \
    "$HERE/run.sh" --quick > "$WORK/torture.log" 2>&1
rc=$?; grep -E '^FAIL|^VIOLATION|^(fuzz|torture|torture-ha|torture-patroni|torture-isolation):|^\|' "$WORK/torture.log"
check "torture, quick (crash, HA and Patroni modes, isolations of the leader)" $rc

# any report fails the run
reports=$(ls "$WORK/reports")
for r in $reports; do echo "--- $r"; head -60 "$WORK/reports/$r"; done
[ -z "$reports" ]
check "no AddressSanitizer or UBSan report" $?

echo "asan: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
