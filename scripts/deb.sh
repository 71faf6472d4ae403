#!/bin/bash
# scripts/deb.sh — `make deb`: the Debian packages postgresql-15-dlock and
# mariadb-plugin-dlock, built with Debian's tooling (dpkg-buildpackage, dh;
# debian/rules), into deb/ of this checkout.  Installs the build
# dependencies that are missing.  The tree's build products are cleaned
# first (dh_auto_clean) and rebuilt.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
"$ROOT/scripts/deps.sh" debhelper dpkg-dev postgresql-server-dev-all postgresql-server-dev-15 \
    libpq-dev libmariadb-dev mariadb-server >/dev/null
# dpkg-buildpackage writes the packages next to the source tree: move them in
parent=$(dirname "$ROOT")
version=$(dpkg-parsechangelog -S Version)
arch=$(dpkg --print-architecture)
dpkg-buildpackage -b -us -uc > "$ROOT/debian/build.log" 2>&1 ||
    { tail -30 "$ROOT/debian/build.log" >&2; echo "deb.sh: dpkg-buildpackage failed" >&2; exit 1; }
mkdir -p "$ROOT/deb"
for f in "postgresql-15-dlock_${version}_${arch}.deb" "mariadb-plugin-dlock_${version}_${arch}.deb" \
         "postgresql-15-dlock-dbgsym_${version}_${arch}.deb" "mariadb-plugin-dlock-dbgsym_${version}_${arch}.deb" \
         "dlock_${version}_${arch}.buildinfo" "dlock_${version}_${arch}.changes"; do
    [ -f "$parent/$f" ] && mv -f "$parent/$f" "$ROOT/deb/"
done
ls "$ROOT"/deb/*.deb
