#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# clients/go/test.sh — the Go client's tests against real servers:
# PostgreSQL 15 with dlock (through pgx and lib/pq), pgbouncer in transaction
# mode with 2 server connections, MariaDB with the dlock plugin
# (clients/testenv.sh; ports 5582, 6582, 3482).
#
# Builds offline: GOPATH mode (GO111MODULE=off) against the Debian packages
# under /usr/share/gocode; GOPROXY=off. Last line:
#   clients-go: N passed, M failed
# (Go test functions and subtests, from `go test -v`); exit status non-zero
# on any failure or when go test did not run.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)

summary() { echo "clients-go: $1 passed, $2 failed"; }

"$ROOT/scripts/deps.sh" golang-go golang-github-jackc-pgx-v4-dev \
    golang-github-lib-pq-dev golang-github-go-sql-driver-mysql-dev >/dev/null ||
    { echo "clients/go: installing dependencies failed" >&2; summary 0 1; exit 1; }

# the extension and the plugin (built once; `make check` does it too)
if [ ! -f "$(pg_config --sharedir)/extension/dlock.control" ]; then
    make -C "$ROOT" install >/dev/null || { summary 0 1; exit 1; }
fi
if [ ! -f "$ROOT/mysql_udf/dlock_udf.so" ]; then
    make -C "$ROOT/mysql_udf" >/dev/null || { summary 0 1; exit 1; }
fi

TMP=$(mktemp -d /tmp/dlock-go.XXXXXX)
chmod 755 "$TMP"
cleanup() {
    "$ROOT/clients/testenv.sh" stop "$TMP/srv" >/dev/null 2>&1 || true
    rm -rf "$TMP"
}
trap cleanup EXIT

if ! "$ROOT/clients/testenv.sh" start "$TMP/srv" 5582 6582 3482 >"$TMP/testenv.log" 2>&1; then
    cat "$TMP/testenv.log" >&2
    echo "clients/go: starting the servers failed" >&2
    summary 0 1
    exit 1
fi
set -a
. "$TMP/srv/env"
set +a

# Go as root on a fresh machine: no HOME, no network
export GO111MODULE=off GOFLAGS= GOPROXY=off GOSUMDB=off GOENV=off GOTOOLCHAIN=local
export GOPATH="$TMP/gopath:/usr/share/gocode"
export GOCACHE=/tmp/dlock-go-cache
mkdir -p "$GOCACHE" "$TMP/gopath"

cd "$HERE" || exit 1
go test -v -count=1 -timeout 600s . 2>&1 | tee "$TMP/go-test.log"
rc=${PIPESTATUS[0]}

passed=$(grep -c -- '--- PASS' "$TMP/go-test.log")
failed=$(grep -c -- '--- FAIL' "$TMP/go-test.log")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1        # go test failed without a failing test: build error, panic, timeout
fi
summary "$passed" "$failed"
[ "$rc" -eq 0 ] && [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
