#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# bench/coordgo/build.sh OUT — builds bench/coordgo (section 8's Go driver:
# pgx for dlock, etcd 3.4's clientv3 + concurrency for etcd) into the
# binary OUT, offline, against Debian's packaged Go sources
# (/usr/share/gocode: golang-github-jackc-pgx-v4-dev, golang-etcd-server-dev
# and what they depend on).
#
# Module mode first, the way clients/go builds: a copy of this module in a
# scratch dir, clients/go/debian-replace.sh adds a `replace` for every module
# Debian ships with a go.mod (and empty stand-ins for modules only some
# go.mod requires). Three of etcd's imports come from Debian directories
# without a go.mod of that path (github.com/coreos/go-semver and
# github.com/coreos/pkg have none; github.com/coreos/go-systemd's says
# /v22, etcd 3.4 imports the path without it): for each such import this
# script makes a shadow module — a go.mod of the repository's path and
# symlinks to the Debian directory's entries — and replaces the module by
# it. If module mode still fails, GOPATH mode (GO111MODULE=off,
# GOPATH=scratch:/usr/share/gocode), which is how Debian builds etcd itself
# (COORDGO_MODE=gopath: only that).
set -eu
OUT=${1:?usage: build.sh OUT}
case "$OUT" in /*) ;; *) OUT=$PWD/$OUT ;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SRC=${DLOCK_GOCODE:-/usr/share/gocode/src}
TMP=$(mktemp -d /tmp/dlock-coordgo.XXXXXX)
trap 'rm -rf "$TMP"' EXIT

export GOPROXY=off GOSUMDB=off GOENV=off GOTOOLCHAIN=local GOWORK=off
export GOCACHE=${GOCACHE:-/tmp/dlock-go-cache} GOPATH=$TMP/gopath
mkdir -p "$GOCACHE" "$GOPATH"

module_mode() {
    local mod=$TMP/mod out f file line imp m sh
    mkdir -p "$mod"
    cp "$HERE/go.mod" "$HERE"/*.go "$mod/"
    cd "$mod"
    export GO111MODULE=on GOFLAGS=-mod=mod
    for _ in $(seq 1 30); do
        out=$("$ROOT/clients/go/debian-replace.sh" . 2>&1) && break
        # "/usr/share/gocode/src/…/x.go:23:2: module lookup disabled by GOPROXY=off"
        f=$(printf '%s\n' "$out" | grep -m1 -o '^[^ ]*\.go:[0-9]*:[0-9]*: module lookup disabled' || true)
        [ -n "$f" ] || { printf '%s\n' "$out" >&2; return 1; }
        file=${f%%:*}; line=$(echo "$f" | cut -d: -f2)
        imp=$(sed -n "${line}p" "$file" | grep -o '"[^"]*"' | tr -d '"')
        case $imp in
            github.com/*|gitlab.com/*|golang.org/x/*|go.etcd.io/*) m=$(echo "$imp" | cut -d/ -f1-3) ;;
            *) m=$(echo "$imp" | cut -d/ -f1-2) ;;
        esac
        [ -d "$SRC/$m" ] && ! grep -q "=> ./.debian-shadow/$m\$" go.mod ||
            { echo "build.sh: cannot resolve $imp (from $file)" >&2; return 1; }
        echo "build.sh: $imp: shadow module $m => $SRC/$m" >&2
        sh=.debian-shadow/$m
        mkdir -p "$sh"
        for e in "$SRC/$m"/*; do
            [ "$(basename "$e")" = go.mod ] || ln -sfn "$e" "$sh/"
        done
        echo "module $m" >"$sh/go.mod"
        go mod edit -dropreplace="$m" -replace="$m=./$sh"
    done
    go build -o "$OUT" .
}

gopath_mode() {
    local src=$TMP/gopath/src/coordgo
    mkdir -p "$src"
    cp "$HERE"/*.go "$src/"
    cd "$src"
    GO111MODULE=off GOFLAGS= GOPATH="$TMP/gopath:${SRC%/src}" go build -o "$OUT" .
}

if [ "${COORDGO_MODE:-}" != gopath ] && (module_mode); then
    echo "coordgo: built in module mode" >&2
elif (gopath_mode); then
    echo "coordgo: built in GOPATH mode" >&2
else
    echo "coordgo: build failed" >&2
    exit 1
fi
