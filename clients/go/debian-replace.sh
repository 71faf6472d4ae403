#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# clients/go/debian-replace.sh [MODULE_DIR] — builds a Go module offline
# against Debian's golang-*-dev packages (/usr/share/gocode/src), in module
# mode: adds to MODULE_DIR/go.mod a `replace` of every module Debian ships
# (its go.mod's module path => its directory), then, for each module the
# build still cannot find (one some dependency's go.mod requires but that
# no package built imports, e.g. pgx's test and logging adapters' modules),
# a `replace` by an empty stand-in module under MODULE_DIR/.debian-stubs.
# Run it after the requires are in go.mod (go mod edit -require=…); it
# builds the module's packages (go build ./...) until nothing is missing.
# Needs GOPROXY=off GOFLAGS=-mod=mod (set here).
set -eu
DIR=${1:-.}
cd "$DIR"
SRC=${DLOCK_GOCODE:-/usr/share/gocode/src}
export GOPROXY=off GOSUMDB=off GOFLAGS=-mod=mod GO111MODULE=on
[ -f go.mod ] || { echo "debian-replace.sh: no go.mod in $PWD" >&2; exit 1; }

have() { grep -q "^replace $1 =>" go.mod; }
find "$SRC" -name go.mod -not -path '*/testdata/*' | sort | while read -r f; do
    m=$(awk '$1 == "module" { print $2; exit }' "$f" | tr -d '"')
    [ -n "$m" ] || continue
    have "$m" || echo "replace $m => $(dirname "$f")" >>go.mod
done
for _ in $(seq 1 100); do
    out=$(go build ./... 2>&1) && exit 0
    # "…requires\n\tmodule@version: module lookup disabled by GOPROXY=off"
    m=$(printf '%s\n' "$out" | grep -o '[^[:space:]]*@[^[:space:]]*: module lookup disabled' |
        head -1 | sed 's/@.*//')
    if [ -z "$m" ] || have "$m"; then
        printf '%s\n' "$out" >&2
        exit 1
    fi
    mkdir -p ".debian-stubs/$m"
    echo "module $m" >".debian-stubs/$m/go.mod"
    echo "replace $m => ./.debian-stubs/$m" >>go.mod
done
echo "debian-replace.sh: too many missing modules" >&2
exit 1
