#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# clients/go/test.sh — the Go client's tests against real servers:
# PostgreSQL 15 with dlock (through pgx and lib/pq), pgbouncer in transaction
# mode with 2 server connections, MariaDB with the dlock plugin
# (clients/testenv.sh; ports 5582, 6582, 3482).
#
# Builds offline in module mode (GOPROXY=off) against the Debian packages
# under /usr/share/gocode (debian-replace.sh); no GOPATH step. Last line:
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

# Go as root on a fresh machine: no HOME, no network. Module mode
# throughout, no GOPATH step: the package's own module (go.mod) is used by
# the tests through a workspace with a second module that requires the
# three drivers, and by the docs' quick start (below) through `replace`;
# the drivers resolve to Debian's packaged sources (debian-replace.sh).
export GO111MODULE=on GOFLAGS= GOPROXY=off GOSUMDB=off GOENV=off GOTOOLCHAIN=local
export GOPATH="$TMP/gopath" GOCACHE=/tmp/dlock-go-cache GOWORK=off
mkdir -p "$GOCACHE" "$TMP/gopath"
# the versions Debian 12 packages (a replaced module's version is nominal)
DRIVERS="github.com/jackc/pgx/v4@v4.15.0 github.com/lib/pq@v1.10.7 github.com/go-sql-driver/mysql@v1.5.0"

deps_failed=0
mkdir -p "$TMP/deps"
(
    cd "$TMP/deps" &&
    go mod init dlock-test/deps 2>/dev/null &&
    for m in $DRIVERS; do go mod edit -require="$m" || exit 1; done &&
    printf 'package deps\n\nimport (\n\t_ "github.com/go-sql-driver/mysql"\n\t_ "github.com/jackc/pgx/v4/stdlib"\n\t_ "github.com/lib/pq"\n)\n' >deps.go &&
    "$HERE/debian-replace.sh" .
) || deps_failed=1
printf 'go 1.19\n\nuse (\n\t"%s"\n\t"%s"\n)\n' "$HERE" "$TMP/deps" >"$TMP/go.work"  # quoted: a checkout path may hold a space

cd "$HERE" || exit 1
GOWORK="$TMP/go.work" go test -v -count=1 -timeout 600s . 2>&1 | tee "$TMP/go-test.log"
rc=${PIPESTATUS[0]}

passed=$(grep -c -- '--- PASS' "$TMP/go-test.log")
failed=$(grep -c -- '--- FAIL' "$TMP/go-test.log")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
    failed=1        # go test failed without a failing test: build error, panic, timeout
fi
failed=$((failed + deps_failed))

# The quick start of docs/clients.md's Go section, verbatim: the shell lines
# between <!-- go-quickstart:begin/end --> run in a fresh module (with DLOCK
# set to this checkout), the Go program is its main.go, and it must take the
# lock on the test server and print its token.
quickstart() {
    local doc="$ROOT/docs/clients.md" app="$TMP/app" block
    block=$(sed -n '/<!-- go-quickstart:begin -->/,/<!-- go-quickstart:end -->/p' "$doc")
    [ -n "$block" ] || { echo "quickstart: no markers in $doc" >&2; return 1; }
    mkdir -p "$app" && cd "$app" || return 1
    go mod init example.com/app 2>/dev/null || return 1
    printf '%s\n' "$block" | awk '/^```sh$/ { on = 1; next } /^```$/ { on = 0 } on' >quickstart.sh
    printf '%s\n' "$block" | awk '/^```go$/ { on = 1; next } /^```$/ { on = 0 } on' >main.go
    [ -s quickstart.sh ] && [ -s main.go ] || { echo "quickstart: no sh or go block" >&2; return 1; }
    echo "--- quickstart.sh"; cat quickstart.sh
    DLOCK="$ROOT" bash -eu quickstart.sh || return 1
    # what `go get github.com/jackc/pgx/v4/stdlib` does with a network
    go mod edit -require=github.com/jackc/pgx/v4@v4.15.0 || return 1
    "$HERE/debian-replace.sh" . || return 1
    # (go.mod quotes a path with a space)
    grep -qxF -e "replace github.com/dlock/dlock/clients/go => $ROOT/clients/go" \
        -e "replace github.com/dlock/dlock/clients/go => \"$ROOT/clients/go\"" go.mod ||
        { echo "quickstart: the replace did not point at this checkout" >&2; return 1; }
    go build -o app . || return 1
    local out
    out=$(DATABASE_URL="host=$DLOCK_TEST_PG_HOST port=$DLOCK_TEST_PG_PORT user=postgres dbname=postgres" ./app) || return 1
    echo "$out"
    printf '%s\n' "$out" | grep -Eq '^orders/42 held, token [1-9][0-9]*$'
}
if quickstart >"$TMP/quickstart.log" 2>&1; then
    echo "--- PASS: docs quick start (docs/clients.md, verbatim)"
    passed=$((passed + 1))
else
    cat "$TMP/quickstart.log"
    echo "--- FAIL: docs quick start (docs/clients.md, verbatim)"
    failed=$((failed + 1))
fi

summary "$passed" "$failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
