#!/bin/bash
# regress/torture/run.sh [--quick] — `make torture`: the API fuzzer, then the
# torture harness, on their own throwaway cluster (fsync on).  Quick: 5,000
# fuzz calls, 20 s with 64 clients (part of make check); full: 100,000 calls,
# TORTURE_SECONDS (default 600) with TORTURE_CLIENTS (64).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PORT=${TORTURE_PORT:-5493}
DIR=$(mktemp -d /tmp/dlock-torture.XXXXXX)
SECONDS_=${TORTURE_SECONDS:-600}; CLIENTS=${TORTURE_CLIENTS:-64}; CALLS=100000
[ "${1:-}" == "--quick" ] && { SECONDS_=20; CALLS=5000; }
cleanup() { "$ROOT/scripts/pg_cluster.sh" stop "$DIR"; rm -rf "$DIR"; }
trap cleanup EXIT
PG_FSYNC=on "$ROOT/scripts/pg_cluster.sh" start "$DIR" "$PORT" ||
    { echo "torture: 0 passed, 1 failed"; exit 1; }
export PGHOST=$DIR PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
/usr/bin/python3 "$HERE/fuzz.py" "$CALLS"; frc=$?
/usr/bin/python3 "$HERE/torture.py" "$SECONDS_" "$CLIENTS"; rc=$?
[ $frc -ne 0 ] && rc=$frc
if grep -qE 'PANIC|server process .* was terminated by signal' "$DIR/server.log"; then
    echo "FAIL the server log shows a crash:"; grep -E 'PANIC|terminated by signal' "$DIR/server.log" | head
    echo "torture: 0 passed, 1 failed"; exit 1
fi
exit $rc
