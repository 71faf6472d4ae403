# SPDX-License-Identifier: PostgreSQL
# bench/lib.sh — helpers shared by bench/run.sh and bench/compare.sh (sourced).
# They use $DIR (scratch), $T (seconds per cell) and libpq's PG* variables.

script() { printf '%s\n' "$2" > "$DIR/$1.sql"; }

# the pgbench scripts both benchmarks run
write_scripts() {
    script select1 "SELECT 1;"
    script advisory "SELECT pg_advisory_lock(:client_id);
SELECT pg_advisory_unlock(:client_id);"
    script table "INSERT INTO bench_locks VALUES ('c' || :client_id) ON CONFLICT DO NOTHING;
DELETE FROM bench_locks WHERE name = 'c' || :client_id;"
    script dlock "SELECT dlock_acquire('c' || :client_id);
SELECT dlock_release('c' || :client_id);"
    script lease "SELECT dlock_acquire('c' || :client_id, ttl => '1 min', owner => 'k' || :client_id);
SELECT dlock_release('c' || :client_id, owner => 'k' || :client_id);"
    script try_advisory "SELECT pg_try_advisory_lock(:client_id);
SELECT pg_advisory_unlock(:client_id);"
    script try_dlock "SELECT dlock_try_acquire('c' || :client_id);
SELECT dlock_release('c' || :client_id);"
}

# pairs/s of a pgbench script at c clients
rate() {
    local clients=$1 name=$2
    pgbench -n -M prepared -j 2 -c "$clients" -T "$T" -f "$DIR/$name.sql" 2>/dev/null |
        sed -n 's/^tps = \([0-9.]*\).*/\1/p' | cut -d. -f1
}

set_async() {
    psql -X -q -c "ALTER SYSTEM SET dlock.synchronous_commit = $1" -c "SELECT pg_reload_conf()" >/dev/null
    sleep 0.5
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

# CALL (an SQL expression over i) for i in FROM..TO, from 8 parallel sessions
for_leases() {
    local from=$1 to=$2 call=$3 loaders=()
    for k in $(seq 0 7); do
        psql -X -q -c "SELECT count($call) FROM generate_series($from + $k, $to, 8) i" >/dev/null &
        loaders+=($!)
    done
    wait "${loaders[@]}"
}

# leases scale/FROM..TO, each with its own owner key; the TTL is TTL_SQL,
# evaluated per call (so a deadline can be the same for every lease)
load_leases() { for_leases "$1" "$2" "dlock_acquire('scale/' || i, ttl => $3, owner => 'scale-' || i)"; }

worker_pid() { psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock lock manager'"; }

# the lock manager's private memory, MiB
worker_rss() { awk '/RssAnon/ {printf "%.0f", $2 / 1024}' "/proc/$(worker_pid)/status"; }
