#!/bin/bash
# bench/run.sh [--quick] — `make bench`: dlock against its anchors, measured
# in the same run on the same throwaway server (fsync on), written to
# bench/results/<date>-<host>.md with a PNG plot.  Benchmarks never gate CI.
#
# Workloads (see shared BENCHMARKS.md): 1 uncontended pairs, 2 try-lock
# pairs, 3 contended hand-off, 4 scale with many held leases.  Anchors:
# SELECT 1, pg_advisory_lock, a hand-rolled lock table, and a Redis
# SET NX PX lock (bench/redis_lock.c, its own redis-server, not durable).
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
QUICK=0; [ "${1:-}" == "--quick" ] && QUICK=1
PORT=${BENCH_PORT:-5494}
RPORT=${BENCH_REDIS_PORT:-6391}
RPID=
DIR=$(mktemp -d /tmp/dlock-bench.XXXXXX); chmod 755 "$DIR"
OUT=$ROOT/bench/results; mkdir -p "$OUT"
STAMP=$(date -u +%Y-%m-%d)
RES=$OUT/$STAMP-$(hostname -s).md
if [ $QUICK -eq 1 ]; then T=3; CLIENTS="1 8 32"; WAITERS="2 8 32"; HOLDS="0"; SCALE="0 10000"
else T=10; CLIENTS="1 8 32"; WAITERS="2 8 32 128"; HOLDS="0 1"; SCALE="0 10000 100000"; fi

cleanup() {
    "$ROOT/scripts/pg_cluster.sh" stop "$DIR/pg" 2>/dev/null
    [ -n "$RPID" ] && kill "$RPID" 2>/dev/null
    rm -rf "$DIR"
}
trap cleanup EXIT

"$ROOT/scripts/deps.sh" gnuplot-nox redis-server libhiredis-dev zookeeper python3-kazoo >/dev/null
make -s -C "$ROOT/pg_ext" >/dev/null && make -s -C "$ROOT/pg_ext" install >/dev/null
gcc -O2 -Wall -o "$DIR/handoff" "$ROOT/bench/handoff.c" -I"$("${PG_CONFIG:-pg_config}" --includedir)" -lpq -lpthread
gcc -O2 -Wall -o "$DIR/redis_lock" "$ROOT/bench/redis_lock.c" -lhiredis -lpthread
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    > "$DIR/redis.log" 2>&1 &
RPID=$!

PG_FSYNC=on PG_EXTRA_CONF="max_connections = 300
dlock.reap_interval = '1s'" "$ROOT/scripts/pg_cluster.sh" start "$DIR/pg" "$PORT"
export PGHOST=$DIR/pg PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
CONN="host=$PGHOST port=$PORT user=postgres dbname=postgres"
psql -X -q -c "CREATE TABLE bench_locks (name text PRIMARY KEY)"

script() { printf '%s\n' "$2" > "$DIR/$1.sql"; }
script select1 "SELECT 1;"
script advisory "SELECT pg_advisory_lock(:client_id);
SELECT pg_advisory_unlock(:client_id);"
script table "INSERT INTO bench_locks VALUES ('c' || :client_id) ON CONFLICT DO NOTHING;
DELETE FROM bench_locks WHERE name = 'c' || :client_id;"
script dlock "SELECT dlock_acquire('c' || :client_id);
SELECT dlock_release('c' || :client_id);"
script try_advisory "SELECT pg_try_advisory_lock(:client_id);
SELECT pg_advisory_unlock(:client_id);"
script try_dlock "SELECT dlock_try_acquire('c' || :client_id);
SELECT dlock_release('c' || :client_id);"

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

{
echo "# dlock benchmark — $STAMP on $(hostname -s)"
echo
echo "$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -r), PostgreSQL $(pg_config --version | cut -d' ' -f2)."
echo "fsync on; cells of ${T} s$([ $QUICK -eq 1 ] && echo ', quick run'). Ratios are against anchors measured"
echo "in this run on this server. fdatasync on this machine kind is fast (~100 µs behind a"
echo "write-back cache): durable figures are optimistic compared with real disks."
echo
echo "## 1. Uncontended pairs (acquire + release, own name per client), pairs/s"
echo
echo "| clients | SELECT 1 | advisory | table | dlock | dlock async | dlock / table | dlock / advisory |"
echo "|---|---|---|---|---|---|---|---|"
} > "$RES"

declare -A DL
for c in $CLIENTS; do
    s1=$(rate "$c" select1); adv=$(rate "$c" advisory); tbl=$(rate "$c" table)
    dl=$(rate "$c" dlock); set_async off; dla=$(rate "$c" dlock); set_async on
    DL[$c]=$dl
    echo "| $c | $s1 | $adv | $tbl | $dl | $dla | $(ratio "$dl" "$tbl") | $(ratio "$dl" "$adv") |" >> "$RES"
done

{
echo
echo "Redis anchor (SET NX PX + compare-and-delete script, own key, in memory — not durable):"
echo
echo "| clients | Redis pairs/s | dlock / Redis |"
echo "|---|---|---|"
} >> "$RES"
for c in $CLIENTS; do
    read -r r_rate _ < <("$DIR/redis_lock" "$RPORT" own "$c" "$T" 0)
    echo "| $c | $r_rate | $(ratio "${DL[$c]}" "$r_rate") |" >> "$RES"
done

