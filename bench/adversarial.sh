#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# bench/adversarial.sh RES NAMES CROWD — section 7 of `make bench`: what one
# role can make the lock manager pay for.  Needs the running cluster (PG*
# variables), $DIR (scratch, with bench/collide built as $DIR/collide) and
# $T (seconds per cell); appends its tables to RES.
#   a) NAMES names that collide under PostgreSQL's unkeyed string hash
#      (hash_bytes, low 13 bits equal: one bucket of any dynahash table up
#      to 8,192 buckets, a handful in a larger one) against NAMES random
#      names: loading them as leases, pairs on more of them at 8 clients
#      while they are held, and releasing them; worker CPU per operation.
#   b) one name held shared by CROWD owners against 10: pairs (shared,
#      each client its own owner key) at 8 clients on that name.
set -eu
RES=$1; NAMES=$2; CROWD=$3
ROOT=$(cd "$(dirname "$0")/.." && pwd)
. "$ROOT/bench/lib.sh"

worker_ticks() { awk '{print $14 + $15}' "/proc/$(worker_pid)/stat"; }
# worker CPU µs per operation from a tick count (USER_HZ 100) and a count
us_per() { awk -v t="$1" -v n="$2" 'BEGIN { if (n > 0) printf "%.1f", t * 10000 / n; else print "-" }'; }
# one SQL expression over the name column of adv_names(kind, i, name), in 8 sessions
over_names() {
    local kind=$1 from=$2 to=$3 call=$4 pids=()
    for k in $(seq 0 7); do
        psql -X -q -c "SELECT count($call) FROM adv_names WHERE kind = '$kind'
                       AND i BETWEEN $from AND $to AND i % 8 = $k" >/dev/null &
        pids+=($!)
    done
    wait "${pids[@]}"
}

# NAMES held + 8 more for the clients, of each kind, all 4 + 8 bytes long
"$DIR/collide" $((NAMES + 8)) 13 "adv/" > "$DIR/colliding.txt"
psql -X -q -c "DROP TABLE IF EXISTS adv_names" \
    -c "CREATE TABLE adv_names (kind text, i int, name text)" \
    -c "\\copy adv_names (name) FROM '$DIR/colliding.txt'" \
    -c "UPDATE adv_names SET kind = 'colliding', i = n FROM (SELECT name AS nm, row_number() OVER () AS n FROM adv_names) x WHERE name = nm" \
    -c "INSERT INTO adv_names SELECT 'random', i, 'adv/' || substr(md5(random()::text), 1, 8)
          FROM generate_series(1, $((NAMES + 8))) i" \
    -c "CREATE INDEX ON adv_names (kind, i)"
buckets=$(psql -X -At -c "SELECT count(DISTINCT hashtext(name) & 8191) FROM adv_names WHERE kind = 'colliding'")

{
echo
echo "## 7. Adversarial names and crowds"
echo
echo "a) $NAMES names that collide under PostgreSQL's unkeyed string hash (\`hashtext\`, low 13 bits"
echo "equal: they fill $buckets bucket(s) of an 8,192-bucket table) against $NAMES random names of the same length."
echo "Each name is taken as a lease with its own owner key (8 sessions), then 8 clients take and release"
echo "8 more names of the same kind, then the leases are released. The lock manager hashes with"
echo "SipHash under a seed drawn at each start, so no name can be aimed at its buckets."
echo
echo "| names | leases loaded/s | worker µs per lease | pairs/s at 8 clients, leases held | leases released/s | worker µs per release |"
echo "|---|---|---|---|---|---|"
} >> "$RES"
script adv_pair "\\set c :client_id + $NAMES + 1
SELECT dlock_acquire(name) FROM adv_names WHERE kind = :kind AND i = :c;
SELECT dlock_release(name) FROM adv_names WHERE kind = :kind AND i = :c;"
declare -A PAIRS
for kind in random colliding; do
    w0=$(worker_ticks); t0=$(date +%s.%N)
    over_names "$kind" 1 "$NAMES" "dlock_acquire(name, ttl => '1 hour', owner => name)"
    w1=$(worker_ticks); t1=$(date +%s.%N)
    pairs=$(pgbench -n -M prepared -j 2 -c 8 -T "$T" -D kind="$kind" -f "$DIR/adv_pair.sql" 2>/dev/null |
        sed -n 's/^tps = \([0-9.]*\).*/\1/p' | cut -d. -f1)
    PAIRS[$kind]=$pairs
    w2=$(worker_ticks); t2=$(date +%s.%N)
    over_names "$kind" 1 "$NAMES" "dlock_release(name, owner => name)"
    w3=$(worker_ticks); t3=$(date +%s.%N)
    echo "| $kind | $(awk -v n="$NAMES" -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", n / (b - a) }') | $(us_per $((w1 - w0)) "$NAMES") | $pairs | $(awk -v n="$NAMES" -v a="$t2" -v b="$t3" 'BEGIN { printf "%d", n / (b - a) }') | $(us_per $((w3 - w2)) "$NAMES") |" >> "$RES"
done
echo >> "$RES"
echo "Colliding / random pairs/s: $(ratio "${PAIRS[colliding]}" "${PAIRS[random]}")." >> "$RES"

# b) a crowd of shared holders on one name
{
echo
echo "b) One name held shared (PR) by N owners (leases, one owner key each); 8 clients take and release"
echo "it shared with their own keys. Nothing the lock manager does per operation walks the holders."
echo
echo "| shared holders | pairs/s at 8 clients | vs 10 holders |"
echo "|---|---|---|"
} >> "$RES"
script adv_crowd "SELECT dlock_acquire('adv/crowd', 'shared', ttl => '1 min', owner => 'adv-c' || :client_id);
SELECT dlock_release('adv/crowd', owner => 'adv-c' || :client_id);"
base=""
have=0
for n in 10 "$CROWD"; do
    for_leases $((have + 1)) "$n" "dlock_acquire('adv/crowd', 'shared', ttl => '1 hour', owner => 'adv-h' || i)"
    have=$n
    r=$(rate 8 adv_crowd); [ -z "$base" ] && base=$r
    echo "| $n | $r | $(ratio "$r" "$base") |" >> "$RES"
done
for_leases 1 "$have" "dlock_release('adv/crowd', owner => 'adv-h' || i)"
psql -X -q -c "DROP TABLE adv_names"
