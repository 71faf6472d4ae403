#!/bin/bash
# SPDX-License-Identifier: PostgreSQL
# bench/run.sh [--quick] — `make bench`: dlock against its anchors, measured
# in the same run on the same throwaway server (fsync on), written to
# bench/results/<date>-<host>.md with a PNG plot.  Benchmarks never gate CI.
#
# Workloads (see shared BENCHMARKS.md): 1 uncontended pairs, 2 try-lock
# pairs, 3 contended hand-off, 4 scale with many held leases and their mass
# expiry, 5 MySQL/MariaDB (bench/mysql_bench.sh), 6 dlock vs ZooKeeper
# (bench/coord.py), 7 adversarial names and crowds (bench/adversarial.sh).
# Anchors:
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
if [ $QUICK -eq 1 ]; then T=2; CLIENTS="1 32"; WAITERS="2 32"; HOLDS="0"; SCALE="0 5000 20000"
else T=10; CLIENTS="1 8 32"; WAITERS="2 8 32 128"; HOLDS="0 1"; SCALE="0 10000 100000 1000000"; fi

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
PGC=${PG_CONFIG:-pg_config}
gcc -O2 -Wall -o "$DIR/collide" "$ROOT/bench/collide.c" -I"$("$PGC" --includedir)" \
    -I"$("$PGC" --includedir-server)" -L"$("$PGC" --pkglibdir)" -lpgcommon -lpgport
redis-server --port "$RPORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize no \
    > "$DIR/redis.log" 2>&1 &
RPID=$!

PG_FSYNC=on PG_EXTRA_CONF="max_connections = 300
dlock.reap_interval = '1s'" "$ROOT/scripts/pg_cluster.sh" start "$DIR/pg" "$PORT"
export PGHOST=$DIR/pg PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
CONN="host=$PGHOST port=$PORT user=postgres dbname=postgres"
psql -X -q -c "CREATE TABLE bench_locks (name text PRIMARY KEY)"

. "$ROOT/bench/lib.sh"
write_scripts

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
echo "dlock: session locks, \`dlock_acquire(name)\` (their grants need no WAL flush: a crash ends"
echo "the session too). dlock lease: owner-keyed with a 1-minute TTL, every grant flushed to WAL"
echo "before it is acknowledged — as durable as the hand-rolled table. dlock async:"
echo "\`dlock.synchronous_commit = off\`, session locks."
echo
echo "| clients | SELECT 1 | advisory | table | dlock | dlock lease | dlock async | dlock / table | lease / table | dlock / advisory |"
echo "|---|---|---|---|---|---|---|---|---|---|"
} > "$RES"

declare -A DL
for c in $CLIENTS; do
    s1=$(rate "$c" select1); adv=$(rate "$c" advisory); tbl=$(rate "$c" table)
    dl=$(rate "$c" dlock); dll=$(rate "$c" lease)
    set_async off; dla=$(rate "$c" dlock); set_async on
    DL[$c]=$dl
    echo "| $c | $s1 | $adv | $tbl | $dl | $dll | $dla | $(ratio "$dl" "$tbl") | $(ratio "$dll" "$tbl") | $(ratio "$dl" "$adv") |" >> "$RES"
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
for hold in $HOLDS; do
    first=""
    echo "| hold | N | dlock hand-offs/s | Jain | wait p50 / p99 / max ms | max / ((N+1) × mean hold) | advisory hand-offs/s | Jain | wait p50 / p99 / max ms | dlock / advisory | Redis spin-lock pairs/s (failed SETs) | Jain | dlock / Redis |" >> "$RES"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|" >> "$RES"
    for n in $WAITERS; do
        read -r d_rate d_jain d50 d99 dmax < <("$DIR/handoff" "$CONN" dlock "$n" "$T" "$hold")
        read -r a_rate a_jain a50 a99 amax < <("$DIR/handoff" "$CONN" advisory "$n" "$T" "$hold")
        read -r r_rate r_jain _ r99 _ r_failed < <("$DIR/redis_lock" "$RPORT" one "$n" "$T" "$hold")
        [ -z "$first" ] && first=$d_rate
        # FIFO bound: a waiter waits for at most the N holders ahead of it
        # and the current one; a mean hold (hand-off included) is 1/rate
        fifo=$(awk -v m="$dmax" -v n="$n" -v r="$d_rate" 'BEGIN { if (r > 0) printf "%.2f", m / ((n + 1) * 1000 / r); else print "-" }')
        echo "| $hold ms | $n | $d_rate | $d_jain | $d50 / $d99 / $dmax | $fifo | $a_rate | $a_jain | $a50 / $a99 / $amax | $(ratio "$d_rate" "$a_rate") | $r_rate ($r_failed) | $r_jain | $(ratio "$d_rate" "$r_rate") |" >> "$RES"
        echo "$n $d_rate $a_rate $r_rate $d99 $a99 $r99 $d_jain $a_jain $r_jain" >> "$DIR/plot-$hold.dat"
        last=$d_rate
    done
    echo "" >> "$RES"
    echo "Hold $hold ms: dlock hand-offs at N=$n / N=${WAITERS%% *} = $(ratio "$last" "$first")." >> "$RES"
    echo "" >> "$RES"
