#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# regress/mysql/run.sh - build, install and test the dlock MariaDB plugin.
#
# Installs missing Debian packages, builds mysql_udf/ and installs
# dlock_udf.so into the server's plugin_dir, then runs this mysql-test
# suite with mariadb-test-run on a throwaway server (temporary --vardir,
# private socket, loopback only).  The system MariaDB service is neither
# used nor touched.  The last line printed is "mysql: N passed, M failed";
# the exit status is non-zero on any failure.
#
# Environment: MTR_EXTRA="..." adds options to mariadb-test-run (e.g. a
# single test name: MTR_EXTRA=kill).
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# mariadb-test-run's directory: /usr/share/mysql/mysql-test up to 10.11,
# /usr/share/mariadb/mariadb-test from 11.x on (Debian's mariadb-test);
# $MTR_DIR chooses another
MTR_DIR=${MTR_DIR:-}
if [ -z "$MTR_DIR" ]; then
	for d in /usr/share/mysql/mysql-test /usr/share/mariadb/mariadb-test; do
		[ -e "$d/mariadb-test-run" ] && { MTR_DIR=$d; break; }
	done
fi
BASE=
VARDIR=
LOG=

finish() {
	local passed=$1 failed=$2
	echo "mysql: $passed passed, $failed failed"
	[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
	exit $?
}

# Stop any server mariadb-test-run left behind (by pid), remove the vardir.
cleanup() {
	if [ -n "$VARDIR" ] && [ -d "$VARDIR" ]; then
		for pidfile in "$VARDIR"/run/*.pid "$VARDIR"/*/run/*.pid; do
			[ -f "$pidfile" ] || continue
			pid=$(cat "$pidfile" 2>/dev/null)
			if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
				kill "$pid" 2>/dev/null
				for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
				kill -9 "$pid" 2>/dev/null
			fi
		done
		[ -n "${KEEP_VARDIR:-}" ] || rm -rf "$VARDIR"
	fi
	[ -n "$BASE" ] && [ -z "${KEEP_VARDIR:-}" ] && rm -rf "$BASE"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# 1. packages
need=()
for p in mariadb-server mariadb-client libmariadb-dev libmariadbd-dev mariadb-test python3-mysqldb gcc make; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
	echo "installing: ${need[*]}"
	apt-get update -qq &&
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null ||
		{ echo "package installation failed" >&2; finish 0 1; }
fi

# 2. build and install into the server's plugin_dir
make -s -C "$ROOT/mysql_udf" all install || { echo "build failed" >&2; finish 0 1; }

# 3. the suite
# mariadb-test-run cuts a --suite path at its first "-", and the tests pass
# DLOCK_SQL_DIR to a shell unquoted: reach the clone, wherever it lives
# (a path with hyphens or spaces), through links in a plain temporary path
BASE=$(mktemp -d /tmp/dlockmtr.XXXXXX)
ln -s "$HERE" "$BASE/suite"
ln -s "$ROOT/sql/mysql" "$BASE/sql"
ln -s "$ROOT/scripts/mysql_install.sh" "$BASE/mysql_install.sh"
VARDIR=$BASE/var
LOG="$BASE/mtr.log"
export DLOCK_SQL_DIR="$BASE/sql"
export DLOCK_SUITE="$BASE/suite"	# its helper scripts (include/rss.sh)
# the install script and the test server share the store's credentials file
export DLOCK_INSTALL="$BASE/mysql_install.sh"
export DLOCK_CNF="$BASE/dlock.cnf"


[ -n "$MTR_DIR" ] || { echo "no mariadb-test-run (package mariadb-test)" >&2; finish 0 1; }
cd "$MTR_DIR" || finish 0 1
# shellcheck disable=SC2086
perl ./mariadb-test-run --suite="$BASE/suite" --vardir="$VARDIR" \
	--mysqld-env="DLOCK_CNF=$DLOCK_CNF" \
	--force --max-test-fail=0 --retry=0 --parallel=1 \
	--testcase-timeout=5 --suite-timeout=30 ${MTR_EXTRA:-} 2>&1 | tee "$LOG"
rc=${PIPESTATUS[0]}

passed=$(grep -cE '\[ pass \]' "$LOG")
failed=$(grep -cE '\[ (fail|retry-fail) \]' "$LOG")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then
	failed=1
fi
rm -f "$LOG"
finish "$passed" "$failed"
