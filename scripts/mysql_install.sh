#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/mysql_install.sh - install dlock into a running MariaDB server.
#
#   scripts/mysql_install.sh [mariadb client options]          (as root)
#
# 1. the plugin's own store account 'dlock_store'@'localhost', with a new
#    random password and only what the lock store needs: SELECT, INSERT,
#    UPDATE and DELETE on `dlock`, and PROCESS (after a failure the lock
#    manager looks for the connections of session holders in PROCESSLIST);
# 2. its credentials file, $DLOCK_CNF (default /etc/mysql/dlock.cnf), mode
#    0600 and owned by the operating-system user the server runs as.  The
#    plugin refuses a file others can read.  A server started with
#    DLOCK_CNF in its environment reads that path instead;
# 3. sql/mysql/install.sql: the schema `dlock`, the functions, the roles
#    dlock_user / dlock_monitor / dlock_admin and the reaper event (last:
#    the reaper's first run needs the account).
#
# $DLOCK_INSTALL_SQL runs another install script instead (the upgrade test
# installs a previous release's, sql/mysql/history/).
# The client is $DLOCK_CLIENT (default "mariadb", split into words), given
# the options; it must reach the server as an account that may create
# users, roles and functions (root over the socket on Debian).  Running it
# again is safe: locks and tokens are kept, the account gets a new password.
set -euo pipefail

ROOT=$(cd "$(dirname "$(readlink -f "$0")")/.." && pwd)
CNF=${DLOCK_CNF:-/etc/mysql/dlock.cnf}
# shellcheck disable=SC2206
CLIENT=(${DLOCK_CLIENT:-mariadb})

client() { "${CLIENT[@]}" "$@"; }

# the server's operating-system user owns the credentials file
pid_file=$(client "$@" -NBe 'SELECT @@pid_file')
datadir=$(client "$@" -NBe 'SELECT @@datadir')
case "$pid_file" in /*) ;; *) pid_file="$datadir/$pid_file" ;; esac
pid=$(cat "$pid_file" 2>/dev/null || true)
server_user=
if [ -n "$pid" ] && [ -d "/proc/$pid" ]; then
    server_user=$(stat -c %U "/proc/$pid")
fi
if [ -z "$server_user" ]; then
    echo "mysql_install.sh: cannot find the server's process (pid file $pid_file);" \
         "is the server on this machine?" >&2
    exit 1
fi

# 48 hex digits from the kernel's CSPRNG: nothing a user supplied
password=$(od -An -N24 -tx1 /dev/urandom | tr -d ' \n')

mkdir -p "$(dirname "$CNF")"
tmp=$(mktemp "$CNF.XXXXXX")
trap 'rm -f "$tmp"' EXIT
chmod 600 "$tmp"
printf '# dlock: the lock store account (scripts/mysql_install.sh)\n[dlock]\nuser = dlock_store\npassword = %s\n' \
    "$password" > "$tmp"
chown "$server_user" "$tmp"

# the password travels on stdin, never on a command line
client "$@" <<SQL
CREATE USER IF NOT EXISTS 'dlock_store'@'localhost' IDENTIFIED BY '$password';
ALTER USER 'dlock_store'@'localhost' IDENTIFIED BY '$password';
REVOKE ALL PRIVILEGES, GRANT OPTION FROM 'dlock_store'@'localhost';
GRANT SELECT, INSERT, UPDATE, DELETE ON dlock.* TO 'dlock_store'@'localhost';
GRANT PROCESS ON *.* TO 'dlock_store'@'localhost';
SQL
mv -f "$tmp" "$CNF"
trap - EXIT
client "$@" < "${DLOCK_INSTALL_SQL:-$ROOT/sql/mysql/install.sql}"
echo "dlock installed; store account 'dlock_store'@'localhost', credentials in $CNF (owner $server_user, mode 0600)"