done

{
echo "## 4. Scale: uncontended pairs at 8 clients with other leases held"
echo
echo "Each lease has its own owner key (one lock, one holder and one owner each)."
echo
echo "| leases held | pairs/s | vs empty | worker private memory (RssAnon) MiB | dlock.held size MiB | load rate leases/s |"
echo "|---|---|---|---|---|---|"
} >> "$RES"
base=""; have=0; load_rate=0; DEADLINE=""
for held in $SCALE; do
    if [ "$held" -gt "$have" ]; then
        t0=$(date +%s.%N)
        if [ "$held" -eq "${SCALE##* }" ] && [ "$load_rate" != 0 ]; then
            # at the last step every lease runs out at one deadline: after
            # this load, the renewal of those already held and one
            # measurement, at the load rate seen so far (+50%)
            secs=$(awk -v n="$held" -v r="$load_rate" -v t="$T" 'BEGIN { printf "%d", n / r * 1.5 + t + 5 }')
            DEADLINE=$(psql -X -At -c "SELECT now() + '$secs s'")
            to_deadline="'$DEADLINE'::timestamptz - clock_timestamp()"
            load_leases $((have + 1)) "$held" "$to_deadline"
        else
            load_leases $((have + 1)) "$held" "'1 hour'"
        fi
        load_rate=$(awk -v n=$((held - have)) -v t0="$t0" -v t1="$(date +%s.%N)" 'BEGIN { printf "%d", n / (t1 - t0) }')
        if [ -n "$DEADLINE" ] && [ "$have" -gt 0 ]; then
            for_leases 1 "$have" "dlock_renew('scale/' || i, ttl => $to_deadline, owner => 'scale-' || i)"
        fi
        have=$held
    fi
    r=$(rate 8 dlock); [ -z "$base" ] && base=$r
    rss=$(worker_rss)
    size=$(psql -X -At -c "SELECT round(pg_total_relation_size('dlock.held') / 1048576.0)")
    echo "| $held | $r | $(ratio "$r" "$base") | $rss | $size | $([ "$held" -gt 0 ] && echo "$load_rate" || echo -) |" >> "$RES"
done

if [ -n "$DEADLINE" ]; then
    expiring=$(psql -X -At -c "SELECT count(*) FROM dlock.held WHERE expires_at < '$DEADLINE'::timestamptz + '1 min'")
    left=$(psql -X -At -c "SELECT ceil(extract(epoch FROM '$DEADLINE'::timestamptz - now()))")
    if [ "$left" -gt 1 ]; then sleep $((left - 1)); fi
    # acquire latency of 8 clients on their own names while the leases go
    window=$([ $QUICK -eq 1 ] && echo 8 || echo 20)
    "$DIR/handoff" "$CONN" dlock-own 8 "$window" 0 > "$DIR/expiry_latency" &
    lat_pid=$!
    reaped=""
    for _ in $(seq 120); do
        n=$(psql -X -At -c "SELECT count(*) FROM dlock.held WHERE expires_at < '$DEADLINE'::timestamptz + '1 min'")
        if [ "$n" -eq 0 ]; then
            reaped=$(psql -X -At -c "SELECT round(extract(epoch FROM clock_timestamp() - '$DEADLINE')::numeric, 1)")
            break
        fi
        sleep 0.5
    done
    wait $lat_pid
    read -r l_rate _ l50 l99 lmax < "$DIR/expiry_latency"
    {
    echo
    echo "Mass expiry: $expiring leases ran out at the same moment. All were reaped $([ -n "$reaped" ] && echo "$reaped s after it" || echo "NOT within 60 s") (polled every 0.5 s)."
    echo "Meanwhile 8 clients on their own names ($window s from 1 s before the deadline): $l_rate pairs/s,"
    echo "acquire latency p50 $l50 ms, p99 $l99 ms, max $lmax ms."
    echo
    } >> "$RES"
fi

# ---- 5. MySQL/MariaDB (bench/mysql_bench.sh: its own throwaway MariaDB) ------
# the dlock UDF vs GET_LOCK and a hand-rolled InnoDB lock table, one C driver
"$ROOT/bench/mysql_bench.sh" "$RES" "$T" "$CLIENTS" "$WAITERS" "$HOLDS" \
    "$OUT/$STAMP-$(hostname -s)-mysql-handoff.png"
