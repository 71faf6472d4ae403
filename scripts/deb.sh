#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/deb.sh — `make deb`: this system's Debian packages of dlock,
# built with Debian's tooling (pg_buildext, dpkg-buildpackage, dh;
# debian/rules) into deb/ of this checkout: postgresql-NN-dlock for each
# PostgreSQL version the system supports (15 on Debian 12), dlock (the
# command) and mariadb-plugin-dlock for its MariaDB.  Installs the build
# dependencies that are missing.  The tree's build products are cleaned
# first (dh_auto_clean) and rebuilt.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
"$ROOT/scripts/deps.sh" debhelper dpkg-dev postgresql-server-dev-all \
    libpq-dev libmariadb-dev libmariadbd-dev libcrypt-dev mariadb-server >/dev/null
# debian/control lists a postgresql-NN-dlock for each supported version here
pg_buildext updatecontrol
# dpkg-buildpackage writes the packages next to the source tree: move them in
parent=$(dirname "$ROOT")
version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
dpkg-buildpackage -b -us -uc > "$ROOT/debian/build.log" 2>&1 ||
    { tail -30 "$ROOT/debian/build.log" >&2; echo "deb.sh: dpkg-buildpackage failed" >&2; exit 1; }
mkdir -p "$ROOT/deb"
for f in "$parent"/postgresql-*-dlock*_"${version}_${arch}".deb \
         "$parent"/dlock_"${version}_${arch}".deb "$parent"/dlock-dbgsym_"${version}_${arch}".deb \
         "$parent"/mariadb-plugin-dlock*_"${version}_${arch}".deb \
         "$parent/dlock_${version}_${arch}.buildinfo" "$parent/dlock_${version}_${arch}.changes"; do
    [ -f "$f" ] && mv -f "$f" "$ROOT/deb/"
done
ls "$ROOT"/deb/*.deb
