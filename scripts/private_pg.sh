#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/private_pg.sh DIR — a private, relocated copy of the system's
# PostgreSQL 15 binaries and share files under DIR, for working on dlock
# beside another build without touching the system's pkglibdir.  Prints the
# PG_CONFIG to export; every script here builds, installs and runs clusters
# with the binaries that PG_CONFIG names.
#
#   export PG_CONFIG=$(scripts/private_pg.sh /opt/pg-mine)
#   make check
#
# PostgreSQL finds its lib and share directories relative to its binary, so
# a copy of both trees (plus the headers, linked) is a complete install.
set -eu
DIR=${1:?usage: private_pg.sh DIR}
"$(dirname "$0")/deps.sh" >/dev/null
if [ ! -x "$DIR/usr/lib/postgresql/15/bin/pg_config" ]; then
    mkdir -p "$DIR/usr/lib/postgresql" "$DIR/usr/share/postgresql"
    cp -a /usr/lib/postgresql/15 "$DIR/usr/lib/postgresql/"
    cp -a /usr/share/postgresql/15 "$DIR/usr/share/postgresql/"
    ln -sfn /usr/include "$DIR/usr/include"
    chmod 755 "$DIR" "$DIR/usr"  # the postgres user runs these binaries
fi
echo "$DIR/usr/lib/postgresql/15/bin/pg_config"
