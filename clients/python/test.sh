#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# clients/python/test.sh — the Python client's tests (test_dlock.py) on real
# servers: a throwaway PostgreSQL with dlock, pgbouncer in transaction mode
# with 2 server connections, and a throwaway MariaDB with the plugin
# (clients/testenv.sh), on private ports CLIENTS_PY_PORTS ("5580 6580
# 3480": PostgreSQL, pgbouncer, MariaDB); stops them on exit, also on
# failure.  Needs `make install` done.  The client is used as installed:
# the install lines of docs/clients.md's Python section (between its
# python-snippet markers) run as they are in a copy of clients/python —
# a wheel built offline with Debian's python3-build, installed into a venv
# — and test_dlock.py runs with that venv's python, without the source
# directory on sys.path (-P).  Last line: "clients-python: N passed, M
# failed"; exits non-zero on any failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
read -r PG_PORT BOUNCER_PORT MY_PORT <<< "${CLIENTS_PY_PORTS:-5580 6580 3480}"
die() { echo "FAIL $1"; echo "clients-python: 0 passed, 1 failed"; exit 1; }

"$ROOT/scripts/deps.sh" python3-psycopg python3-psycopg2 python3-psycopg-pool \
    python3-mysqldb python3-pymysql mariadb-server mariadb-client libmariadb-dev \
    python3-build python3-setuptools python3-venv python3-pip >/dev/null ||
    die "the drivers and servers installed"
make -s -C "$ROOT/mysql_udf" all >/dev/null || die "the MariaDB plugin built"

DIR=$(mktemp -d /tmp/dlock-clients-py.XXXXXX)
chmod 755 "$DIR"
PYPID=
cleanup() {
    [ -n "$PYPID" ] && kill -TERM "$PYPID" 2>/dev/null && wait "$PYPID" 2>/dev/null
    "$ROOT/clients/testenv.sh" stop "$DIR" >/dev/null 2>&1
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # through the EXIT trap

"$ROOT/clients/testenv.sh" start "$DIR" "$PG_PORT" "$BOUNCER_PORT" "$MY_PORT" >"$DIR/start.log" 2>&1 ||
    { cat "$DIR/start.log"; die "servers started (PostgreSQL $PG_PORT, pgbouncer $BOUNCER_PORT, MariaDB $MY_PORT)"; }
set -a; . "$DIR/env"; set +a

# the install lines of the docs, as they are, in a copy of clients/python
# (the build leaves build/, dist/ and venv/ there); Debian's python3 first
mkdir -p "$DIR/pkg/clients"
cp -r "$HERE" "$DIR/pkg/clients/python"
rm -rf "$DIR/pkg/clients/python/"{build,dist,venv,*.egg-info}
/usr/bin/python3 - "$ROOT/docs/clients.md" sh > "$DIR/install.sh" <<'PY' || die "the install lines found in docs/clients.md"
import re, sys
text = open(sys.argv[1]).read()
part = text.split("<!-- python-snippet:begin -->")[1].split("<!-- python-snippet:end -->")[0]
print(re.search(r"```%s\n(.*?)```" % sys.argv[2], part, re.S).group(1))
PY
(cd "$DIR/pkg" && PATH=/usr/bin:/bin bash -e "$DIR/install.sh") > "$DIR/install.log" 2>&1 ||
    { cat "$DIR/install.log"; die "docs/clients.md's install lines: the wheel built offline and installed into a venv"; }
VENV_PY=$DIR/pkg/clients/python/venv/bin/python
# in the background, so that a signal runs the traps at once; -P: not the
# source directory (the script's) on sys.path, so dlock is the installed one
"$VENV_PY" -P -u "$HERE/test_dlock.py" "$DIR" & PYPID=$!
wait "$PYPID"; rc=$?; PYPID=
exit $rc
