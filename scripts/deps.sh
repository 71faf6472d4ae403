#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# scripts/deps.sh — install the Debian packages the build and tests need,
# only those missing (apt-get update once, only if something is missing).
# The PostgreSQL major version is $DLOCK_PG_MAJOR, else that of $PG_CONFIG
# (`$PG_CONFIG --version`), else 15 (Debian 12's); `make matrix` sets it in
# its Debian 13 and sid systems (17, 18).
set -eu
PG_MAJOR=${DLOCK_PG_MAJOR:-}
if [ -z "$PG_MAJOR" ] && [ -n "${PG_CONFIG:-}" ]; then
    PG_MAJOR=$("$PG_CONFIG" --version 2>/dev/null | sed -nE 's/^PostgreSQL ([0-9]+).*/\1/p') || true
fi
PG_MAJOR=${PG_MAJOR:-15}
need=()
for p in build-essential "postgresql-$PG_MAJOR" "postgresql-server-dev-$PG_MAJOR" \
         libpq-dev libmariadb-dev python3-psycopg2 pgbouncer python3-psycopg "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    echo "installing: ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need[@]}" >/dev/null
    # a packaged cluster is not needed: tests run their own
    if command -v pg_lsclusters >/dev/null && pg_lsclusters -h 2>/dev/null | grep -q "^$PG_MAJOR main"; then
        pg_ctlcluster "$PG_MAJOR" main stop 2>/dev/null || true
    fi
    # nor the packaged exporter (it would listen on every address):
    # regress/exporter starts its own on loopback
    if [[ " ${need[*]} " == *" prometheus-postgres-exporter "* ]]; then
        if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
            systemctl stop prometheus-postgres-exporter 2>/dev/null || true
        elif [ -x /etc/init.d/prometheus-postgres-exporter ]; then
            /etc/init.d/prometheus-postgres-exporter stop >/dev/null 2>&1 || true
        fi
    fi
    # nor the packaged etcd (it would serve 127.0.0.1:2379 from
    # /var/lib/etcd): bench/run.sh starts its own on private ports
    if [[ " ${need[*]} " == *" etcd-server "* ]]; then
        if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
            systemctl stop etcd 2>/dev/null || true
        elif [ -x /etc/init.d/etcd ]; then
            /etc/init.d/etcd stop >/dev/null 2>&1 || true
        fi
    fi
    # nor the packaged pgbouncer: regress/pgbouncer starts its own
    if [[ " ${need[*]} " == *" pgbouncer "* ]] && [ -x /etc/init.d/pgbouncer ]; then
        if command -v systemctl >/dev/null && [ -d /run/systemd/system ]; then
            systemctl stop pgbouncer 2>/dev/null || true
        else
            /etc/init.d/pgbouncer stop >/dev/null 2>&1 || true
        fi
    fi
fi
echo "dependencies present"