# ---- end of 5 -----------------------------------------------------------------

# ---- 6. Coordination services (same Python driver) -------------------------
# dlock on this server vs ZooKeeper's fair lock (kazoo Lock), both from one
# Python driver, a process per client.  bench/coord.py starts its own
# ZooKeeper (own zoo.cfg and data dir under $DIR, 127.0.0.1, forceSync=yes)
# and stops it by pid at the end, also on failure or SIGTERM.
echo >> "$RES"
/usr/bin/python3 "$ROOT/bench/coord.py" $([ $QUICK -eq 1 ] && echo --quick) --seconds "$T" \
    --zk-port "${BENCH_ZK_PORT:-2191}" --workdir "$DIR" >> "$RES"
# ---- end of 6 -----------------------------------------------------------------

# ---- 7. Adversarial names and crowds (bench/adversarial.sh) ---------------------
export DIR T
if [ $QUICK -eq 1 ]; then "$ROOT/bench/adversarial.sh" "$RES" 3000 4000
else "$ROOT/bench/adversarial.sh" "$RES" 30000 40000; fi
# ---- end of 7 -----------------------------------------------------------------

# gnuplot's opening of a hand-offs/s-by-waiters plot: OUTPUT TITLE KEY-PLACE
handoff_axes() {
    printf 'set terminal png size 800,480 noenhanced\nset output "%s"\nset title "%s"\n' "$1" "$2"
    printf 'set xlabel "waiters"; set ylabel "hand-offs/s"; set logscale x 2; set key %s\nset yrange [0:*]\n' "$3"
}
if command -v gnuplot >/dev/null && [ -s "$DIR/plot-0.dat" ]; then
    PNG=$OUT/$STAMP-$(hostname -s)-handoff.png
    LAT=$OUT/$STAMP-$(hostname -s)-wait.png
    FAIR_HOLD=${HOLDS##* }  # spin-locks grow unfair when the lock is held a while
    gnuplot <<GP
$(handoff_axes "$PNG" "Contended hand-off, hold 0 ms (higher and flatter is better)" "bottom left")
plot "$DIR/plot-0.dat" using 1:2 with linespoints title "dlock", \\
     "$DIR/plot-0.dat" using 1:3 with linespoints title "pg_advisory_lock", \\
     "$DIR/plot-0.dat" using 1:4 with linespoints title "Redis SET NX spin-lock (not durable)"
set output "$LAT"
set terminal png size 1000,440 noenhanced
set multiplot layout 1,2
set title "Wait p99, hold 0 ms (lower is better)"
set ylabel "ms"; set logscale y 10; set yrange [*:*]; set key top left
plot "$DIR/plot-0.dat" using 1:5 with linespoints title "dlock", \\
     "$DIR/plot-0.dat" using 1:6 with linespoints title "advisory", \\
     "$DIR/plot-0.dat" using 1:7 with linespoints title "Redis spin-lock"
set title "Fairness, hold $FAIR_HOLD ms: Jain's index over clients (1 = fair)"
unset logscale y; set yrange [0:1.05]; set ylabel "Jain"; set key bottom left
plot "$DIR/plot-$FAIR_HOLD.dat" using 1:8 with linespoints title "dlock", \\
     "$DIR/plot-$FAIR_HOLD.dat" using 1:9 with linespoints title "advisory", \\
     "$DIR/plot-$FAIR_HOLD.dat" using 1:10 with linespoints title "Redis spin-lock"
unset multiplot
GP
    printf '\n![hand-off plot](%s)\n\n![wait and fairness plot](%s)\n' "$(basename "$PNG")" "$(basename "$LAT")" >> "$RES"
fi
if command -v gnuplot >/dev/null && [ -s "$DIR/plot-zk-0.dat" ]; then
    ZPNG=$OUT/$STAMP-$(hostname -s)-zk-handoff.png
    ZPLOT=""                 # a dlock and a ZooKeeper line per hold
    for h in $HOLDS; do
        ZPLOT="$ZPLOT${ZPLOT:+, }\"$DIR/plot-zk-$h.dat\" using 1:2 with linespoints title \"dlock, hold $h ms\", \
\"$DIR/plot-zk-$h.dat\" using 1:3 with linespoints title \"ZooKeeper, hold $h ms\""
    done
    gnuplot <<GP
$(handoff_axes "$ZPNG" "Contended hand-off, dlock vs ZooKeeper, one Python driver" "top right")
plot $ZPLOT
GP
    printf '\n![dlock vs ZooKeeper hand-off plot](%s)\n' "$(basename "$ZPNG")" >> "$RES"
fi

echo
cat "$RES"
echo
echo "written to $RES"