commits_before=$(psql -X -At -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'")
n_check=$(pgbench -n -M prepared -c 1 -t 1000 -f "$DIR/dlock.sql" 2>/dev/null | sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p')
commits_after=$(psql -X -At -c "SELECT xact_commit FROM pg_stat_database WHERE datname = 'postgres'")
{
echo
echo "Check: pgbench counted $n_check pairs; the server's xact_commit rose by $((commits_after - commits_before)) (one per client statement, two per pair, plus the worker's own commits)."
echo
echo "## 2. Try-lock pairs at 8 clients, pairs/s"
echo
echo "| pg_try_advisory_lock | dlock_try_acquire | ratio |"
echo "|---|---|---|"
} >> "$RES"
ta=$(rate 8 try_advisory); td=$(rate 8 try_dlock)
echo "| $ta | $td | $(ratio "$td" "$ta") |" >> "$RES"

{
echo
echo "## 3. Contended hand-off: one name, N clients looping acquire → hold → release"
echo
} >> "$RES"
: > "$DIR/plot.dat"
for hold in $HOLDS; do
    first=""
    echo "| hold | N | dlock hand-offs/s | Jain | wait p50 / p99 / max ms | advisory hand-offs/s | Jain | wait p50 / p99 / max ms | dlock / advisory | Redis spin-lock pairs/s (failed SETs) | Jain | dlock / Redis |" >> "$RES"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|" >> "$RES"
    for n in $WAITERS; do
        read -r d_rate d_jain d50 d99 dmax < <("$DIR/handoff" "$CONN" dlock "$n" "$T" "$hold")
        read -r a_rate a_jain a50 a99 amax < <("$DIR/handoff" "$CONN" advisory "$n" "$T" "$hold")
        read -r r_rate r_jain _ _ _ r_failed < <("$DIR/redis_lock" "$RPORT" one "$n" "$T" "$hold")
        [ -z "$first" ] && first=$d_rate
        echo "| $hold ms | $n | $d_rate | $d_jain | $d50 / $d99 / $dmax | $a_rate | $a_jain | $a50 / $a99 / $amax | $(ratio "$d_rate" "$a_rate") | $r_rate ($r_failed) | $r_jain | $(ratio "$d_rate" "$r_rate") |" >> "$RES"
        [ "$hold" == "0" ] && echo "$n $d_rate $a_rate $r_rate" >> "$DIR/plot.dat"
        last=$d_rate
    done
    echo "" >> "$RES"
    echo "Hold $hold ms: dlock hand-offs at N=$n / N=${WAITERS%% *} = $(ratio "$last" "$first")." >> "$RES"
    echo "" >> "$RES"
done

{
echo "## 4. Scale: uncontended pairs at 8 clients with other leases held"
echo
echo "| leases held | pairs/s | vs empty | worker private memory (RssAnon) MiB | dlock.held size MiB |"
echo "|---|---|---|---|---|"
} >> "$RES"
base=""
for held in $SCALE; do
    have=$(psql -X -At -c "SELECT count(*) FROM dlock.held WHERE owner LIKE 'scale-%'")
    if [ "$held" -gt "$have" ]; then
        # 8 loaders in parallel, each an owner key per lease
        loaders=()
        for k in $(seq 0 7); do
            psql -X -q -c "SELECT count(dlock_acquire('scale/' || i, ttl => '1 hour', owner => 'scale-' || i)) FROM generate_series($have + 1 + $k, $held, 8) i" >/dev/null &
            loaders+=($!)
        done
        wait "${loaders[@]}"
    fi
    r=$(rate 8 dlock); [ -z "$base" ] && base=$r
    wpid=$(psql -X -At -c "SELECT pid FROM pg_stat_activity WHERE backend_type = 'dlock lock manager'")
    rss=$(awk '/RssAnon/ {printf "%.0f", $2 / 1024}' "/proc/$wpid/status")
    size=$(psql -X -At -c "SELECT round(pg_total_relation_size('dlock.held') / 1048576.0)")
    echo "| $held | $r | $(ratio "$r" "$base") | $rss | $size |" >> "$RES"
done

# ---- 6. Coordination services (same Python driver) -------------------------
# dlock on this server vs ZooKeeper's fair lock (kazoo Lock), both from one
# Python driver, a process per client.  bench/coord.py starts its own
# ZooKeeper (own zoo.cfg and data dir under $DIR, 127.0.0.1, forceSync=yes)
# and stops it by pid at the end, also on failure or SIGTERM.
echo >> "$RES"
/usr/bin/python3 "$ROOT/bench/coord.py" $([ $QUICK -eq 1 ] && echo --quick) --seconds "$T" \
    --zk-port "${BENCH_ZK_PORT:-2191}" --workdir "$DIR" >> "$RES"
# ---- end of 6 -----------------------------------------------------------------

if command -v gnuplot >/dev/null && [ -s "$DIR/plot.dat" ]; then
    PNG=$OUT/$STAMP-$(hostname -s)-handoff.png
    gnuplot <<GP
set terminal png size 800,480 noenhanced
set output "$PNG"
set title "Contended hand-off, hold 0 ms (higher and flatter is better)"
set xlabel "waiters"; set ylabel "hand-offs/s"; set logscale x 2; set key bottom left
set yrange [0:*]
plot "$DIR/plot.dat" using 1:2 with linespoints title "dlock (durable)", \
     "$DIR/plot.dat" using 1:3 with linespoints title "pg_advisory_lock", \
     "$DIR/plot.dat" using 1:4 with linespoints title "Redis SET NX spin-lock (not durable)"
GP
    printf '\n![hand-off plot](%s)\n' "$(basename "$PNG")" >> "$RES"
fi

echo
cat "$RES"
echo
echo "written to $RES"
