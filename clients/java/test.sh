#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# clients/java/test.sh — the Java client's tests (JUnit 5, Debian's junit5)
# against real servers (clients/testenv.sh): PostgreSQL through pgjdbc,
# MariaDB through MariaDB Connector/J, pgbouncer in transaction mode with 2
# server connections; private ports CLIENTS_JAVA_PORTS ("5584 6584 3484").
# The jar is built as docs/clients.md says (its java-install block: the
# packages it names installed, its mvn line run verbatim, offline against
# Debian's /usr/share/maven-repo), and the tests run against that jar; the
# sources are also compiled with javac -Xlint:all -Werror. No downloads.
# Last line: "clients-java: N passed, M failed"; exits non-zero on any failure.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
read -r PG_PORT BOUNCER_PORT MY_PORT <<< "${CLIENTS_JAVA_PORTS:-5584 6584 3484}"
die() { echo "FAIL $1"; echo "clients-java: 0 passed, 1 failed"; exit 1; }

# the docs' install block: between the java-install markers, in the ```sh fence
INSTALL=$(sed -n '/<!-- java-install/,/<!-- \/java-install -->/p' "$ROOT/docs/clients.md" | sed '1,/^```sh$/d; /^```$/,$d')
[ -n "$INSTALL" ] || die "docs/clients.md has the java-install block"
read -r -a APT <<< "$(grep '^apt-get install ' <<< "$INSTALL" | sed 's/^apt-get install //')"
[ ${#APT[@]} -gt 0 ] || die "the java-install block names its packages"
"$ROOT/scripts/deps.sh" default-jdk-headless libpostgresql-jdbc-java libmariadb-java junit5 \
    mariadb-server mariadb-client "${APT[@]}" >/dev/null || die "the JDK, Maven, the JDBC drivers and junit5 installed"
make -s -C "$ROOT/mysql_udf" all >/dev/null || die "the MariaDB plugin built"

VERSION=$(sed -nE "s/^default_version = '([^']+)'/\1/p" "$ROOT/pg_ext/dlock.control")
POM_VERSION=$(sed -nE '0,/<version>/s|^  <version>([^<]+)</version>|\1|p' "$HERE/pom.xml")
[ -n "$VERSION" ] && [ "$POM_VERSION" = "$VERSION" ] ||
    die "pom.xml's version ($POM_VERSION) is the extension's default_version ($VERSION)"
JAR=$HERE/target/dlock-$VERSION.jar
rm -rf "$HERE/target"
(cd "$ROOT" && grep '^mvn ' <<< "$INSTALL" | bash -e) || die "the jar built offline by the docs' mvn line"
[ -f "$JAR" ] || die "the docs' mvn line made $JAR"
unzip -l "$JAR" | grep -q ' dlock/Election\$Observer.class$' || die "the jar holds the classes"

J=/usr/share/java
DRIVERS=$J/postgresql.jar:$J/mariadb-java-client.jar
LAUNCHER=$J/junit-platform-console-standalone.jar
DIR=$(mktemp -d /tmp/dlock-clients-java.XXXXXX)
chmod 755 "$DIR"
JPID=
cleanup() {
    [ -n "$JPID" ] && kill -TERM "$JPID" 2>/dev/null && wait "$JPID" 2>/dev/null
    "$ROOT/clients/testenv.sh" stop "$DIR/srv" >/dev/null 2>&1
    rm -rf "$DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM  # through the EXIT trap

mkdir -p "$DIR/strict" "$DIR/classes"
javac -Xlint:all -Werror -cp "$J/postgresql.jar" -d "$DIR/strict" "$HERE"/src/dlock/*.java ||
    die "the library compiles (javac -Xlint:all -Werror)"
javac -Xlint:all,-processing -d "$DIR/classes" -cp "$JAR:$DRIVERS:$LAUNCHER" "$HERE"/test/dlock/*.java ||
    die "the tests compile against the jar"

"$ROOT/clients/testenv.sh" start "$DIR/srv" "$PG_PORT" "$BOUNCER_PORT" "$MY_PORT" >"$DIR/start.log" 2>&1 ||
    { cat "$DIR/start.log"; die "servers started (PostgreSQL $PG_PORT, pgbouncer $BOUNCER_PORT, MariaDB $MY_PORT)"; }
set -a; . "$DIR/srv/env"; set +a
export DLOCK_TEST_CLASSPATH="$DIR/classes:$JAR:$DRIVERS:$LAUNCHER"  # for the worker processes
export DLOCK_TEST_JAR=$JAR DLOCK_ROOT=$ROOT

java -jar "$LAUNCHER" --class-path "$DIR/classes:$JAR:$DRIVERS" \
    --select-class dlock.DLockTest --select-class dlock.ReentrantTest \
    --select-class dlock.SemaphoreElectionTest --select-class dlock.ErrorsTest --select-class dlock.DocTest \
    --disable-banner --disable-ansi-colors --details=tree --details-theme=ascii > "$DIR/junit.log" 2>&1 & JPID=$!
wait "$JPID"; rc=$?; JPID=
cat "$DIR/junit.log"
# the launcher's summary: "[ N tests successful ]", "[ M tests failed ]"
passed=$(sed -nE 's/^\[ *([0-9]+) tests successful *\]$/\1/p' "$DIR/junit.log")
failed=$(sed -nE 's/^\[ *([0-9]+) tests failed *\]$/\1/p' "$DIR/junit.log")
if [ -z "$passed" ] || [ -z "$failed" ]; then
    echo "clients-java: 0 passed, 1 failed"; exit 1
fi
[ "$rc" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
echo "clients-java: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
