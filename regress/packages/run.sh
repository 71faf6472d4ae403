#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# regress/packages/run.sh — this system's Debian packages (make deb) on this
# system: postgresql-NN-dlock (NN: this system's PostgreSQL, from
# DLOCK_PG_MAJOR or pg_config), dlock (the command) and mariadb-plugin-dlock
# are built, installed with dpkg -i, used in a fresh PostgreSQL cluster
# (CREATE EXTENSION, a lock, the dlock command) and a fresh MariaDB started
# with the package's .cnf (dlock-mysql-install, a lock), then purged: every
# file gone.  make check runs it on the host, make matrix in each system.  At the
# end `make install` puts the tree's build back (the purge removed the
# files the other suites use).  Ports PACKAGES_PG_PORT (5593) and
# PACKAGES_MY_PORT (3493); servers stopped by pid on exit, also on failure.
# Last line: "packages: N passed, M failed".
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PG_PORT=${PACKAGES_PG_PORT:-5593}
MY_PORT=${PACKAGES_MY_PORT:-3493}
PGV=${DLOCK_PG_MAJOR:-$("${PG_CONFIG:-pg_config}" --version 2>/dev/null | sed -E 's/[^0-9]*([0-9]+).*/\1/')}
PGV=${PGV:-15}
PGPKG=postgresql-$PGV-dlock
DIR=$(mktemp -d /tmp/dlock-packages.XXXXXX)
chmod 755 "$DIR"
passed=0; failed=0
ok()   { echo "ok   $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1"; failed=$((failed + 1)); }
check() { local what=$1; shift; if "$@"; then ok "$what"; else fail "$what"; fi; }
MYPID=
cleanup() {
    "$ROOT/scripts/pg_cluster.sh" stop "$DIR/pg" >/dev/null 2>&1
    if [ -n "$MYPID" ] && kill -0 "$MYPID" 2>/dev/null; then
        kill "$MYPID"; for _ in $(seq 100); do kill -0 "$MYPID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$MYPID" 2>/dev/null
    fi
    # never leave this machine with the packages instead of the tree's build
    if dpkg-query -W -f='${Status}' "$PGPKG" dlock mariadb-plugin-dlock 2>/dev/null | grep -q "install ok"; then
        dpkg --purge "$PGPKG" dlock mariadb-plugin-dlock >/dev/null 2>&1
    fi
    make -s -C "$ROOT/pg_ext" install >/dev/null 2>&1
    make -s -C "$ROOT/clients/cli" install >/dev/null 2>&1
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

summary() { echo "packages: $passed passed, $failed failed"; [ "$failed" -eq 0 ]; }

# 1. build
if "$ROOT/scripts/deb.sh" > "$DIR/deb.log" 2>&1; then
    ok "make deb: $(cd "$ROOT/deb" && ls "$PGPKG"_*.deb dlock_*.deb mariadb-plugin-dlock_*.deb | tr '\n' ' ')"
else
    tail -20 "$DIR/deb.log"; fail "make deb"; summary; exit 1
fi
PGDEB=$(ls "$ROOT"/deb/"$PGPKG"_*_*.deb | grep -v dbgsym | head -1)
CLIDEB=$(ls "$ROOT"/deb/dlock_*_*.deb | grep -v dbgsym | head -1)
MYDEB=$(ls "$ROOT"/deb/mariadb-plugin-dlock_*_*.deb | grep -v dbgsym | head -1)

# 2. install
if dpkg -i "$PGDEB" "$CLIDEB" "$MYDEB" > "$DIR/dpkg.log" 2>&1; then ok "dpkg -i the three packages"
else cat "$DIR/dpkg.log"; fail "dpkg -i the three packages"; summary; exit 1; fi
check "$PGPKG owns the library, the control file and the scripts; dlock owns /usr/bin/dlock and its man page" \
    eval 'dpkg -L "$PGPKG" | grep -qx /usr/lib/postgresql/$PGV/lib/dlock.so &&
          dpkg -L "$PGPKG" | grep -qx /usr/share/postgresql/$PGV/extension/dlock.control &&
          dpkg -L "$PGPKG" | grep -qx /usr/share/postgresql/$PGV/extension/dlock--1.2.sql &&
          dpkg -L "$PGPKG" | grep -qx /usr/share/postgresql/$PGV/extension/dlock--1.1--1.2.sql &&
          dpkg -L dlock | grep -qx /usr/bin/dlock &&
          dpkg -L dlock | grep -qx /usr/share/man/man1/dlock.1.gz'
check "mariadb-plugin-dlock owns the plugin, its .cnf and dlock-mysql-install" \
    eval 'dpkg -L mariadb-plugin-dlock | grep -qx /usr/lib/mysql/plugin/dlock_udf.so &&
          dpkg -L mariadb-plugin-dlock | grep -qx /etc/mysql/mariadb.conf.d/50-dlock.cnf &&
          dpkg -L mariadb-plugin-dlock | grep -qx /usr/sbin/dlock-mysql-install'

# 3. PostgreSQL: a fresh cluster with the packaged extension
if "$ROOT/scripts/pg_cluster.sh" start "$DIR/pg" "$PG_PORT" > "$DIR/pg.log" 2>&1; then
    ok "a fresh cluster: CREATE EXTENSION dlock from the package"
    psqlq() { psql -X -qAt -h "$DIR/pg" -p "$PG_PORT" -U postgres -d postgres -c "$1" 2>&1; }
    check "the packaged version is 1.2" test "$(psqlq "SELECT extversion FROM pg_extension WHERE extname = 'dlock'")" = 1.2
    check "a lock: acquire, the view, release" \
        test "$(psqlq "SELECT dlock_acquire('pkg', owner => 'pkg-key', ttl => '60 s') > 0")$(psqlq "SELECT count(*) FROM dlock.locks WHERE name = 'pkg'")$(psqlq "SELECT dlock_release('pkg', 'pkg-key')")" = "t1t"
    check "the packaged dlock command runs a command under a lock" \
        eval '/usr/bin/dlock run --dsn "host=$DIR/pg port=$PG_PORT user=postgres dbname=postgres" pkg/cmd -- sh -c "test \"\$DLOCK_TOKEN\" -gt 0"'
else
    cat "$DIR/pg.log"; fail "a fresh cluster: CREATE EXTENSION dlock from the package"
fi
"$ROOT/scripts/pg_cluster.sh" stop "$DIR/pg" >/dev/null 2>&1

# 4. MariaDB: a fresh server that reads only the package's .cnf
mkdir -p "$DIR/my"; chown mysql: "$DIR/my"
if mariadb-install-db --no-defaults --user=mysql --datadir="$DIR/my/data" \
        --auth-root-authentication-method=socket --skip-test-db > "$DIR/my/install.log" 2>&1; then
    DLOCK_CNF="$DIR/my/dlock.cnf" setsid mariadbd --defaults-file=/etc/mysql/mariadb.conf.d/50-dlock.cnf \
        --user=mysql --datadir="$DIR/my/data" --socket="$DIR/my/sock" --port="$MY_PORT" \
        --bind-address=127.0.0.1 --pid-file="$DIR/my/mariadbd.pid" --log-error="$DIR/my/server.log" \
        --skip-name-resolve < /dev/null > /dev/null 2>&1 &
    MYPID=$!
    for _ in $(seq 300); do
        mariadb-admin -S "$DIR/my/sock" -u root ping > /dev/null 2>&1 && break
        sleep 0.1
    done
    myq() { mariadb -S "$DIR/my/sock" -u root -NBe "$1" 2>&1; }
    check "MariaDB with the package's .cnf loads the plugin" \
        test "$(myq "SELECT PLUGIN_STATUS FROM information_schema.PLUGINS WHERE PLUGIN_NAME = 'dlock'")" = ACTIVE
    if DLOCK_CNF="$DIR/my/dlock.cnf" /usr/sbin/dlock-mysql-install -S "$DIR/my/sock" -u root > "$DIR/my/dlinstall.log" 2>&1; then
        ok "dlock-mysql-install from the package"
    else
        cat "$DIR/my/dlinstall.log"; fail "dlock-mysql-install from the package"
    fi
    v=
    for _ in $(seq 50); do
        v=$(myq "SELECT dlock_acquire('pkg', 2) > 0, dlock_release('pkg'), dlock_info() LIKE 'dlock 1.2 %'")
        [ "$v" = "$(printf '1\t1\t1')" ] && break
        sleep 0.2
    done
    check "a lock on MariaDB: acquire, release, dlock_info 1.2 ($v)" test "$v" = "$(printf '1\t1\t1')"
else
    cat "$DIR/my/install.log"; fail "mariadb-install-db"
fi
if [ -n "$MYPID" ]; then
    kill "$MYPID"; for _ in $(seq 300); do kill -0 "$MYPID" 2>/dev/null || break; sleep 0.1; done
    check "MariaDB stopped by its pid" eval '! kill -0 "$MYPID" 2>/dev/null'
    MYPID=
fi

# 5. purge: every file gone
if dpkg --purge "$PGPKG" dlock mariadb-plugin-dlock > "$DIR/purge.log" 2>&1; then ok "dpkg --purge the three packages"
else cat "$DIR/purge.log"; fail "dpkg --purge the three packages"; fi
check "nothing of them left: library, control file, command, plugin, .cnf" \
    eval '! test -e /usr/lib/postgresql/$PGV/lib/dlock.so && ! test -e /usr/share/postgresql/$PGV/extension/dlock.control &&
          ! test -e /usr/bin/dlock && ! test -e /usr/lib/mysql/plugin/dlock_udf.so &&
          ! test -e /etc/mysql/mariadb.conf.d/50-dlock.cnf && ! test -e /usr/sbin/dlock-mysql-install'

summary
