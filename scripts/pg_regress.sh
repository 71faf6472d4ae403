#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/pg_regress.sh OUTDIR [TEST...] — the pg_regress suite (regress/sql)
# against a running cluster with dlock, and its count, for `make check` and
# `make matrix` alike.
#
# The cluster is $PGHOST/$PGPORT (user postgres); dlock lives in database
# postgres only (dlock.database), where the extension was created, so the
# tests run there (--use-existing), not in a fresh database.  pg_regress is
# the one of $PG_CONFIG (default pg_config).  Results and diffs go to OUTDIR.
# Prints pg_regress's output, the diffs of failed tests, and last
# "pg_regress: N passed, M failed"; exits non-zero on any failure.
#
# pg_regress reports each test in one of two formats:
#   15:   "test admin                         ... ok          26 ms"
#         "test api                           ... FAILED      31 ms"
#   16+:  TAP, "ok 1         - admin                                     26 ms"
#         "not ok 2     - api                                       31 ms"
# both are counted; a test that reported neither (pg_regress could not
# connect, or died) counts as failed.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${1:?usage: pg_regress.sh OUTDIR [TEST...]}
shift
case "$OUT" in /*) ;; *) OUT=$PWD/$OUT ;; esac
mkdir -p "$OUT"
LOG=$OUT/pg_regress.log

if [ $# -gt 0 ]; then
    tests="$*"
else
    tests=$(cd "$ROOT/regress/sql" && ls ./*.sql | sed 's|^\./||; s/\.sql$//' | sort)
fi
ntests=$(echo $tests | wc -w)

PG_REGRESS=$(dirname "$("${PG_CONFIG:-pg_config}" --pgxs)")/../test/regress/pg_regress
if [ ! -x "$PG_REGRESS" ]; then
    echo "pg_regress.sh: no pg_regress at $PG_REGRESS (postgresql-server-dev-NN?)"
    echo "pg_regress: 0 passed, $ntests failed"
    exit 1
fi

# shellcheck disable=SC2086
(cd "$ROOT" && "$PG_REGRESS" --inputdir=regress --outputdir="$OUT" \
    --host="${PGHOST:-/tmp}" --port="${PGPORT:-5432}" --user=postgres \
    --use-existing --dbname=postgres $tests) > "$LOG" 2>&1
rc=$?
cat "$LOG"

# 15: "test NAME ... ok" (or "NAME ... ok" inside a parallel group);
# 16+: "ok N - NAME"; failures "... FAILED" / "not ok N - NAME"
ok=$(grep -cE '\.\.\. ok( |$)|^ok [0-9]+ ' "$LOG")
bad=$(grep -cE '\.\.\. (FAILED|failed)|^not ok [0-9]+ ' "$LOG")
[ $((ok + bad)) -lt "$ntests" ] && bad=$((ntests - ok))
[ "$rc" -ne 0 ] && [ "$bad" -eq 0 ] && bad=1
if [ "$bad" -gt 0 ] && [ -s "$OUT/regression.diffs" ]; then
    cat "$OUT/regression.diffs"
fi
echo "pg_regress: $ok passed, $bad failed"
[ "$bad" -eq 0 ]
